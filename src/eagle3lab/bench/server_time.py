"""Where a server's wall time went while one benchmark point was measured: decode batches, prefill batches, the rest.

Why: the bench's decode-only rate is running requests over mean TPOT, and a request's TPOT also pays for the other
requests' prefills that run between its decode batches and for batches that run below the point's concurrency (a
request finished, its successor not yet admitted). A decode cost model counts neither. With speculation both grow
per cycle: a request ends after output length / acceptance cycles instead of output length steps, so a short-output
workload at concurrency c runs about c x acceptance / output length prefills per cycle against c / output length
per plain step. The cycle timers (``runtime.cpu_harness.cycle_timers``) record every scheduler call on a batch with
its mode and size; lined up with the point's measured window (``PointResult.measured_from``/``measured_to``, wall
clock), they split the window into:

- ``decode``: the scheduler's calls on decode batches (plain steps, or EAGLE-3 cycles: draft, verify, draft extend);
- ``prefill``: its calls on prefill batches (the new requests' prompts; with EAGLE-3 the drafter's extend too);
- ``other``: the rest of the window (the scheduler idle or polling between batches, requests being received,
  tokenized and streamed back; on this machine those share the two cores with the scheduler).

Every figure is per decode batch (one plain step or one cycle), so it sits beside the cost model's cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eagle3lab.runtime.cpu_harness.cycle_timers import DECODE_MODE, RUN_BATCH
from eagle3lab.sidecars import PointTimeRecord


def point_time(records: Iterable[Mapping[str, Any]], *, arm: str, speculative: bool, concurrency: int,
               measured_from: float, measured_to: float) -> PointTimeRecord | None:
    """The split of one point's window, from the records of the arm's server (speculative or not) that ended inside
    it; None when the window holds no decode batch of that server (no trace, or the timers were off)."""
    chosen = [r for r in records if measured_from <= float(r["t"]) <= measured_to
              and bool(r.get("spec")) == speculative]
    decode = [r for r in chosen if r.get("mode") == DECODE_MODE]
    prefill = [r for r in chosen if r.get("mode") != DECODE_MODE]
    batches = [int(r["bs"]) for r in decode if r["root"] == RUN_BATCH and r.get("bs")]
    if not batches:
        return None
    n, window = len(batches), measured_to - measured_from
    decode_s = sum(float(r["ms"]) for r in decode) / 1e3
    prefill_s = sum(float(r["ms"]) for r in prefill) / 1e3
    per_batch = lambda seconds: round(seconds / n * 1e3, 4)  # noqa: E731
    return PointTimeRecord(arm=arm, speculative=speculative, concurrency=concurrency, window_s=round(window, 4),
                           decode_batches=n, prefill_batches=sum(r["root"] == RUN_BATCH for r in prefill),
                           mean_batch_size=round(sum(batches) / n, 4),
                           full_batch_share=round(sum(b >= concurrency for b in batches) / n, 4),
                           decode_ms=per_batch(decode_s), prefill_ms=per_batch(prefill_s),
                           other_ms=per_batch(max(window - decode_s - prefill_s, 0.0)), wall_ms=per_batch(window))


def arm_times(records: Sequence[Mapping[str, Any]], arms: Sequence[Any]) -> list[PointTimeRecord]:
    """Every measured point of ``arms`` (``bench.sweep.ArmResult``) that carries its wall-clock window, split by the
    trace's records (``bench.cycle.read_records``); points without a window (older sidecars) or without records are
    left out."""
    out = []
    for arm in arms:
        for point in arm.measured_points():
            if point.measured_from is None or point.measured_to is None:
                continue
            split = point_time(records, arm=arm.name, speculative=bool(arm.speculative),
                               concurrency=point.concurrency, measured_from=point.measured_from,
                               measured_to=point.measured_to)
            if split is not None:
                out.append(split)
    return out


def rows(points: Sequence[PointTimeRecord]) -> list[dict[str, Any]]:
    """For people: one row per arm and concurrency, milliseconds per decode batch (plain step or cycle)."""
    return [{"arm": p.arm, "concurrency": p.concurrency, "decode batches": p.decode_batches,
             "mean requests per batch": round(p.mean_batch_size, 2), "full batches %": round(p.full_batch_share * 100, 1),
             "prefill batches": p.prefill_batches, "decode ms": round(p.decode_ms, 2),
             "prefill ms": round(p.prefill_ms, 2), "other ms": round(p.other_ms, 2), "wall ms": round(p.wall_ms, 2)}
            for p in points]
