"""What notebook 03 writes of its benchmark: the sidecar after each arm, the seconds per part, and the benchmark's
report, kept as ``bench_report.json`` only when every arm completed.

Why: a benchmark runs for hours; a failure after it must not lose the arms already measured, and a broken run
must not replace the last good report and figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench.crosscheck import CrossCheck
from eagle3lab.bench.sweep import ARM_FAILED, POINT_FAILED, ArmResult, BenchReport, PointResult, point_rows
from eagle3lab.errors import BenchmarkIncomplete
from eagle3lab.fix.relaunch import StepResult
from eagle3lab.sidecars import PatchBenchSidecar, write as write_sidecar


BENCH_REPORT, BENCH_REPORT_FAILED = "bench_report.json", "bench_report.failed.json"


def save_complete_report(report: BenchReport, bench_dir: Path) -> Path:
    """Save the benchmark's record as ``bench_report.json`` only if every arm that ran completed its sweep.

    Why: a hung scheduler (SIGSTOP'd, deadlocked) ends its point at the stall timeout and the arm as failed; the run
    went on to report success with no speedup, replaced the last good notebook 03 and overwrote the figures. Now
    the broken record goes to ``bench_report.failed.json`` and the notebook fails here, before any figure is drawn,
    so the runbook keeps the last good executed notebook and the figures stay those of the last good run.
    """
    broken: list[tuple[ArmResult, PointResult | None]] = [
        (arm, point) for arm in report.arms for point in arm.points if point.status == POINT_FAILED]
    broken += [(arm, None) for arm in report.arms if arm.status == ARM_FAILED and not arm.points]
    if not broken:
        return report.save(Path(bench_dir) / BENCH_REPORT)
    kept = report.save(Path(bench_dir) / BENCH_REPORT_FAILED)
    arm, point = broken[0]
    where = f"arm {arm.name} at concurrency {point.concurrency}" if point is not None else f"arm {arm.name}"
    why = (point.reason if point is not None else None) or (str(arm.reason) if arm.reason else "failed")
    more = f" (+{len(broken) - 1} more)" if len(broken) > 1 else ""
    raise BenchmarkIncomplete(f"the benchmark did not complete: {where}: {why}{more}; no speedup is reported and "
                              f"the last good figures and {BENCH_REPORT} are kept (this run's record: {kept})")


class PartialSidecar:
    """Notebook 03's sidecar, rewritten (atomically) each time an arm finishes, with ``complete`` false.

    A benchmark on 8 GPUs runs for hours; a failure after it (a lossless verdict, a figure, the cost model) must
    not lose the arms already measured. The last cell writes the complete sidecar over it.
    """

    def __init__(self, base: PatchBenchSidecar) -> None:
        self.sidecar = base.model_copy(update={"complete": False})
        self.arms: list[ArmResult] = []

    def add_arm(self, arm: ArmResult, crosscheck: CrossCheck | None = None) -> ArmResult:
        """Record a finished arm (and the cross-check run beside it) and rewrite the sidecar; returns ``arm``."""
        self.arms.append(arm)
        update: dict[str, Any] = {"arms": point_rows(self.arms)}
        if crosscheck is not None:
            update["cross_check"] = crosscheck.to_dict()
        return self._write(update, arm)

    def update(self, **fields: Any) -> None:
        """Any other finished part (for example ``lossless``), so a later failure keeps it."""
        self._write(fields, None)

    def _write(self, update: dict[str, Any], arm: ArmResult | None) -> Any:
        self.sidecar = type(self.sidecar).model_validate({**self.sidecar.model_dump(), **update})
        write_sidecar(self.sidecar)
        return arm


def timings(chain: Sequence[StepResult], captures: dict[Any, Any], report: BenchReport | None) -> dict[str, float]:
    """Seconds per part of notebook 03, as measured in this run (for the sidecar and the run's cost table)."""
    out: dict[str, float] = {f"chain: {step.step.name}": step.seconds for step in chain}
    for key, result in captures.items():
        out[f"capture check: {key or 'unpatched'}"] = round(sum(result.seconds.values()), 2)
    for arm in report.arms if report else []:
        if arm.server_ready_seconds is not None:
            out[f"{arm.name}: server start-up"] = arm.server_ready_seconds
        if arm.sweep_seconds is not None:
            out[f"{arm.name}: sweep"] = arm.sweep_seconds
    if report and report.cross_check and report.cross_check.get("seconds") is not None:
        out["baseline: bench_serving cross-check"] = float(report.cross_check["seconds"])
    return out
