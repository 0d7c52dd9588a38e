"""Both headline servers up at once, one concurrency measured in short alternating blocks.

Why: on a shared 2-core guest the same server swept twice can run at rates far apart, and a pair measured one arm
after the other puts each arm into a different spell of the machine: relaunched that way, the headline pair's
speedup at concurrency 1 spread by more than half its median on one day (the launch table of the report). Here
both servers are up together (the cpu profile passes sglang's ``--sleep-on-idle``, so the idle one does not spin a
core) and the measured prompts (the point's own, or more: ``bench_interleave_prompts``) are split into consecutive
blocks, one per round, measured in mirrored order (baseline then EAGLE-3, then EAGLE-3 then baseline, ...) with
every block on the same prompts for both arms. A slow spell then falls on both arms; each arm's rate is its output
tokens over its measured time pooled over its blocks. Each round's own speedup and its EAGLE-3 acceptance are kept:
a round's speedup moves with its prompts' acceptance as much as with the machine. How far the pooled speedup
rests on which rounds happened to be measured is a bootstrap over the rounds (``speedup_interval``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eagle3lab.bench.metrics import PointMetrics
from eagle3lab.bench.sweep import PointResult
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError

BASELINE, EAGLE3 = "baseline", "eagle3"

# The bootstrap's defaults: a fixed seed so that the same rounds always give the same interval (a notebook rerun,
# the report and a reader recomputing it from the sidecar agree); enough resamples that another seed moves the
# interval's ends by little beside its width (on six rounds, about a unit in the second decimal of the speedup).
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_LEVEL = 0.95


def round_order(rounds: int, first: str = BASELINE, second: str = EAGLE3) -> list[tuple[str, str]]:
    """The two sides of each round, mirrored from one round to the next (ABBA...): a drift falls on both."""
    if rounds < 1:
        raise BenchError(f"an interleaved measurement needs at least one round, got {rounds}", key="rounds",
                         value=rounds)
    return [(first, second) if r % 2 == 0 else (second, first) for r in range(rounds)]


def order_label(rounds: int) -> str:
    """The rounds for people: "both up, 4 rounds BE EB BE EB" (B baseline, E EAGLE-3)."""
    letters = {BASELINE: "B", EAGLE3: "E"}
    return f"both up, {rounds} rounds " + " ".join("".join(letters[a] for a in arms) for arms in round_order(rounds))


def block_configs(config: SweepConfig, concurrency: int, rounds: int, prompts: int | None = None
                  ) -> list[SweepConfig]:
    """``prompts`` measured prompts per arm (default: the point's own, ``prompts_for(concurrency)``), the next ones
    of the point's stream, split into consecutive blocks, one per round, as equal as they go and never fewer prompts
    than the concurrency (so fewer rounds when there are few prompts)."""
    total = config.prompts_for(concurrency) if prompts is None else prompts
    if total < 1:
        raise BenchError(f"an interleaved measurement needs at least one prompt, got {total}", key="prompts",
                         value=total)
    rounds = max(1, min(rounds, total // concurrency))
    sizes = [total // rounds + (1 if i < total % rounds else 0) for i in range(rounds)]
    blocks, start = [], config.measure_offset
    for size in sizes:
        blocks.append(dataclasses.replace(config, concurrency=[concurrency], num_prompts=size,
                                          prompts_per_concurrency=None, measure_offset=start))
        start += size
    return blocks


@dataclass(frozen=True)
class Block:
    """One block of the interleaved schedule: which round, which concurrency, which arm, on which prompts."""

    round: int  # 1-based
    concurrency: int
    arm: str
    config: SweepConfig


def schedule(blocks: Mapping[int, Sequence[SweepConfig]], first: str = BASELINE, second: str = EAGLE3,
             extra: Mapping[int, Sequence[str]] | None = None) -> list[Block]:
    """Every concurrency's blocks (``block_configs``) woven into one run: round r measures round r of each
    concurrency, lowest first, every arm of each in the round's mirrored order (``round_order``; ``extra`` arms,
    e.g. a variant of the EAGLE-3 arm at one concurrency, come after the pair and the whole order is reversed on
    alternate rounds). So every point of the sweep, not only the first, has its arms in the same spells of the
    machine, on the same prompts; a concurrency with fewer rounds (fewer prompts than rounds x concurrency) sits
    out the last rounds."""
    if not blocks:
        raise BenchError("an interleaved measurement needs at least one concurrency", key="concurrency", value=[])
    rounds = max(len(b) for b in blocks.values())
    out: list[Block] = []
    for number, arms in enumerate(round_order(rounds, first, second), start=1):
        for concurrency in sorted(blocks):
            if number <= len(blocks[concurrency]):
                more = list((extra or {}).get(concurrency, ()))
                order = [*arms, *more] if arms[0] == first else [*more[::-1], *arms]
                out.extend(Block(number, concurrency, arm, blocks[concurrency][number - 1]) for arm in order)
    return out


@dataclass(frozen=True)
class Pooled:
    """One arm over its blocks: output tokens over measured seconds, and sglang's acceptance pooled the same way;
    the decode-only rate as the bench defines it (running requests / mean TPOT), the TPOT pooled over requests."""

    tok_s: float
    accept_length: float | None
    decode_tok_s: float | None = None


def pooled(points: Sequence[PointResult]) -> Pooled:
    """Sum of output tokens over sum of measured durations; acceptance as completion tokens over verify steps, the
    verify steps of each block recovered from its own pooled acceptance (tokens / acceptance)."""
    measured = [p.metrics for p in points if p.measured and p.metrics is not None]
    if len(measured) != len(points) or not measured:
        raise BenchError(f"{len(points) - len(measured)} of {len(points)} blocks measured nothing")
    tokens = sum(m.output_tokens for m in measured)
    seconds = sum(m.duration_s for m in measured)
    if seconds <= 0 or tokens <= 0:
        raise BenchError("the blocks produced no tokens in measured time")
    # every block's (tokens, acceptance); when one block's acceptance is unknown, so is the pool's
    known = [(m.output_tokens, m.accept_length) for m in measured if m.accept_length]
    accept = tokens / sum(t / a for t, a in known) if len(known) == len(measured) else None
    return Pooled(tok_s=tokens / seconds, accept_length=accept, decode_tok_s=_pooled_decode_rate(measured))


def _pooled_decode_rate(measured: Sequence[PointMetrics]) -> float | None:
    """Running requests over the requests' mean TPOT across all blocks (each block's mean weighted by its requests);
    None when the blocks ran at different concurrencies or a block has no TPOT."""
    tpots = [(mean, m.tpot_s.count) for m in measured
             if m.tpot_s.count and (mean := m.tpot_s.mean) is not None and mean > 0]
    if len({m.concurrency for m in measured}) != 1 or len(tpots) != len(measured):
        return None
    tpot = sum(mean * count for mean, count in tpots) / sum(count for _, count in tpots)
    return measured[0].concurrency / tpot


def round_speedups(baseline: Sequence[PointResult], eagle3: Sequence[PointResult]) -> list[float]:
    """Each round's own speedup (its EAGLE-3 block's rate over its baseline block's, same prompts)."""
    if len(baseline) != len(eagle3):
        raise BenchError(f"{len(baseline)} baseline blocks against {len(eagle3)} EAGLE-3 blocks")
    return [pooled([e]).tok_s / pooled([b]).tok_s for b, e in zip(baseline, eagle3)]


