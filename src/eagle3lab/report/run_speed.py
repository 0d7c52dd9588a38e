"""Whether EAGLE-3 paid on this run, as the report says it: from the interleaved launch's bootstrap intervals, never
from one draw of the sequential sweep.

Why: on a shared 2-core machine the sweep's single draws of one summary line ranged 0.93x-1.87x at concurrency 4 over
13 committed runs. The interleaved launch runs both arms in the same spells of the machine on the same prompts and
keeps each round, so each point's speedup comes with a 95% interval over its rounds, and a verdict is "faster" or
"slower" only where that interval excludes 1 ("not resolved" where it holds 1). Each round's acceptance stands beside
its speedup (a round's speedup moves with its prompts' acceptance as much as with the machine), and the two launches
are compared on the prompts they share (``bench.launch_spread.common_prompts``), so a launch-to-launch spread is not
read as machine noise when it is the prompt mix.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from eagle3lab.bench import interleave, launch_spread
from eagle3lab.report import provenance
from eagle3lab.sidecars import FindingRecord, LaunchSample, PatchBenchSidecar

KEY = "patch.interleaved_sweep"
DERIVED = "derived.run_speed"


def interval_verdict(low: Optional[float], high: Optional[float]) -> str:
    """"faster" or "slower" only where the interval excludes 1; "not resolved" where it holds 1 or is missing."""
    if low is None or high is None:
        return "not resolved (no interval)"
    if low > 1.0:
        return "faster"
    if high < 1.0:
        return "slower"
    return "not resolved"


def _plain(point: Any) -> dict[str, Any]:
    return point.model_dump() if hasattr(point, "model_dump") else dict(point)


def verdicts_text(points: Sequence[Any]) -> str:
    """Each concurrency's verdict, grouped: 'faster at concurrency 1 and 4, not resolved at 2'."""
    groups: dict[str, list[str]] = {}
    for p in (_plain(x) for x in points):
        groups.setdefault(interval_verdict(p.get("speedup_low"), p.get("speedup_high")), []).append(
            str(p.get("concurrency")))
    parts = [f"{verdict} at {'concurrency ' if i == 0 else ''}{_and(cs)}" for i, (verdict, cs) in enumerate(groups.items())]
    text = ", ".join(parts) if parts else "not measured"
    return text[0].upper() + text[1:]


def interleaved_points(s03: Optional[PatchBenchSidecar]) -> list[LaunchSample]:
    """The interleaved launch's pair at each concurrency, lowest first (none without an interleaved launch)."""
    if s03 is None:
        return []
    return sorted((s for s in s03.interleaved_sweep if s.method == "interleaved"), key=lambda s: s.concurrency or 0)


def _profile_int(s03: PatchBenchSidecar, key: str) -> int:
    """A whole number from the profile's values as the run recorded them (0 where unset)."""
    value = s03.profile_values.get(key)
    return int(value) if isinstance(value, (int, float)) else 0


def derived(s03: Optional[PatchBenchSidecar]) -> dict[str, Any]:
    """What the report computes from notebook 03's sidecar and prints: the two launches on their common prompts at
    each concurrency (kept in the evidence tree, so each printed number has its key)."""
    if s03 is None:
        return {"common_prompts": [], "round_prompts": [], "overlap": None}
    output_len = _profile_int(s03, "bench_output_len")
    per_c, num = _profile_int(s03, "bench_prompts_per_concurrency"), _profile_int(s03, "bench_num_prompts")
    sequential = {r.concurrency: r for r in s03.speedup}
    rows = []
    for sample in interleaved_points(s03):
        c = sample.concurrency or 0
        first = sequential.get(c)
        if first is None or not first.baseline_tok_s or not first.eagle3_tok_s:
            continue
        prompts = max(num, per_c * c) if per_c else num
        row = launch_spread.common_prompts(first.baseline_tok_s, first.eagle3_tok_s, prompts, sample, output_len)
        if row is not None:
            rows.append({**row, "sequential_accept": first.accept_length})
    points = interleaved_points(s03)
    measured = launch_spread.round_prompts(points[0], output_len) if points else []
    return {"common_prompts": rows, "round_prompts": measured, "overlap": like_for_like(s03)}


