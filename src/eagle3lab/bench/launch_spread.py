"""Launch to launch: the headline pair (baseline, EAGLE-3) measured on more than one launch of each server.

Why: on a shared machine the same server, launched twice with the same flags and swept on the same prompts, can
run at rates far apart (the CPU harness's own timers show the target's forward itself slower in one launch than in
the next, with nothing else busy on the machine: the machine's speed changes, not the code). A speedup from one
launch of each arm is then one draw. Relaunching both arms, in mirrored order (EAGLE-3, baseline | baseline,
EAGLE-3 | ...) so that a slow spell falls on both, and showing every launch pair's speedup with the spread, says how
far one figure can be trusted. Each pair's cycle and plain step come from the harness timers of those very launches
(``bench.cycle``), so a slow launch is visible as slower forwards, not only as fewer tokens per second.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eagle3lab.bench import cycle, interleave
from eagle3lab.bench.sweep import ArmResult, PointResult
from eagle3lab.errors import BenchError
from eagle3lab.sidecars import LaunchSample, LaunchSpreadRecord, VariantCost, today

# The project's rule, not a measurement: when the per-launch speedups spread by more than this share of their
# median, one launch's speedup is reported as one draw of a spread, never alone.
LAUNCH_TOLERANCE_PCT = 10.0


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / median, in percent: how far apart the launches are, relative to their typical value."""
    if not values:
        raise BenchError("no launch to compare")
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle * 100.0 if middle else 0.0


def _point(arm: ArmResult, concurrency: int) -> PointResult | None:
    return next((p for p in arm.measured_points() if p.concurrency == concurrency and p.metrics), None)


def launch_sample(launch: int, baseline: ArmResult, eagle3: ArmResult, concurrency: int,
                  trace: Path | None = None, profile: str = "", shims: Sequence[str] | None = None
                  ) -> LaunchSample | str:
    """One launch pair at ``concurrency``, or the reason it measured nothing there. With a harness trace the
    pair's plain step and cycle come from the timers of these two launches (their sweep windows)."""
    b, e = _point(baseline, concurrency), _point(eagle3, concurrency)
    missing = [arm.name for arm, point in ((baseline, b), (eagle3, e)) if point is None]
    if missing:
        return f"launch {launch}: {' and '.join(missing)} measured nothing at concurrency {concurrency}"
    assert b is not None and e is not None and b.metrics is not None and e.metrics is not None
    base_rate, spec_rate = b.metrics.output_tok_per_s, e.metrics.output_tok_per_s
    sample: dict[str, Any] = {"launch": launch, "baseline_arm": baseline.name, "eagle3_arm": eagle3.name,
                              "baseline_tok_s": base_rate, "eagle3_tok_s": spec_rate, "speedup": spec_rate / base_rate,
                              "accept_length": e.metrics.accept_length, "concurrency": concurrency,
                              "baseline_decode_tok_s": b.metrics.decode_tok_per_s,
                              "eagle3_decode_tok_s": e.metrics.decode_tok_per_s, "load_average": os.getloadavg()[0]}
    if trace is not None and trace.exists():
        try:
            table = cycle.table_from_arms(trace, baseline, eagle3, profile, batch_size=concurrency, shims=shims)
            sample.update(plain_step_ms=table.plain_step_ms, cycle_ms=table.cycle_ms,
                          cycle_in_plain_steps=table.cycle_in_plain_steps)
        except BenchError:
            pass  # no timer records in the window: the rates still stand
    return LaunchSample(**sample)


