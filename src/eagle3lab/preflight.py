"""Everything a GPU deployment needs, checked before anything is launched: ``python -m eagle3lab preflight``.

The incident's deployment loads 547 GB onto 8 GPUs before it can fail. Every problem that can be seen without
launching is found here, in seconds, each as one line with what to do: GPUs (count, architecture, memory against
``tp_size``), the sglang release and whether it is still pristine, both checkpoints (on disk, complete, size),
free disk, both server command lines through sglang's own ``ServerArgs``, the drafter's aux layer ids with the
layers they make sglang capture eagerly and under CUDA graphs, and the interconnect as evidence.

The ``cpu`` profile (tiny models generated here, no GPU) is passed over. A profile overridden to run on CPU
(the rehearsal of a GPU profile) skips the GPU checks, and says so in their rows.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import Eagle3LabError, PreflightFailed
from eagle3lab.paths import repo_dir
from eagle3lab.runtime import checkpoints, deployment, envinfo, gpuinfo, modelinfo
from eagle3lab.runtime.checkpoints import Checkpoint
from eagle3lab.runtime.launch_env import (CUDNN_CHECK_ENV, CUDNN_CHECK_REASON, CUDNN_CHECK_SITE,
                                          launch_environment)
from eagle3lab.runtime.profiles import Profile, load_profile
from eagle3lab.runtime.tinymodel.configs import REAL_AUX_LAYER_IDS, REAL_NUM_LAYERS
from eagle3lab.package import patching
from eagle3lab.runtime.sglang_args import parse_launches
from eagle3lab.fix import capture_order_fix
from eagle3lab.sidecars import InterfaceTraceSidecar, read_if_present
from eagle3lab.trace import audit, capture_order, sources
from eagle3lab.trace.startup import StartupProfile

Outcome = Literal["ok", "warn", "fail", "skipped", "info"]
SLOW = "server flags"  # sglang's parser imports sglang (seconds); skipped by a quick run once something failed


@dataclass
class Check:
    """One check: its outcome, one line of detail, what to do, and the evidence behind it."""

    name: str
    outcome: Outcome
    detail: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {"check": self.name, "outcome": self.outcome, "detail": self.detail, "fix": self.fix or ""}


@dataclass
class Preflight:
    """All checks of one profile; ``ok`` unless one failed."""

    profile: str
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    passed_over: str | None = None  # why no check applies (the cpu profile)
    quick: bool = False

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def rows(self) -> list[dict[str, Any]]:
        if self.passed_over:
            return [{"check": "preflight", "outcome": "skipped", "detail": self.passed_over, "fix": ""}]
        return [c.row() for c in self.checks]

    def problem_line(self) -> str:
        """The first failure and its fix in one line, and how many more there are."""
        first = self.failures[0]
        line = first.detail + (f"; {first.fix}" if first.fix else "")
        more = len(self.failures) - 1
        return line + (f" (+{more} more failed check{'s' if more > 1 else ''}: "
                       f"python -m eagle3lab preflight --profile {self.profile})" if more else "")

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "ok": self.ok, "passed_over": self.passed_over, "quick": self.quick,
                "seconds": self.seconds, "checks": [asdict(c) for c in self.checks]}

    def text(self) -> str:
        """A plain table for the terminal."""
        width = max((len(c.name) for c in self.checks), default=10)
        if self.passed_over:
            return f"preflight {self.profile}: passed over ({self.passed_over})"
        lines = [f"preflight {self.profile} ({self.seconds:.1f} s):"]
        for c in self.checks:
            lines.append(f"  {c.outcome:<7} {c.name:<{width}}  {c.detail}")
            if c.fix and c.outcome in ("fail", "warn", "skipped"):
                lines.append(f"  {'':<7} {'':<{width}}  -> {c.fix}")
        return "\n".join(lines)


def passed_over(profile: Profile) -> str | None:
    """Why preflight does not apply to this profile, or None when it does."""
    if profile.device == "cpu" and profile.target_model == deployment.TINY and profile.draft_model == deployment.TINY:
        return (f"profile {profile.name} runs generated tiny models on the CPU: no GPU, checkpoint or download "
                "to check")
    return None


def _size(nbytes: int) -> str:
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:.1f} MB"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------------------------------------------------
# The checks


def check_gpu_count(profile: Profile, inv: gpuinfo.GpuInventory | None) -> Check:
    if inv is None:
        return Check("GPUs", "skipped", f"profile {profile.name} runs on {profile.device} (device key): GPU "
                                        "checks do not apply")
    data = inv.to_dict()
    if inv.count < profile.tp_size:
        why = f" ({inv.error})" if inv.error else ""
        return Check("GPUs", "fail", f"{profile.name} needs {_plural(profile.tp_size, 'CUDA GPU')}; "
                                     f"found {inv.count}{why}",
                     f"run on a machine with {_plural(profile.tp_size, 'CUDA GPU')}"
                     + (", or lower tp_size (--set tp_size=N)" if profile.tp_size > 1 else ""), data)
    names = sorted({g.name for g in inv.gpus})
    return Check("GPUs", "ok", f"{inv.count} CUDA GPUs ({', '.join(names)}) for tp_size {profile.tp_size}; "
                               f"driver {inv.driver or 'unknown'}, torch {inv.torch_version} CUDA {inv.torch_cuda}",
                 data=data)


def check_capability(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    name = "GPU architecture"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU to check")
    used = inv.gpus[:tp_size]
    compiled = set(inv.torch_arch_list)
    ptx = sorted(int(a.split("_")[1]) for a in compiled if a.startswith("compute_"))
    missing = sorted({g.sm for g in used if g.sm not in compiled})
    sms = sorted({g.sm for g in used})
    if not missing:
        return Check(name, "ok", f"{', '.join(sms)}; torch was built for it", data={"arch_list": inv.torch_arch_list})
    jit = [sm for sm in missing if any(p <= int(sm.split("_")[1]) for p in ptx)]
    if len(jit) == len(missing):
        return Check(name, "warn", f"{', '.join(missing)} runs from PTX (compiled at first use, slow start)",
                     "install a torch build that lists this architecture", {"arch_list": inv.torch_arch_list})
    return Check(name, "fail", f"torch {inv.torch_version} was not built for {', '.join(missing)} "
                               f"(it has {', '.join(sorted(compiled)) or 'none'})",
                 "install a torch build for this GPU (see pytorch.org)", {"arch_list": inv.torch_arch_list})


def check_sglang(profile: Profile) -> Check:
    name = "sglang"
    try:
        version = envinfo.check_sglang(profile.sglang_version)
    except Eagle3LabError as exc:
        return Check(name, "fail", str(exc), "make setup")
    changes = envinfo.installed_changes()
    data = {"version": version, **changes}
    if changes["missing"]:
        return Check(name, "fail", f"sglang {version} is missing {_plural(len(changes['missing']), 'file')} of its "
                                   f"release (first: {changes['missing'][0]})",
                     f"pip install --force-reinstall --no-deps sglang=={version}", data)
    if not changes["modified"]:
        return Check(name, "ok", f"sglang {version}, every file as in the release wheel's RECORD", data=data)

    applied = []
    for path in sorted(patching.PATCHES_DIR.glob("*.patch")):
        try:
            if patching.check(path).status == patching.ALREADY_APPLIED:
                applied.append(path.stem)
        except Eagle3LabError:
            pass
    data["project_patches_applied"] = applied
    if applied:
        return Check(name, "fail", f"sglang {version} carries the project's patch {', '.join(applied)} "
                                   "(notebook 01 needs the release as published)",
                     " ; ".join(f"python -m eagle3lab patch revert {p}" for p in applied), data)
    return Check(name, "fail", f"sglang {version} differs from its release in "
                               f"{_plural(len(changes['modified']), 'file')} (first: {changes['modified'][0]})",
                 f"pip install --force-reinstall --no-deps sglang=={version}", data)


def check_checkpoint(profile: Profile, ckpt: Checkpoint) -> Check:
    name = f"{ckpt.role} checkpoint"
    fetch = deployment.fetch_command(profile)
    if ckpt.kind == "generated":
        checkpoints.examine(ckpt)
        outcome: Outcome = "ok" if ckpt.complete else "fail"
        return Check(name, outcome, f"generated tiny model at {ckpt.path} ({_size(ckpt.bytes)})"
                     + (f": {'; '.join(ckpt.problems)}" if ckpt.problems else ""),
                     None if ckpt.complete else "python -m eagle3lab setup --profile " + profile.name, ckpt.to_dict())
    if not ckpt.present:
        where = f"the Hugging Face cache at {checkpoints.hub_cache_dir()}" if ckpt.kind == "hub" else "this machine"
        detail = f"{ckpt.source} is not in {where}" + (f" ({ckpt.problems[0]})" if ckpt.problems else "")
        return Check(name, "fail", detail, fetch if ckpt.kind == "hub" else
                     f"point the profile's {ckpt.role}_model at a model directory", ckpt.to_dict())
    checkpoints.examine(ckpt)
    origin = f"snapshot {ckpt.revision[:12]}" if ckpt.revision else "local directory"
    summary = f"{ckpt.source} at {ckpt.path} ({origin}): {_plural(ckpt.files, 'file')}, {_size(ckpt.bytes)}"
    if ckpt.problems:
        return Check(name, "fail", f"{summary}; incomplete: {'; '.join(ckpt.problems[:3])}",
                     f"{fetch} (resumes)" if ckpt.kind == "hub" else "copy the checkpoint again", ckpt.to_dict())
    return Check(name, "ok", f"{summary}; complete ({ckpt.checked})", data=ckpt.to_dict())


def check_gpu_memory(profile: Profile, inv: gpuinfo.GpuInventory | None, ckpts: list[Checkpoint],
                     mem_fraction: float | None = None) -> Check:
    """Weights per GPU against sglang's static pool, ``mem_fraction_static`` x GPU memory (the fraction sglang
    resolves for this launch; the weights and the KV cache share that pool)."""
    name = "GPU memory"
    if inv is None or inv.count < profile.tp_size or not inv.gpus:
        return Check(name, "skipped", "needs the GPUs")
    if not all(c.present for c in ckpts):
        return Check(name, "skipped", "needs both checkpoints on disk (their size)")
    weights = sum(c.bytes for c in ckpts)
    per_gpu = weights / profile.tp_size
    smallest = min(g.memory_bytes for g in inv.gpus[:profile.tp_size])
    share = per_gpu / smallest
    detail = (f"weights {weights / 1e9:.1f} GB / tp_size {profile.tp_size} = {per_gpu / 2**30:.1f} GiB per GPU, "
              f"{share:.0%} of {smallest / 2**30:.1f} GiB (checkpoint file sizes; the rest holds KV cache, "
              "activations and CUDA graphs)")
    data = {"weights_bytes": weights, "per_gpu_bytes": per_gpu, "gpu_memory_bytes": smallest, "share": share,
            "mem_fraction_static": mem_fraction}
    if share >= 1:
        return Check(name, "fail", "the weights do not fit: " + detail, "raise tp_size or use larger GPUs", data)
    if mem_fraction is not None and share >= mem_fraction:
        return Check(name, "fail", f"the weights do not fit sglang's static pool: {share:.0%} of the GPU against "
                                   f"mem_fraction_static {mem_fraction:.3f} (" + detail + ")",
                     "raise tp_size, use larger GPUs, or raise mem_fraction_static (--set mem_fraction_static=...)",
                     data)
    if mem_fraction is not None:
        detail += f"; sglang's static pool is {mem_fraction:.3f} of the GPU, {mem_fraction - share:.0%} left for KV"
    return Check(name, "ok", detail, data=data)


# CUDA toolkit -> the oldest Linux driver that runs it (NVIDIA CUDA Toolkit release notes, table "CUDA Toolkit and
# Corresponding Driver Versions": https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html)
MIN_DRIVER = {"12.4": "550.54.14", "12.6": "560.28.03", "12.8": "570.26", "12.9": "575.51.03"}
CUDNN_MIN = 91500  # sglang 0.5.9 refuses torch 2.9.1 with cuDNN < 9.15 (server_args.py:5263-5298)
IDLE_MIB = 1024  # a GPU with more than this in use before launch holds someone else's process


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def check_driver(inv: gpuinfo.GpuInventory | None) -> Check:
    """The NVIDIA driver against the CUDA version torch was built with."""
    name = "NVIDIA driver"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    cuda = ".".join((inv.torch_cuda or "").split(".")[:2])
    need = MIN_DRIVER.get(cuda)
    data = {"driver": inv.driver, "torch_cuda": inv.torch_cuda, "min_driver": need,
            "source": "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"}
    if not inv.driver:
        return Check(name, "warn", "nvidia-smi did not report the driver version", "install nvidia-smi", data)
    if need is None:
        return Check(name, "info", f"driver {inv.driver}; torch CUDA {inv.torch_cuda} not in the table", data=data)
    if _version_tuple(inv.driver) < _version_tuple(need):
        return Check(name, "fail", f"driver {inv.driver} is older than {need}, which CUDA {cuda} (torch "
                                   f"{inv.torch_version}) needs", f"upgrade the NVIDIA driver to {need} or newer",
                     data)
    return Check(name, "ok", f"driver {inv.driver} runs CUDA {cuda} (needs {need} or newer)", data=data)


def check_cudnn(profile: Profile, inv: gpuinfo.GpuInventory | None) -> Check:
    """torch's cuDNN against sglang's torch 2.9.1 check, and whether the launch environment answers it."""
    name = "cuDNN"
    if inv is None:
        return Check(name, "skipped", f"profile {profile.name} runs on {profile.device}")
    env = launch_environment(profile)
    data = {"cudnn_version": inv.cudnn_version, "torch": inv.torch_version, "launch_env": {
        CUDNN_CHECK_ENV: env.get(CUDNN_CHECK_ENV)}, "site": CUDNN_CHECK_SITE}
    if inv.cudnn_version is None or inv.torch_version is None:
        return Check(name, "skipped", f"torch was not asked ({inv.error or 'no CUDA GPU'}); the launch environment "
                                      f"sets {CUDNN_CHECK_ENV}={env.get(CUDNN_CHECK_ENV)} either way", data=data)
    old = inv.torch_version.startswith("2.9.1") and inv.cudnn_version < CUDNN_MIN
    if not old:
        return Check(name, "ok", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang's check passes",
                     data=data)
    if env.get(CUDNN_CHECK_ENV) == "1":
        return Check(name, "ok", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang would refuse "
                                 f"the multimodal target ({CUDNN_CHECK_SITE}); the launch sets {CUDNN_CHECK_ENV}=1 "
                                 f"on purpose: {CUDNN_CHECK_REASON}", data=data)
    return Check(name, "fail", f"cuDNN {inv.cudnn_version} with torch {inv.torch_version}: sglang refuses the "
                               f"multimodal target at start-up ({CUDNN_CHECK_SITE})",
                 "pip install nvidia-cudnn-cu12==9.16.0.29, or set SGLANG_DISABLE_CUDNN_CHECK=1", data)


def check_sgl_kernel(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    """Which architecture op libraries the installed sgl-kernel ships, against the GPUs' architecture."""
    name = "sgl-kernel"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    shipped = envinfo.sgl_kernel_arch_dirs()
    sms = sorted({f"sm{g.capability[0]}{g.capability[1]}" for g in inv.gpus[:tp_size]})
    data = {"shipped": shipped, "gpus": sms, "version": envinfo.package_version("sgl-kernel")}
    missing = [sm for sm in sms if sm not in shipped]
    if not missing:
        return Check(name, "ok", f"sgl-kernel {data['version']} ships {', '.join(shipped)} op libraries", data=data)
    return Check(name, "warn", f"sgl-kernel {data['version']} ships op libraries for {', '.join(shipped) or 'none'}, "
                               f"not {', '.join(missing)}: on these GPUs it loads another architecture's build "
                               "(sgl_kernel/load_utils.py), so a kernel without code for them fails at first use",
                 "install an sgl-kernel build for this architecture, or expect a first-use kernel error", data)


