"""Why a run shows no EAGLE-3 speedup, checked on its own artifacts by the rules engine ``doctor`` uses.

Why here: the notebook runs the same diagnosis on the run it has just measured, with the cost model's break-even
beside the measured one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle3lab.bench.diagnostics.artifacts import evidence_from_artifacts
from eagle3lab.bench.diagnostics.engine import diagnose, findings_table
from eagle3lab.bench.diagnostics.evidence import Threshold
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.errors import PerfModelError
from eagle3lab.report.run_model import run_break_even
from eagle3lab.runtime.profiles import Profile
from eagle3lab.sidecars import InterfaceTraceSidecar, LaunchSpreadRecord, read_if_present


def run_break_even_or_none(profile: Profile, report: BenchReport | None) -> tuple[float | None, str]:
    """The cost model's break-even acceptance for this run (``report.run_model.run_break_even``): shown beside the measured
    one, or the acceptance rule's threshold where no control arm measured it; (None, why) when the run gives the
    model nothing to calibrate on."""

    if report is None:
        return None, "no benchmark report"
    try:
        return run_break_even(profile, report)
    except PerfModelError as exc:
        return None, str(exc)


def diagnose_run(profile: Profile, report: BenchReport | None, bench_dir: Path, logs_dir: Path,
                 offline_acceptance: dict[str, Any] | None = None,
                 cycle_components: Any = None, launch_spread: LaunchSpreadRecord | None = None
                 ) -> list[dict[str, Any]]:
    """Every cause of a missing EAGLE-3 speedup, checked on this run's own artifacts by the same rules engine
    ``doctor`` uses: one row per cause tag (yes / no / unknown), the acceptance judged against the break-even
    measured on the headline arm's own cycles (``cycle_components``, the cycle table), else by the control arm
    (the cost model's beside it), the prompts against the drafter's offline acceptance
    (``Drafters.offline_acceptance``)."""

    trace = read_if_present(InterfaceTraceSidecar, profile.name)

    def existing(path: Path) -> Path | None:
        return path if path.is_file() else None

    spec_log = existing(Path(logs_dir) / f"03_eagle3.{profile.name}.log") or \
        existing(Path(logs_dir) / f"03_chain_full_delegation_patch.{profile.name}.log")
    value, where = run_break_even_or_none(profile, report)
    modelled = Threshold(value, "modelled", where) if value is not None else None
    evidence = evidence_from_artifacts(
        bench_report=report, requests_dir=bench_dir if report else None, spec_log=spec_log,
        baseline_log=existing(Path(logs_dir) / f"03_baseline.{profile.name}.log"),
        layer_tables=[table.model_dump() for table in trace.layer_ids] if trace is not None else None,
        layer_profile="cpu" if profile.device == "cpu" else "gpu",
        break_even=modelled, modelled_break_even=modelled, offline_acceptance=offline_acceptance,
        device=profile.device,
        cycle_components=cycle_components.model_dump() if hasattr(cycle_components, "model_dump") else cycle_components,
        launch_spread=launch_spread.model_dump() if launch_spread is not None else None)
    return findings_table(diagnose(evidence))