def interleaved_sample(launch: int, baseline_blocks: Sequence[ArmResult], eagle3_blocks: Sequence[ArmResult],
                       concurrency: int, trace: Path | None = None, profile: str = "",
                       shims: Sequence[str] | None = None) -> LaunchSample | str:
    """One launch pair measured in interleaved blocks (``bench.interleave``), or the reason it measured nothing:
    each arm's rate pooled over its blocks, each round's speedup and [tokens, seconds] kept with the bootstrap
    interval of the pooled speedup over the rounds (none with one round), the plain step and cycle from the harness
    timers of the whole interleaved window (the two servers told apart by their records)."""
    if not baseline_blocks or len(baseline_blocks) != len(eagle3_blocks):
        return f"launch {launch}: {len(baseline_blocks)} baseline blocks against {len(eagle3_blocks)} EAGLE-3 blocks"
    arms = [*baseline_blocks, *eagle3_blocks]
    points = [_point(arm, concurrency) for arm in arms]
    lost = [arm.name for arm, point in zip(arms, points) if point is None]
    if lost:
        return f"launch {launch}: {', '.join(lost)} measured nothing at concurrency {concurrency}"
    b_points = [p for p in points[:len(baseline_blocks)] if p is not None]  # all of them: none was lost
    e_points = [p for p in points[len(baseline_blocks):] if p is not None]
    base, spec = interleave.pooled(b_points), interleave.pooled(e_points)
    sample: dict[str, Any] = {
        "launch": launch, "baseline_arm": baseline_blocks[0].name.rsplit("-round", 1)[0],
        "eagle3_arm": eagle3_blocks[0].name.rsplit("-round", 1)[0], "baseline_tok_s": base.tok_s,
        "eagle3_tok_s": spec.tok_s, "speedup": spec.tok_s / base.tok_s, "accept_length": spec.accept_length,
        "concurrency": concurrency, "baseline_decode_tok_s": base.decode_tok_s,
        "eagle3_decode_tok_s": spec.decode_tok_s,
        "load_average": os.getloadavg()[0], "method": "interleaved",
        "round_speedups": [round(x, 4) for x in interleave.round_speedups(b_points, e_points)],
        "round_accept_lengths": [_round(interleave.pooled([e]).accept_length) for e in e_points],
        "round_prompts": [p.metrics.requests for p in e_points if p.metrics is not None],
        **_interval_fields(interleave.block_totals(b_points), interleave.block_totals(e_points))}
    if trace is not None and trace.exists():
        try:
            table = cycle.table_from_shared_window(trace, [(a.started_at, a.finished_at) for a in arms], profile,
                                                   sample["baseline_arm"], sample["eagle3_arm"],
                                                   batch_size=concurrency, shims=shims)
            sample.update(plain_step_ms=table.plain_step_ms, cycle_ms=table.cycle_ms,
                          cycle_in_plain_steps=table.cycle_in_plain_steps)
        except (BenchError, ValueError):
            pass  # no timer records in the window: the rates still stand
    return LaunchSample(**sample)


def variant_cost(headline: LaunchSample, variant: LaunchSample) -> VariantCost | None:
    """The variant's throughput against the headline EAGLE-3 arm's, both measured in the same interleaved rounds
    on the same prompts (``interleave.schedule``'s ``extra``): the ratio of their rates pooled over the rounds, and
    its percentile bootstrap interval resampling whole rounds (the headline arm's blocks standing where the baseline
    stands in ``interleave.speedup_interval``). None when the two were not measured in the same rounds."""
    if (headline.launch, headline.concurrency) != (variant.launch, variant.concurrency) or \
            len(headline.round_eagle3) != len(variant.round_eagle3) or not headline.round_eagle3:
        return None
    interval = interleave.speedup_interval(headline.round_eagle3, variant.round_eagle3)
    ratio = variant.eagle3_tok_s / headline.eagle3_tok_s
    return VariantCost(
        variant_arm=variant.eagle3_arm, headline_arm=headline.eagle3_arm, launch=variant.launch,
        concurrency=variant.concurrency or 1, rounds=len(variant.round_eagle3), rate_ratio=ratio,
        cost_pct=(1.0 - ratio) * 100,
        ratio_low=interval.low if interval else None, ratio_high=interval.high if interval else None,
        interval_level_pct=interval.level * 100 if interval else None,
        headline_speedup=headline.speedup, variant_speedup=variant.speedup,
        headline_accept_length=headline.accept_length, variant_accept_length=variant.accept_length)


def variant_rows(costs: Sequence[VariantCost]) -> list[dict[str, Any]]:
    """For people: each variant against the headline arm, same rounds and prompts."""
    return [{"variant": c.variant_arm, "against": c.headline_arm, "concurrency": c.concurrency, "rounds": c.rounds,
             "rate ratio": round(c.rate_ratio, 3), "bootstrap interval": _interval_text(c.ratio_low, c.ratio_high, 3),
             "throughput cost %": round(c.cost_pct, 1), "speedup, headline": round(c.headline_speedup, 2),
             "speedup, variant": round(c.variant_speedup, 2),
             "acceptance, headline": round(c.headline_accept_length, 2) if c.headline_accept_length else "--",
             "acceptance, variant": round(c.variant_accept_length, 2) if c.variant_accept_length else "--"}
            for c in costs]


def _interval_text(low: float | None, high: float | None, digits: int) -> str:
    """A bootstrap interval for people's tables, "--" without one."""
    return f"{low:.{digits}f} to {high:.{digits}f}" if low and high else "--"


def _interval_fields(baseline: list[list[float]], eagle3: list[list[float]]) -> dict[str, Any]:
    """The rounds' [tokens, seconds] and the bootstrap interval computed from them, as LaunchSample fields."""
    fields: dict[str, Any] = {"round_baseline": baseline, "round_eagle3": eagle3}
    interval = interleave.speedup_interval(baseline, eagle3)
    if interval is not None:
        fields.update(speedup_low=interval.low, speedup_high=interval.high, interval_level_pct=interval.level * 100,
                      interval_resamples=interval.resamples, interval_seed=interval.seed)
    return fields


