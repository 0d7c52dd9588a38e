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

import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import Eagle3LabError, PreflightFailed
from eagle3lab.paths import repo_dir
from eagle3lab.runtime import checkpoints, deployment, envinfo, gpuinfo, modelinfo
from eagle3lab.runtime.checkpoints import Checkpoint
from eagle3lab.runtime.profiles import Profile
from eagle3lab.package import patching
from eagle3lab.runtime.sglang_args import parse_launches
from eagle3lab.trace import audit, sources
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


def check_gpu_memory(profile: Profile, inv: gpuinfo.GpuInventory | None, ckpts: list[Checkpoint]) -> Check:
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
    data = {"weights_bytes": weights, "per_gpu_bytes": per_gpu, "gpu_memory_bytes": smallest, "share": share}
    if share >= 1:
        return Check(name, "fail", "the weights do not fit: " + detail, "raise tp_size or use larger GPUs", data)
    return Check(name, "ok", detail, data=data)


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
        parsed = parse_launches({k: s.argv() for k, s in specs.items()}, specs["baseline"].env, validate=validate)
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
    return audit.layer_table(src, setup.entry_class or "KimiK25ForConditionalGeneration", setup.depth,
                             setup.aux_layer_ids, startup)


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
    result.checks += [check_gpu_memory(profile, inv, [target, draft]), check_disk([target, draft])]
    models = deployment.Models(target.path or target.source, draft.path or draft.source,
                               trust_remote_code=profile.trust_remote_code)
    if quick and result.failures:
        result.checks += [Check(f"{SLOW} ({label})", "skipped", "not run: an earlier check failed",
                                f"python -m eagle3lab preflight --profile {profile.name} runs every check")
                          for label in ("baseline", "EAGLE-3")]
    else:
        result.checks += check_server_flags(profile, models, validate=target.present and draft.present,
                                            gpus=inv.count if inv else 0)
    result.checks += [check_layers(profile), check_interconnect(inv)]
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