def _interval(b: provenance.Binder, key: str, point: LaunchSample) -> str:
    if point.speedup_low is None or point.speedup_high is None:
        return "--"
    return f"{b.num(f'{key}.speedup_low', '.2f')}-{b.num(f'{key}.speedup_high', '.2f')}"


def summary_clause(b: provenance.Binder, s03: Optional[PatchBenchSidecar]) -> Optional[str]:
    """The summary's run bullet after its bottom line: each point's pooled speedup with its interval."""
    points = interleaved_points(s03)
    if not points or s03 is None:
        return None
    index = {id(s): i for i, s in enumerate(s03.interleaved_sweep)}
    level = points[0].interval_level_pct
    cells = []
    for n, point in enumerate(points):
        key = f"{KEY}.{index[id(point)]}"
        interval = _interval(b, key, point)
        lead = f"{level:g}% interval " if n == 0 and level is not None and interval != "--" else ""
        cells.append(f"{b.num(f'{key}.speedup', '.2f')}x ({lead}{interval}) at {b.num(f'{key}.concurrency', 'd')}")
    rounds = len(points[0].round_speedups)
    return (f"{b.rule('interval_verdicts', verdicts_text, KEY)}, pooled over {rounds} interleaved rounds: "
            + ", ".join(cells))


def context(b: provenance.Binder, s03: Optional[PatchBenchSidecar], tree_derived: dict[str, Any]) -> dict[str, Any]:
    """Section 5's tables: the interleaved points with intervals and verdicts, each round's acceptance beside its
    speedups, and the launches on their common prompts (with the bound sentence that reads them)."""
    points = interleaved_points(s03)
    if not points or s03 is None:
        return {"points": [], "rounds": [], "common": [], "common_sentence": None}
    index = {id(s): i for i, s in enumerate(s03.interleaved_sweep)}
    rows = []
    for point in points:
        key = f"{KEY}.{index[id(point)]}"
        cells = [b.num(f"{key}.concurrency", "d"), str(len(point.round_speedups)),
                 b.num(f"{key}.baseline_tok_s", ".1f"), b.num(f"{key}.eagle3_tok_s", ".1f"),
                 b.num(f"{key}.speedup", ".2f") + "x", _interval(b, key, point),
                 b.rule("interval_verdict", interval_verdict, f"{key}.speedup_low", f"{key}.speedup_high"),
                 b.num(f"{key}.accept_length", ".2f") if point.accept_length else "--"]
        rows.append(b.sentence(f"run_speed.point.{point.concurrency}", "| " + " | ".join(cells) + " |"))
    output_len = _profile_int(s03, "bench_output_len")
    prompts = launch_spread.round_prompts(points[0], output_len)
    rounds = []
    for r in range(max(len(p.round_speedups) for p in points)):
        accept = points[0].round_accept_lengths[r] if r < len(points[0].round_accept_lengths) else None
        rounds.append({"round": r + 1, "prompts": prompts[r] if r < len(prompts) else "--",
                       "accept": f"{accept:.2f}" if accept else "--",
                       "speedups": [f"{p.round_speedups[r]:.2f}x" if r < len(p.round_speedups) else "--"
                                    for p in points]})
    common = tree_derived.get("common_prompts", [])
    return {"points": rows, "rounds": rounds, "concurrencies": [p.concurrency for p in points],
            "same_accept": len({tuple(p.round_accept_lengths) for p in points}) == 1,
            "level": points[0].interval_level_pct, "common": [_common_row(r) for r in common],
            "common_sentence": _common_sentence(b, common)}