def round_prompts(sample: LaunchSample, output_len: int) -> list[int]:
    """Each round's measured prompts: the sample's own record, else (sidecars written before it was kept) each
    round's output tokens over the fixed output length; empty when a round's tokens are not whole prompts."""
    if sample.round_prompts:
        return list(sample.round_prompts)
    counts = [tokens / output_len for tokens, _ in sample.round_eagle3] if output_len > 0 else []
    if not counts or any(c != int(c) for c in counts):
        return []
    return [int(c) for c in counts]


def common_prompts(sequential_baseline_tok_s: float, sequential_eagle3_tok_s: float, prompts: int,
                   interleaved: LaunchSample, output_len: int) -> dict[str, Any] | None:
    """The sequential launch against the interleaved one on the same prompts. Both take their measured prompts
    from the start of the same stream (``workload.measure_prompts``): the sequential launch its point's
    ``prompts``, the interleaved one its blocks in round order, so the interleaved rounds that cover exactly
    those prompts are the common ones. Each arm pooled over those rounds (tokens over seconds, as the sequential
    rate is). None when no run of leading rounds covers exactly ``prompts`` prompts or the rounds were not kept.

    Why: two launches measured on different prompts differ by the prompts' acceptance as well as by the machine;
    a spread between them is only a machine's spread where the prompts are the same."""
    counts = round_prompts(interleaved, output_len)
    covered = [sum(counts[:k]) for k in range(1, len(counts) + 1)]
    if prompts not in covered or len(interleaved.round_baseline) < len(counts):
        return None
    rounds = covered.index(prompts) + 1
    base = interleave.pooled_rate(interleaved.round_baseline[:rounds])
    spec = interleave.pooled_rate(interleaved.round_eagle3[:rounds])
    sequential = sequential_eagle3_tok_s / sequential_baseline_tok_s
    common = spec / base
    return {"concurrency": interleaved.concurrency, "prompts": prompts, "rounds": rounds,
            "interleaved_prompts": sum(counts), "sequential_speedup": sequential,
            "interleaved_speedup_common": common, "interleaved_speedup_all": interleaved.speedup,
            "apart_common_pct": abs(common / sequential - 1.0) * 100.0,
            "apart_all_pct": abs(interleaved.speedup / sequential - 1.0) * 100.0,
            "interleaved_accept_common": _pooled_accept(interleaved, rounds, counts)}


def _pooled_accept(sample: LaunchSample, rounds: int, counts: Sequence[int]) -> float | None:
    """The EAGLE-3 acceptance over the first ``rounds`` rounds: their completion tokens over their verify steps."""
    accepts = sample.round_accept_lengths[:rounds]
    if len(accepts) < rounds or any(a is None or a <= 0 for a in accepts):
        return None
    tokens = [t for t, _ in sample.round_eagle3[:rounds]]
    return sum(tokens) / sum(t / a for t, a in zip(tokens, accepts) if a)


def samples_from_runs(runs: Sequence[Any], concurrency: int) -> list[LaunchSample]:
    """Pairs of a user's benchmark runs at ``concurrency`` (``diagnostics.BenchFigures``, in the order given): the
    i-th baseline run with the i-th speculative one, as many pairs as both arms have runs."""
    def rates(arm: str) -> list[Any]:
        return [r for r in runs if r.arm == arm and r.concurrency == concurrency and r.output_tok_s]

    return [LaunchSample(launch=i, baseline_arm=f"baseline run {i}", eagle3_arm=f"speculative run {i}",
                         baseline_tok_s=b.output_tok_s, eagle3_tok_s=e.output_tok_s,
                         speedup=e.output_tok_s / b.output_tok_s, accept_length=e.accept_length)
            for i, (b, e) in enumerate(zip(rates("baseline"), rates("speculative")), start=1)]


def spread_record(samples: Sequence[LaunchSample], concurrency: int, order: str, skipped: Sequence[str] = (),
                  tolerance_pct: float = LAUNCH_TOLERANCE_PCT) -> LaunchSpreadRecord | None:
    """How far the launch pairs agree; None with fewer than two measured pairs (one launch has no spread)."""
    if len(samples) < 2:
        return None
    speedups = [s.speedup for s in samples]
    spread = spread_pct(speedups)
    return LaunchSpreadRecord(
        concurrency=concurrency, measured_on=today(), order=order, launches=list(samples), skipped=list(skipped),
        baseline_spread_pct=spread_pct([s.baseline_tok_s for s in samples]),
        eagle3_spread_pct=spread_pct([s.eagle3_tok_s for s in samples]),
        speedup_min=min(speedups), speedup_median=statistics.median(speedups), speedup_max=max(speedups),
        speedup_spread_pct=spread, tolerance_pct=tolerance_pct, agrees=spread <= tolerance_pct)