def check_idle(inv: gpuinfo.GpuInventory | None, tp_size: int) -> Check:
    """Memory in use on the GPUs the launch takes, before it starts (another process would shrink its pool)."""
    name = "GPUs idle"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    if inv.used_mib is None:
        return Check(name, "warn", "nvidia-smi did not report memory in use", "install nvidia-smi")
    busy = {i: mib for i, mib in enumerate(inv.used_mib[:tp_size]) if mib > IDLE_MIB}
    data = {"used_mib": inv.used_mib, "threshold_mib": IDLE_MIB}
    if busy:
        return Check(name, "fail", "GPUs in use before launch: " + ", ".join(f"GPU {i} {m} MiB" for i, m in busy.items()),
                     "stop the other processes (nvidia-smi lists them)", data)
    return Check(name, "ok", f"{min(tp_size, len(inv.used_mib))} GPUs with at most {IDLE_MIB} MiB in use", data=data)


def check_disk(ckpts: list[Checkpoint]) -> Check:
    present = [Path(c.path) for c in ckpts if c.path]
    where = present[0] if present else checkpoints.hub_cache_dir()
    probe = where
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    detail = f"{usage.free / 1e9:.1f} GB free of {usage.total / 1e9:.1f} GB at {where}"
    data = {"path": str(where), "free_bytes": usage.free, "total_bytes": usage.total}
    if all(c.present for c in ckpts):
        return Check("free disk", "info", detail, data=data)
    return Check("free disk", "info", detail + "; fetch-models compares it with the hub's size before downloading",
                 data=data)