def _common_row(row: dict[str, Any]) -> dict[str, Any]:
    return {"concurrency": row["concurrency"], "prompts": row["prompts"], "rounds": row["rounds"],
            "sequential": f"{row['sequential_speedup']:.2f}x", "common": f"{row['interleaved_speedup_common']:.2f}x",
            "apart": f"{row['apart_common_pct']:.1f}", "all": f"{row['interleaved_speedup_all']:.2f}x",
            "all_prompts": row["interleaved_prompts"], "apart_all": f"{row['apart_all_pct']:.1f}",
            "accept_1": f"{row['sequential_accept']:.2f}" if row.get("sequential_accept") else "--",
            "accept_2": f"{row['interleaved_accept_common']:.2f}" if row.get("interleaved_accept_common") else "--"}


def prompt_mix_verdict(rows: Sequence[dict[str, Any]], tolerance_pct: float = launch_spread.LAUNCH_TOLERANCE_PCT
                       ) -> str:
    """Where the two launches agree on their common prompts (within the project's launch rule) and where they
    differ even there, by concurrency: agreement on the same prompts puts the launches' spread on the prompt mix,
    disagreement on the machine."""
    agree = [str(r["concurrency"]) for r in rows if r["apart_common_pct"] <= tolerance_pct]
    differ = [str(r["concurrency"]) for r in rows if r["apart_common_pct"] > tolerance_pct]
    parts = []
    if agree:
        parts.append(f"agree within the project's {tolerance_pct:g}% rule at concurrency {_and(agree)}, where the "
                     f"spread between the launches is the prompt mix")
    if differ:
        beyond = "beyond it at" if agree else f"by more than the project's {tolerance_pct:g}% rule at concurrency"
        parts.append(f"differ {beyond} {_and(differ)}, where the machine moved between the launches")
    return "; ".join(parts)


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _common_sentence(b: provenance.Binder, rows: Sequence[dict[str, Any]]) -> Optional[str]:
    if not rows:
        return None
    key = f"{DERIVED}.common_prompts"
    return b.sentence("run_speed.common", (
        f"On the prompts both launches measured, their speedups "
        f"{b.rule('prompt_mix', prompt_mix_verdict, key)} **[measured]**."))


def overlap_control(s03: Optional[PatchBenchSidecar]) -> Optional[int]:
    """The index in ``interleaved_variants`` of the baseline without sglang's overlap scheduler, measured beside
    the pair's default baseline (``bench_interleave_overlap_control``); None where the run measured none."""
    if s03 is None:
        return None
    return next((i for i, s in enumerate(s03.interleaved_variants) if s.role == "overlap_control"), None)


def like_for_like(s03: Optional[PatchBenchSidecar]) -> Optional[dict[str, Any]]:
    """EAGLE-3 against the baseline without the overlap scheduler (the same scheduler as its own), in the rounds
    both were measured in: each arm pooled over its blocks, the ratio's bootstrap interval over the paired rounds
    (``bench.interleave.speedup_interval``, the control's blocks where the baseline's stand)."""
    i = overlap_control(s03)
    if s03 is None or i is None:
        return None
    control = s03.interleaved_variants[i]
    pair = next((p for p in interleaved_points(s03)
                 if (p.launch, p.concurrency) == (control.launch, control.concurrency)), None)
    if pair is None or len(pair.round_eagle3) != len(control.round_eagle3) or not control.round_eagle3:
        return None
    speedup = interleave.pooled_rate(pair.round_eagle3) / interleave.pooled_rate(control.round_eagle3)
    interval = interleave.speedup_interval(control.round_eagle3, pair.round_eagle3)
    return {"concurrency": control.concurrency, "rounds": len(control.round_eagle3), "speedup": speedup,
            "low": interval.low if interval else None, "high": interval.high if interval else None,
            "level_pct": interval.level * 100 if interval else None, "default_speedup": pair.speedup}