def how_measured(sample: LaunchSample) -> str:
    """How a pair was measured, for people: one sweep of each arm, or interleaved blocks with each round's range."""
    if sample.method != "interleaved" or not sample.round_speedups:
        return "one sweep of each arm, in turn"
    return f"both servers up, {_rounds(sample)}"


def _rounds(sample: LaunchSample) -> str:
    """The rounds of an interleaved pair: their speedups' range and spread, the pooled speedup's bootstrap interval
    when there is one, and the EAGLE-3 acceptance's range."""
    speedups = sample.round_speedups
    accepts = [a for a in sample.round_accept_lengths if a is not None]
    accept = f"; EAGLE-3 acceptance {min(accepts):.2f} to {max(accepts):.2f}" if accepts else ""
    return (f"{len(speedups)} interleaved rounds (round speedups {min(speedups):.2f}x to {max(speedups):.2f}x, "
            f"spread {spread_pct(speedups):.1f}%{_interval(sample)}{accept})")


def _interval(sample: LaunchSample) -> str:
    """The interval clause ("; pooled speedup's <level>% bootstrap interval over <rounds> rounds <low>x to <high>x"),
    all from the sample's own fields; empty without an interval (one round, or an older sidecar)."""
    low, high, level = sample.speedup_low, sample.speedup_high, sample.interval_level_pct
    if low is None or high is None or level is None or not sample.round_baseline:
        return ""
    return (f"; pooled speedup's {level:g}% bootstrap interval over "
            f"{len(sample.round_baseline)} rounds {low:.2f}x to {high:.2f}x")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def rows(record: LaunchSpreadRecord) -> list[dict[str, Any]]:
    """For people: one row per launch pair, then the spread of each column."""
    def r(value: float | None, digits: int = 1) -> float | str:
        return round(value, digits) if value is not None else "--"

    out: list[dict[str, Any]] = [
        {"launch": s.launch, "measured": how_measured(s), "baseline tok/s": r(s.baseline_tok_s),
         "EAGLE-3 tok/s": r(s.eagle3_tok_s),
         "speedup": r(s.speedup, 2), "acceptance length": r(s.accept_length, 2),
         "plain step ms": r(s.plain_step_ms, 2), "cycle ms": r(s.cycle_ms, 2),
         "cycle in plain steps": r(s.cycle_in_plain_steps, 2), "load (1 min)": r(s.load_average, 2)}
        for s in record.launches]
    out.append({"launch": "spread %", "measured": "", "baseline tok/s": r(record.baseline_spread_pct),
                "EAGLE-3 tok/s": r(record.eagle3_spread_pct), "speedup": r(record.speedup_spread_pct),
                "acceptance length": "", "plain step ms": "", "cycle ms": "", "cycle in plain steps": "",
                "load (1 min)": ""})
    return out


def point_rows(samples: Sequence[LaunchSample]) -> list[dict[str, Any]]:
    """For people: the interleaved launch's pair at each concurrency (client-seen and decode-only rates, the
    speedup with its bootstrap interval, the EAGLE-3 acceptance)."""
    def r(value: float | None, digits: int = 1) -> float | str:
        return round(value, digits) if value is not None else "--"

    return [{"launch": s.launch, "concurrency": s.concurrency, "rounds": len(s.round_speedups),
             "baseline tok/s": r(s.baseline_tok_s), "EAGLE-3 tok/s": r(s.eagle3_tok_s), "speedup": r(s.speedup, 2),
             "bootstrap interval": _interval_text(s.speedup_low, s.speedup_high, 2), "baseline decode tok/s": r(s.baseline_decode_tok_s),
             "EAGLE-3 decode tok/s": r(s.eagle3_decode_tok_s), "decode speedup": r(s.decode_speedup, 2),
             "acceptance length": r(s.accept_length, 2)}
            for s in sorted(samples, key=lambda s: (s.launch, s.concurrency or 0))]


def verdict(record: LaunchSpreadRecord) -> str:
    """One sentence on whether one launch's speedup can be quoted alone here."""
    span = (f"speedup {record.speedup_min:.2f}x to {record.speedup_max:.2f}x over {len(record.launches)} launch pairs "
            f"at concurrency {record.concurrency} (spread {record.speedup_spread_pct:.1f}%, rule "
            f"{record.tolerance_pct:.0f}%)")
    within = "".join(f" Launch {s.launch}: {s.speedup:.2f}x over {_rounds(s)}."
                     for s in record.launches if s.method == "interleaved" and s.round_speedups)
    if record.agrees:
        return f"The launches agree: {span}.{within}"
    return (f"The launches disagree: {span}; on this machine one launch's speedup is one draw, read the median "
            f"{record.speedup_median:.2f}x with its range.{within}")