def check_server_flags(profile: Profile, models: deployment.Models, validate: bool, gpus: int) -> list[Check]:
    """Both launches (baseline and EAGLE-3) through sglang's own parser; sglang's sizing when models are local."""

    specs = {"baseline": deployment.server_spec(profile, models, speculative=False),
             "EAGLE-3": deployment.server_spec(profile, models, speculative=True)}
    try:
        parsed = parse_launches({k: s.argv() for k, s in specs.items()}, specs["baseline"].env, validate=validate,
                                check=False)
    except Eagle3LabError as exc:
        return [Check(f"{SLOW} ({label})", "fail", str(exc), "make setup") for label in specs]
    out = []
    for label, result in parsed.items():
        name = f"{SLOW} ({label})"
        data = {"argv": specs[label].argv(), **result.to_dict()}
        if not result.parsed:
            out.append(Check(name, "fail", f"sglang's parser rejects the command line: {result.error}",
                             "fix the profile key or extra_server_args", data))
        elif result.validated is False:
            out.append(Check(name, "fail", f"sglang's ServerArgs refuses it: {result.error}",
                             "fix the profile (see the detail)", data))
        elif result.validated is None:
            out.append(Check(name, "ok", "sglang's parser accepts every flag; its own sizing needs the models' "
                                         "configs on disk (not fetched yet)", data=data))
        else:
            chosen = result.chosen
            mem = chosen.get("mem_fraction_static")
            setter = "profile" if profile.mem_fraction_static is not None else "sglang"
            sized = "; no GPU visible here, so its fallback sizing" if profile.device == "cuda" and not gpus \
                else ""
            out.append(Check(name, "ok", f"accepted by sglang's ServerArgs; mem_fraction_static "
                                         f"{round(mem, 3) if isinstance(mem, float) else mem} (set by {setter}"
                                         f"{sized}), chunked_prefill_size {chosen.get('chunked_prefill_size')}, "
                                         f"cuda_graph_max_bs {chosen.get('cuda_graph_max_bs')}, max_running_requests "
                                         f"{chosen.get('max_running_requests')}", data=data))
    return out