def overlap_verdict(low: Optional[float], high: Optional[float]) -> str:
    """What the rounds resolve about the scheduler: the no-overlap baseline's rate over the default one's."""
    verdict = interval_verdict(low, high)
    if verdict == "slower":
        return "the scheduler makes sglang's default baseline faster, so it narrows EAGLE-3's speedup here"
    if verdict == "faster":
        return "the scheduler makes sglang's default baseline slower, so it widens EAGLE-3's speedup here"
    return "these rounds do not resolve a difference"


def overlap_sentence(b: provenance.Binder, s03: Optional[PatchBenchSidecar],
                     diagnostics: Sequence[FindingRecord]) -> Optional[str]:
    """The overlap scheduler, the one difference of scheduler between the arms: sglang turns it off under
    speculation and keeps it for the baseline. Where the run measured a baseline without it in the same rounds
    (``overlap_control``), what it gives the default baseline and EAGLE-3's speedup over a baseline with the same
    scheduler, each with its interval; else the asymmetry as the run's diagnostics and TTFTs show it, said to be
    uncontrolled."""
    row = next((r for r in diagnostics if r.cause == "overlap_scheduler_off"), None)
    if s03 is None or row is None or row.applies != "yes":
        return None
    arms = {(r.arm, r.concurrency): i for i, r in enumerate(s03.arms)}
    base, spec = arms.get(("baseline", 1)), arms.get(("eagle3", 1))
    ttft = ""
    if base is not None and spec is not None and s03.arms[base]["ttft_p50_ms"] is not None and \
            s03.arms[spec]["ttft_p50_ms"] is not None:
        ttft = (f" (in the sweep, TTFT p50 at concurrency 1: baseline {b.num(f'patch.arms.{base}.ttft_p50_ms', '.2f')} "
                f"ms, EAGLE-3 {b.num(f'patch.arms.{spec}.ttft_p50_ms', '.2f')} ms)")
    lead = ("The arms do not run the same scheduler: sglang keeps its overlap scheduler for the baseline and turns it "
            f"off under speculation (this run's server logs){ttft} **[measured]**")
    i, same = overlap_control(s03), like_for_like(s03)
    if i is None or same is None:
        return b.sentence("run_speed.overlap", (
            f"{lead}. These rounds do not control for it (`bench_interleave_overlap_control` off), so every speedup "
            f"above includes it."))
    key, derived_key = f"patch.interleaved_variants.{i}", f"{DERIVED}.overlap"
    control = s03.interleaved_variants[i]
    ratio_interval = (f" ({b.num(f'{key}.interval_level_pct', 'g')}% interval "
                      f"{b.num(f'{key}.speedup_low', '.3f')}-{b.num(f'{key}.speedup_high', '.3f')})"
                      if control.speedup_low is not None and control.speedup_high is not None else "")
    same_interval = (f" ({b.num(f'{derived_key}.level_pct', 'g')}% interval "
                     f"{b.num(f'{derived_key}.low', '.2f')}-{b.num(f'{derived_key}.high', '.2f')})"
                     if same["low"] is not None and same["high"] is not None else "")
    return b.sentence("run_speed.overlap", (
        f"{lead}. Measured in the same rounds at concurrency {b.num(f'{key}.concurrency', 'd')}, a baseline without "
        f"it (`--disable-overlap-schedule`) ran at {b.num(f'{key}.speedup', '.3f')} times the default baseline's "
        f"rate{ratio_interval}: {b.rule('overlap_verdict', overlap_verdict, f'{key}.speedup_low', f'{key}.speedup_high')}"
        f"; over that baseline EAGLE-3's speedup is {b.num(f'{derived_key}.speedup', '.2f')}x{same_interval}, "
        f"against {b.num(f'{derived_key}.default_speedup', '.2f')}x over the default one **[measured]**."))


RULES: dict[str, provenance.Rule] = {"interval_verdicts": verdicts_text, "interval_verdict": interval_verdict, "prompt_mix": prompt_mix_verdict,
         "overlap_verdict": overlap_verdict}
