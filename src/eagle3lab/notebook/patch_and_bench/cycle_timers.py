"""The CPU harness's cycle timers, started for notebook 03's servers and read back as component tables.

Why: the cost model's CPU entry is written from these tables, so the arm it is measured on (the control arm where
it ran) is chosen here, not by the caller.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from eagle3lab.bench import cycle
from eagle3lab.bench.sweep import ARM_KIND_EAGLE3_CONTROL, ArmResult
from eagle3lab.errors import BenchError
from eagle3lab.runtime.profiles import Profile
from eagle3lab.sidecars import CycleComponentsRecord


def start_cycle_trace(profile: Profile, out_dir: Path, enabled: bool) -> Path | None:
    """On the CPU harness, have every server launched from here on record its decode steps and EAGLE-3 cycles by
    component (``bench.cycle``); None elsewhere (the timers are installed by the harness)."""
    if not (enabled and profile.cpu_harness):
        return None
    return cycle.enable_trace(out_dir)


def cycle_components(profile: Profile, trace: Path | None, baseline: ArmResult, eagle3: ArmResult,
                     shims: Sequence[str], experiments: Sequence[ArmResult] = ()) -> CycleComponentsRecord | None:
    """Stop tracing, then the component table of the headline EAGLE-3 cycle against the baseline's plain step at
    batch size 1, with each point's window split into decode, prefill and the rest (``bench.server_time``; the
    experiment arms' points too); None without a trace or without a measured EAGLE-3 arm.

    The cost model's CPU engine entry (``artifacts/cycle_components.<profile>.json``) is written from the control
    arm's cycles where it ran (the same cycle code, an untrained drafter), so that nothing the model predicts the
    headline arm with comes from the headline arm; from the headline arm's own table otherwise (the table names
    its arm, and the report says which)."""
    cycle.disable_trace()
    if trace is None or not eagle3.measured_points() or not baseline.measured_points():
        return None
    records = cycle.read_records(trace)
    table = cycle.table_from_arms(trace, baseline, eagle3, profile.name, batch_size=1, shims=shims,
                                  others=experiments, records=records)
    cycle.save(_model_table(trace, records, profile, baseline, experiments, shims) or table)
    return table


def _model_table(trace: Path, records: Sequence[Mapping[str, Any]], profile: Profile, baseline: ArmResult,
                 experiments: Sequence[ArmResult], shims: Sequence[str]) -> CycleComponentsRecord | None:
    """The control arm's component table at batch size 1, or None where no control arm has timed cycles."""
    for arm in experiments:
        if arm.kind == ARM_KIND_EAGLE3_CONTROL and arm.measured_points():
            with contextlib.suppress(BenchError):
                return cycle.table_from_arms(trace, baseline, arm, profile.name, batch_size=1, shims=shims,
                                             records=records)
    return None