FULL_CHECK = "sglang check_server_args"


def check_full_server_args(profile: Profile, models: deployment.Models, present: bool) -> list[Check]:
    """Both launches through sglang's full ``check_server_args()`` (what its engine runs before any model code,
    ``engine.py:1026``), in a child with the launch's own environment. Needs a model config on disk: when the
    profile's models are not fetched, the tiny Kimi-K2.5-shaped checkpoints (same ``KimiK25ForConditionalGeneration``
    class, multimodal, which is what the cuDNN refusal keys on) stand in and the row says so."""
    stand_in = None
    if not present:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout may be preflight's --json answer
                stand_in = deployment.resolve_models(load_profile("cpu"))
        except Eagle3LabError as exc:
            return [Check(f"{FULL_CHECK} ({label})", "skipped", f"models not on disk and no stand-in: {exc}")
                    for label in ("baseline", "EAGLE-3")]
    used = stand_in or models
    specs = {"baseline": deployment.server_spec(profile, used, speculative=False),
             "EAGLE-3": deployment.server_spec(profile, used, speculative=True)}
    try:
        parsed = parse_launches({k: s.argv() for k, s in specs.items()}, specs["baseline"].env, check=True)
    except Eagle3LabError as exc:
        return [Check(f"{FULL_CHECK} ({label})", "fail", str(exc), "make setup") for label in specs]
    note = (" (model paths: the tiny Kimi-K2.5-shaped checkpoints stand in for the unfetched models)"
            if stand_in else "")
    env_keys = sorted(k for k in specs["baseline"].env if k.startswith("SGLANG_"))
    out = []
    for label, result in parsed.items():
        name = f"{FULL_CHECK} ({label})"
        data = {"argv": specs[label].argv(), "launch_env_sglang": {k: specs[label].env[k] for k in env_keys},
                "stand_in_models": stand_in is not None, **result.to_dict()}
        if result.checked:
            out.append(Check(name, "ok", f"passes sglang's full check_server_args() with the launch environment "
                                         f"({', '.join(f'{k}=1' for k in env_keys) or 'no SGLANG_ variables'})"
                                         + note, data=data))
        elif result.checked is False:
            out.append(Check(name, "fail", f"sglang's check_server_args() refuses it: {result.check_error}" + note,
                             "see runtime/launch_env.py for the launch environment", data))
        else:
            out.append(Check(name, "fail", f"the command line failed before the full check: {result.error}" + note,
                             "fix the profile (see the detail)", data))
    return out