def block_totals(points: Sequence[PointResult]) -> list[list[float]]:
    """Each block's [output tokens, measured seconds], in round order: what the pooled rate is made of, kept so
    that the bootstrap interval can be recomputed from a sidecar."""
    pooled(points)  # refuses a block that measured nothing, or blocks with no tokens in measured time
    return [[float(p.metrics.output_tokens), float(p.metrics.duration_s)] for p in points if p.metrics is not None]


def pooled_rate(blocks: Sequence[Sequence[float]]) -> float:
    """An arm's rate over some of its blocks, each kept as [output tokens, measured seconds]: summed tokens over
    summed seconds (as ``pooled`` does from the points)."""
    tokens, seconds = sum(b[0] for b in blocks), sum(b[1] for b in blocks)
    if seconds <= 0 or tokens <= 0:
        raise BenchError("the blocks produced no tokens in measured time")
    return tokens / seconds


@dataclass(frozen=True)
class SpeedupInterval:
    """A percentile bootstrap interval of the pooled speedup, and what it was computed from."""

    low: float
    high: float
    level: float  # e.g. 0.95
    rounds: int
    resamples: int
    seed: int


def speedup_interval(baseline: Sequence[Sequence[float]], eagle3: Sequence[Sequence[float]],
                     resamples: int = BOOTSTRAP_RESAMPLES, level: float = BOOTSTRAP_LEVEL,
                     seed: int = BOOTSTRAP_SEED) -> SpeedupInterval | None:
    """Percentile bootstrap interval of the pooled speedup, resampling whole rounds with replacement.

    ``baseline`` and ``eagle3``: each round's block as [output tokens, measured seconds] (``block_totals``), round
    i of one arm paired with round i of the other. Each of ``resamples`` draws picks as many rounds as were
    measured, with replacement, and takes (sum EAGLE-3 tokens / sum EAGLE-3 seconds) / (sum baseline tokens / sum
    baseline seconds); the interval is the central ``level`` share of those draws (numpy's linear quantiles).
    ``seed`` seeds ``numpy.random.default_rng``: the same rounds give the same interval.

    Why rounds, kept paired: both blocks of a round ran on the same prompts in the same spell of the machine, and
    both the machine's speed and the prompts' acceptance change from block to block. Resampling single blocks, or
    the two arms apart, would mix a fast spell of one arm with a slow spell of the other and break the pairing
    that interleaving was for.

    Limit: with few rounds (6 by default) there are few distinct resamples, the interval's ends are coarse, and a
    percentile bootstrap on so small a sample tends to be too narrow. It measures how far the rounds disagree,
    not a guarantee on the speedup of another day or another launch.

    Returns None with a single round (a resample of one round is that round: there is no spread to measure). No
    rounds, unpaired rounds, a round with no tokens or no time, ``resamples`` below 1 or ``level`` outside (0, 1)
    raise ``BenchError``.
    """
    base, spec = _rounds_array(baseline, eagle3)
    if not 0.0 < level < 1.0:
        raise BenchError(f"the interval's level must be between 0 and 1, got {level}", key="level", value=level)
    if resamples < 1:
        raise BenchError(f"the bootstrap needs at least one resample, got {resamples}", key="resamples",
                         value=resamples)
    rounds = len(base)
    if rounds < 2:
        return None
    picks = np.random.default_rng(seed).integers(0, rounds, size=(resamples, rounds))
    b, e = base[picks].sum(axis=1), spec[picks].sum(axis=1)  # (resamples, 2): summed tokens, summed seconds
    speedups = (e[:, 0] / e[:, 1]) / (b[:, 0] / b[:, 1])
    low, high = np.quantile(speedups, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return SpeedupInterval(low=float(low), high=float(high), level=level, rounds=rounds, resamples=resamples,
                           seed=seed)


def _rounds_array(baseline: Sequence[Sequence[float]], eagle3: Sequence[Sequence[float]]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Both arms' rounds as (rounds, 2) arrays of [tokens, seconds], refused in one line when they cannot pool."""
    if len(baseline) != len(eagle3):
        raise BenchError(f"{len(baseline)} baseline rounds against {len(eagle3)} EAGLE-3 rounds")
    if not baseline:
        raise BenchError("no round to resample", key="rounds", value=0)
    base, spec = np.asarray(baseline, dtype=float), np.asarray(eagle3, dtype=float)
    if base.shape != (len(baseline), 2) or spec.shape != base.shape:
        raise BenchError("each round is [output tokens, measured seconds] for each arm")
    if not (np.all(base > 0) and np.all(spec > 0)):
        raise BenchError("a round with no output tokens or no measured time has no rate to resample")
    return base, spec
