"""``make gpu-check``: the one-GPU check's verdicts, one table and one evidence file, from what the gpu-1x run left.

Why a table of its own and not ``ci_summary``'s: on one CUDA GPU with graphs on, the things worth checking are
where the crash happens (CUDA graph capture calls the hook first, ``cuda_graph_runner.py``), which layers graph
replays and eager forwards capture, whether speculative output equals the baseline's, and the benchmark's points;
each row says what it was read from. The notebooks assert their own expectations; this module only reads their
sidecars, decides each row (ok, FAIL, or info where nothing is decided) and writes ``artifacts/gpu_check.<profile>
.json`` atomically, so the evidence is there even when a notebook failed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Sequence

from eagle3lab import sidecars
from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import GpuCheckError
from eagle3lab.paths import repo_dir
from eagle3lab.runtime import gpuinfo

GRAPH_CAPTURE_FILE = "cuda_graph_runner.py"  # sglang 0.5.9 calls the hook first here, before graphs are captured
# with graphs off (or on a CPU, where 0.5.9 records none) the first call is the eager one after the model is loaded
EAGER_LOAD_FILE = "model_runner.py"
NO_GPU = ("make gpu-check needs one CUDA GPU and this machine has none ({why}); "
          "on CPU run `make run` (the cpu profile) instead")


@dataclass(frozen=True)
class Row:
    check: str
    outcome: str  # "ok", "FAIL" or "info" (shown, nothing decided)
    detail: str


def require_gpu(inventory: Optional[gpuinfo.GpuInventory] = None) -> gpuinfo.GpuInventory:
    """The GPUs torch sees, or one line saying there are none (before anything heavy starts)."""
    if inventory is None:
        if gpuinfo.no_driver():
            raise GpuCheckError(NO_GPU.format(why="no NVIDIA driver: neither /dev/nvidiactl nor nvidia-smi"),
                                 problem="no_gpu")
        inventory = gpuinfo.inventory()
    if inventory.count < 1:
        raise GpuCheckError(NO_GPU.format(why=inventory.error or "torch sees 0 CUDA devices"), problem="no_gpu")
    return inventory


def gpu_row(inventory: gpuinfo.GpuInventory) -> Row:
    """GPU 0 as torch saw it; with none (the CPU rehearsal, which skips the GPU probe) the reason, not an error."""
    if not inventory.gpus:
        return Row("GPU", "info", f"no GPU: {inventory.error or 'none described'}")
    gpu = inventory.gpus[0]
    return Row("GPU", "info", f"{gpu.name}, {gpu.sm}, {gpu.memory_gib:.0f} GiB; driver {inventory.driver or '?'}, "
                              f"torch {inventory.torch_version} (CUDA {inventory.torch_cuda}); GPU 0 used")


def crash_row(crash: Optional[sidecars.CrashRecord], graphs: bool = True) -> Row:
    """The unpatched EAGLE-3 launch must die at the hook's first call: the graph-capture call with CUDA graphs on,
    the eager call after loading with graphs off (``--set disable_cuda_graph=true``, or the CPU rehearsal)."""
    name = "crash at graph capture (01)" if graphs else "crash at the eager call (01)"
    if crash is None:
        return Row(name, "FAIL", "no crash record (notebook 01 did not finish)")
    site = crash.call_site or (crash.report.call_site if crash.report else None) or "no call site in the log"
    there = crash.status != "ready" and (GRAPH_CAPTURE_FILE if graphs else EAGER_LOAD_FILE) in site
    return Row(name, "ok" if there else "FAIL", f"{crash.signature or crash.status} at {site}")


def patch_row(side: Optional[sidecars.PatchBenchSidecar]) -> Row:
    """The delegation patch applied and the last relaunch of the chain serving (with EAGLE-3)."""
    name = "patch and relaunch (03)"
    if side is None or not side.chain:
        return Row(name, "FAIL", "no relaunch chain (notebook 03 did not get that far)")
    last = side.chain[-1]
    steps = ", ".join(f"{step.step}: {step.outcome}" for step in side.chain)
    served = bool(last.probe and last.probe.ok and last.probe.speculated)
    return Row(name, "ok" if last.outcome == "ready" and served else "FAIL",
               f"{Path(side.patch).name} delegates {', '.join(side.delegated_members) or 'nothing'}; {steps}"
               f"{'; served speculatively' if served else '; did not serve speculatively'}")


def capture_row(table: Optional[sidecars.LayerIdTable]) -> Row:
    """Which layers graph replays and eager forwards capture on the GPU start-up path, as 02 traced them."""
    name = "captured layers, graphs / eager (02)"
    if table is None:
        return Row(name, "FAIL", "no GPU start-up layer table (notebook 02 did not finish)")
    graphs, eager = table.captured("graphs"), table.captured("eager")
    if graphs is None:  # a start-up without graphs (disable_cuda_graph, or the CPU rehearsal): eager forwards only
        same = "no CUDA graphs on this start-up path"
    else:
        same = "the same layers" if graphs == eager else "different layers: sglang's capture-order defect"
    return Row(name, "info", f"graphs {graphs}, eager {eager} ({same}); drafter ids {table.aux_layer_ids}; "
                             f"traced from sglang's source, not read off this GPU")


def lossless_row(record: Optional[sidecars.LosslessRecord]) -> Row:
    name = "lossless (03)"
    if record is None:
        return Row(name, "FAIL", "no lossless check (notebook 03 did not get that far)")
    passed = record.passed if record.passed is not None else record.lossless
    bound = f", bound {record.min_agreement}" if record.mode == "agreement" else ""
    return Row(name, "ok" if passed else "FAIL", f"{record.mode}{bound}: {len(record.comparisons)} comparisons "
                                                  f"at concurrency {record.required_concurrency}")


def bench_row(speedups: Sequence[sidecars.SpeedupRow], planned: Sequence[int]) -> Row:
    """EAGLE-3 over the baseline at every planned concurrency (shown, not gated on; a missing point fails)."""
    name = f"benchmark, {len(planned)} points (03)"
    got = {r.concurrency: r for r in speedups}
    missing = [c for c in planned if c not in got]
    points = "; ".join(f"c={c}: {got[c].speedup:.2f}x ({got[c].eagle3_tok_s:.0f} / "
                       f"{got[c].baseline_tok_s:.0f} tok/s, accept {got[c].accept_length or 0:.2f})"
                       for c in planned if c in got)
    return Row(name, "FAIL" if missing else "ok",
               (points or "no point measured") + (f"; not measured: {missing}" if missing else ""))


def own_layer_table(s02: Optional[sidecars.InterfaceTraceSidecar], profile: str) -> Optional[sidecars.LayerIdTable]:
    """The layer table of this profile's own deployment: notebook 02 traces blackwell-8x's GPU start-up too, and
    that one (not fetched on a one-GPU box) came first among the GPU tables."""
    return next((t for t in s02.layer_ids if t.deployment == profile), None) if s02 else None


def rows(profile: str, inventory: gpuinfo.GpuInventory, planned: Sequence[int], graphs: bool = True) -> list[Row]:
    """Every row, from the sidecars the run left for ``profile``: a missing one is a FAIL row; a malformed one is
    refused in one line (``SidecarError`` names the file), not shown as a notebook that did not finish. ``graphs``:
    whether the run recorded CUDA graphs (where the crash must happen)."""
    s01 = sidecars.read_if_present(sidecars.CrashReproSidecar, profile)
    s02 = sidecars.read_if_present(sidecars.InterfaceTraceSidecar, profile)
    s03 = sidecars.read_if_present(sidecars.PatchBenchSidecar, profile)
    return [gpu_row(inventory), crash_row(s01.crash if s01 else None, graphs), patch_row(s03),
            capture_row(own_layer_table(s02, profile)), lossless_row(s03.lossless if s03 else None),
            bench_row(s03.speedup if s03 else [], planned)]


def table(found: Sequence[Row]) -> str:
    """One plain-text table, columns aligned."""
    width = max(len(r.check) for r in found)
    lines = [f"{'check'.ljust(width)}  outcome  detail", f"{'-' * width}  -------  ------"]
    lines += [f"{r.check.ljust(width)}  {r.outcome.ljust(7)}  {r.detail}" for r in found]
    return "\n".join(lines)


def evidence_path(profile: str) -> Path:
    return repo_dir("artifacts") / f"gpu_check.{profile}.json"


def write_evidence(profile: str, found: Sequence[Row], inventory: gpuinfo.GpuInventory,
                   failure: Optional[str] = None) -> Path:
    """The rows, the GPU inventory, the sidecars read and the run's failure line, written atomically."""
    notebooks = [schema.NOTEBOOK for schema in (sidecars.CrashReproSidecar, sidecars.InterfaceTraceSidecar,
                                                sidecars.PatchBenchSidecar)]
    return write_json_atomic(evidence_path(profile), {
        "profile": profile, "written_at": sidecars.today(),
        "ok": failure is None and all(r.outcome != "FAIL" for r in found), "failure": failure,
        "rows": [asdict(r) for r in found], "gpu": inventory.to_dict(),
        "sidecars": [str(sidecars.sidecar_path(n, profile)) for n in notebooks]})