def check_layers(profile: Profile) -> Check:
    """The drafter's aux ids from its config, and what sglang's start-up makes the target capture (traced)."""
    name = "drafter aux layers"
    setup = deployment.layer_setup(profile)
    data: dict[str, Any] = {"setup": setup.to_dict()}
    if not setup.usable:
        return Check(name, "skipped", "the drafter's config is not on disk", setup.fix, data)
    depth, ids = setup.depth, setup.aux_layer_ids
    assert depth is not None
    if ids is not None:
        bad = [i for i in ids if not 0 <= i <= depth - 2]
        if bad:
            return Check(name, "fail", f"drafter ids {ids} include {bad}, outside 0..{depth - 2} for a {depth}-layer "
                                       "target (sglang captures id i at the input of layer i + 1)",
                         "use a drafter trained for this target", data)
    try:
        table = _traced_capture(setup)
    except Eagle3LabError as exc:  # e.g. an entry class this sglang release does not register
        return Check(name, "warn", f"drafter ids {ids} on a {depth}-layer target; the capture could not be traced: "
                                   f"{exc}", None, data)
    data["trace"] = {k: table[k] for k in ("eager_forwards_capture", "cuda_graph_forwards_capture", "conflict")}
    eager = (table["eager_forwards_capture"] or {}).get("self.model.layers_to_capture")
    graphs = (table["cuda_graph_forwards_capture"] or {}).get("self.model.layers_to_capture")
    named = f"drafter ids {ids}" if ids is not None else "the drafter names no ids (sglang's defaults)"
    detail = (f"{named} on a {depth}-layer target ({setup.draft_config}): eager forwards capture {eager}"
              + (f", CUDA-graph replays capture {graphs}" if graphs is not None else ", no CUDA graphs")
              + " (traced from sglang's start-up)")
    if profile.model_num_layers != depth and profile.target_model != deployment.TINY:
        detail += f"; the profile's model_num_layers is {profile.model_num_layers}, the config says {depth}"
    if table["conflict"]:
        return Check(name, "warn", detail + ": the drafter reads different layers in decode than in prefill",
                     "expect lower acceptance with CUDA graphs on; compare with --set disable_cuda_graph=true", data)
    return Check(name, "ok", detail, data=data)


