"""The break-even acceptance measured rather than modelled: the untrained-drafter control arm's cycle (or the
cycle table's) in plain decode steps.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3_CONTROL
from eagle3lab.bench.diagnostics.evidence import Threshold


def control_cycles(report) -> list[dict[str, Any]]:
    """The untrained-drafter control arm's cycle, measured: with nearly every draft rejected, each cycle emits
    about one token, so its time is what one speculative cycle costs on this machine whatever the acceptance.
    Its ratio to the plain step at the same concurrency is the measured break-even acceptance.

    ``report`` is a ``bench.sweep.BenchReport``; rates are the bench's decode-only ``decode_tok_per_s``."""
    base = {p.concurrency: p.metrics.decode_tok_per_s for arm in report.arms if arm.kind == ARM_KIND_BASELINE
            for p in arm.measured_points() if p.metrics and p.metrics.decode_tok_per_s}
    rows = []
    for arm in report.arms:
        if arm.kind != ARM_KIND_EAGLE3_CONTROL:
            continue
        for point in arm.measured_points():
            metrics, plain = point.metrics, base.get(point.concurrency)
            if metrics is None or metrics.decode_tok_per_s is None or metrics.accept_length is None or not plain:
                continue
            cycle_ms = point.concurrency * metrics.accept_length / metrics.decode_tok_per_s * 1e3
            step_ms = point.concurrency / plain * 1e3
            rows.append({"arm": arm.name, "concurrency": point.concurrency, "accept_length": metrics.accept_length,
                         "cycle_ms": cycle_ms, "plain_step_ms": step_ms, "plain_steps_per_cycle": cycle_ms / step_ms})
    return rows


def cycle_break_even(table: Optional[Mapping[str, Any]]) -> Optional[tuple[Threshold, int]]:
    """(break-even acceptance measured on the EAGLE-3 arm's own cycles, their batch size) from the cycle component
    table (``bench.cycle``): one cycle in plain steps is the tokens per request a cycle must emit to pay."""
    if not table or not table.get("cycle_in_plain_steps"):
        return None
    size = int(table.get("batch_size") or 1)
    return Threshold(float(table["cycle_in_plain_steps"]), "measured",
                     f"cycle table: arm '{table.get('eagle_arm')}' one cycle {float(table['cycle_ms']):.1f} ms / "
                     f"plain step {float(table['plain_step_ms']):.1f} ms at batch size {size} "
                     f"({table.get('profile')}, {str(table.get('measured_on', ''))[:10]})"), size


def measured_break_even(report) -> Optional[tuple[Threshold, int]]:
    """(break-even acceptance measured by the control arm, its concurrency): one cycle in plain steps."""
    rows = control_cycles(report)
    if not rows:
        return None
    row = min(rows, key=lambda r: r["concurrency"])
    return Threshold(row["plain_steps_per_cycle"], "measured",
                     f"control arm '{row['arm']}' at concurrency {row['concurrency']}: one cycle "
                     f"{row['cycle_ms']:.1f} ms / plain step {row['plain_step_ms']:.1f} ms "
                     f"({report.profile}, {report.date})"), row["concurrency"]