def _traced_capture(setup: modelinfo.LayerSetup) -> dict[str, Any]:
    # The trace stage owns which start-up calls pass the ids; preflight asks it instead of repeating it.

    src = sources.open_source("installed")
    if src.modified:
        src = sources.open_source(src.version)
    startup = StartupProfile(setup.startup, setup.device, cuda_graphs=setup.cuda_graphs)
    return audit.layer_table(src, setup.entry_class or audit.KIMI_ENTRY, setup.depth,
                             setup.aux_layer_ids, startup)


def check_capture_order(profile: Profile, setup: modelinfo.LayerSetup | None = None) -> Check:
    """sglang's second EAGLE-3 defect for this launch: does the installed sglang capture CUDA graphs before the
    drafter's ids are set (``trace.capture_order``), and do this drafter's ids make graphs and eager differ?"""
    name = "capture order"
    src = sources.open_source("installed")  # as installed: an applied capture-order patch counts
    order = capture_order.trace_capture_order(src)
    data: dict[str, Any] = {"order": order.to_dict(), "fix_pr": capture_order.FIX_PR,
                            "patch": f"patches/{capture_order_fix.PATCH_NAME}.patch"}
    first_fixed = _first_fixed(profile)
    upgrade = (f"upgrade sglang to {first_fixed} or newer" if first_fixed
               else f"upgrade to an sglang release with {capture_order.FIX_PR}")
    fix = (f"{upgrade}, or apply the patch: python -m eagle3lab patch apply "
           f"patches/{capture_order_fix.PATCH_NAME}.patch")
    where = ", ".join(c.where for c in order.graph_resets) or "no graph-runner reset"
    if profile.device != "cuda" or profile.disable_cuda_graph:
        return Check(name, "ok", f"CUDA graphs off: every forward is eager (sglang {src.version}, defect in this "
                                 f"release: {'yes' if order.defect else 'no'})", data=data)
    if not order.defect:
        return Check(name, "ok", f"sglang {src.version} sets the drafter's ids before graph capture ({where})",
                     data=data)
    setup = setup or deployment.layer_setup(profile)
    if not setup.usable or setup.depth is None:
        quoted = ""
        if profile.model_num_layers == REAL_NUM_LAYERS and not profile.uses_tiny_model:
            layers = order.layers(REAL_NUM_LAYERS, list(REAL_AUX_LAYER_IDS))
            data["quoted_layers"] = {**layers, "ids_source": "AQ-MedAI/Kimi-K25-eagle3's config as the engineer's "
                                                             "write-up quotes it (not read here)"}
            quoted = (f"; with the ids the engineer's write-up quotes for the drafter, {list(REAL_AUX_LAYER_IDS)}: "
                      f"graph replays {layers['cuda_graph_layers']}, eager forwards {layers['eager_layers']}")
        return Check(name, "warn", f"sglang {src.version} captures CUDA graphs with the model's default layers "
                                   f"before the drafter's ids are set ({where}); the drafter's config is not on "
                                   f"disk, so its own ids are not known yet{quoted}", fix, data)
    layers = order.layers(setup.depth, setup.aux_layer_ids)
    data["layers"] = layers
    detail = (f"sglang {src.version}, CUDA graphs on, drafter ids {setup.aux_layer_ids} on {setup.depth} layers: "
              f"graph replays capture {layers['cuda_graph_layers']}, eager forwards {layers['eager_layers']} "
              f"({where})")
    if layers["mismatch"]:
        return Check(name, "warn", detail + ": decode and verify read other layers than prefill", fix, data)
    return Check(name, "ok", detail, data=data)


def _first_fixed(profile: Profile) -> str | None:
    """The release notebook 02 bisected as the first with the order fixed, if it has run."""
    try:
        trace = read_if_present(InterfaceTraceSidecar, profile.name)
    except Eagle3LabError:
        return None
    return trace.capture_order.first_fixed if trace and trace.capture_order else None


def check_first_raise(profile: Profile, result: Preflight, inv: gpuinfo.GpuInventory | None,
                      entry_class: str = audit.KIMI_ENTRY) -> Check:
    """Where an unpatched EAGLE-3 launch raises first, decided from sglang's resolved ServerArgs for this launch
    (the EAGLE-3 server flags row) and the GPU's compute capability (``trace.startup.StartupProfile.resolved``)."""
    name = "first raise"
    row = next((c for c in result.checks if c.name == f"{SLOW} (EAGLE-3)"), None)
    chosen = row.data.get("chosen") if row is not None and row.data.get("validated") else None
    if not chosen:
        return Check(name, "skipped", "needs sglang's resolved ServerArgs, which need the models' configs on disk")
    capability = inv.gpus[0].capability if inv is not None and inv.gpus else None
    if chosen.get("device") == "cuda" and capability is None:
        return Check(name, "skipped", "needs the GPU's compute capability (no CUDA GPU here)", data={"chosen": chosen})
    src = sources.open_source("installed")
    if src.modified:
        src = sources.open_source(src.version)
    startup = StartupProfile.resolved(chosen, capability)
    try:
        first = audit.verdict(src, entry_class, profiles=(startup,))["first_raise"][startup.name]
    except Eagle3LabError as exc:
        return Check(name, "warn", f"could not be traced: {exc}")
    data = {"first_raise": first, "capability": capability, "server_args": chosen}
    if not first.get("member"):
        return Check(name, "ok", f"sglang {src.version}: the entry class lacks nothing the start-up reaches",
                     data=data)
    return Check(name, "info", f"unpatched, sglang {src.version} raises first at {first['where']} "
                               f"({first['member']} in {first.get('function')}; certain: "
                               f"{'yes' if first.get('certain') else 'no'}), decided from moe_runner_backend "
                               f"{chosen.get('moe_runner_backend')} on sm_{capability[0]}{capability[1]}"
                 if capability else f"unpatched, sglang {src.version} raises first at {first['where']}", data=data)


def _mem_fraction(result: Preflight) -> float | None:
    """The smaller ``mem_fraction_static`` sglang resolved for the two launches (server flags rows), if any."""
    values = [c.data.get("chosen", {}).get("mem_fraction_static") for c in result.checks
              if c.name.startswith(SLOW) and c.data.get("validated")]
    values = [v for v in values if isinstance(v, (int, float))]
    return min(values) if values else None


def check_interconnect(inv: gpuinfo.GpuInventory | None) -> Check:
    name = "interconnect"
    if inv is None or inv.count == 0:
        return Check(name, "skipped", "no CUDA GPU")
    if not inv.topology:
        return Check(name, "skipped", "nvidia-smi not found or 'nvidia-smi topo -m' failed")
    tally = gpuinfo.links(inv.topology)
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(tally.items())) or "no GPU pairs"
    nvlink = "NVLink" in tally
    return Check(name, "info", f"GPU pairs by link (nvidia-smi topo -m): {kinds}; "
                               f"{'NVLink present' if nvlink else 'no NVLink: all-reduce goes over PCIe'}",
                 data={"links": tally, "topology": inv.topology})


# ---------------------------------------------------------------------------------------------------------


def run_preflight(profile: Profile, *, quick: bool = False,
                  inventory: Callable[[], gpuinfo.GpuInventory] = gpuinfo.inventory) -> Preflight:
    """Every check for ``profile``. ``quick`` skips sglang's parser (seconds of import) once a check has failed:
    the run stops anyway, and ``python -m eagle3lab preflight`` runs everything."""
    started = time.monotonic()
    result = Preflight(profile.name, quick=quick)
    reason = passed_over(profile)
    if reason:
        result.passed_over = reason
        return result
    inv = inventory() if profile.device == "cuda" else None
    result.checks += [check_gpu_count(profile, inv), check_capability(inv, profile.tp_size), check_sglang(profile)]
    target, draft, _ = deployment.locate_models(profile)
    result.checks += [check_checkpoint(profile, target), check_checkpoint(profile, draft)]
    memory_at = len(result.checks)
    result.checks += [check_disk([target, draft])]
    models = deployment.Models(target.path or target.source, draft.path or draft.source,
                               trust_remote_code=profile.trust_remote_code)
    if quick and result.failures:
        result.checks += [Check(f"{SLOW} ({label})", "skipped", "not run: an earlier check failed",
                                f"python -m eagle3lab preflight --profile {profile.name} runs every check")
                          for label in ("baseline", "EAGLE-3")]
        result.checks += [Check(f"{FULL_CHECK} ({label})", "skipped", "not run: an earlier check failed",
                                f"python -m eagle3lab preflight --profile {profile.name} runs every check")
                          for label in ("baseline", "EAGLE-3")]
    else:
        result.checks += check_server_flags(profile, models, validate=target.present and draft.present,
                                            gpus=inv.count if inv else 0)
        result.checks += check_full_server_args(profile, models, target.present and draft.present)
    result.checks.insert(memory_at, check_gpu_memory(profile, inv, [target, draft], _mem_fraction(result)))
    result.checks += [check_layers(profile), check_first_raise(profile, result, inv), check_capture_order(profile),
                      check_driver(inv),
                      check_cudnn(profile, inv), check_sgl_kernel(inv, profile.tp_size),
                      check_idle(inv, profile.tp_size), check_interconnect(inv)]
    result.seconds = round(time.monotonic() - started, 2)
    return result


def save(result: Preflight) -> Path:
    """``artifacts/preflight.<profile>.json``."""
    return write_json_atomic(repo_dir("artifacts") / f"preflight.{result.profile}.json", result.to_dict())


def require(profile: Profile, *, quick: bool = True, echo: Callable[[str], None] | None = print) -> Preflight:
    """Run the checks, save them, show them, and stop with one line naming the first problem and its fix."""
    result = run_preflight(profile, quick=quick)
    if result.passed_over is None:
        save(result)
    if echo is not None:
        echo(result.text())
    if not result.ok:
        raise PreflightFailed(result.problem_line(), check=result.failures[0].name, profile=result.profile,
                              failed=tuple(c.name for c in result.failures))
    return result


def as_json(result: Preflight) -> str:
    return json.dumps(result.to_dict(), indent=1, default=str)
