"""Both headline servers up at once, one concurrency measured in short alternating blocks.

Why: on a shared 2-core guest the same server swept twice can run at rates far apart, and a pair measured one arm
after the other puts each arm into a different spell of the machine: relaunched that way, the headline pair's
speedup at concurrency 1 spread by more than half its median on one day (the launch table of the report). Here
both servers are up together (the cpu profile passes sglang's ``--sleep-on-idle``, so the idle one does not spin a
core) and the measured prompts (the point's own, or more: ``bench_interleave_prompts``) are split into consecutive
blocks, one per round, measured in mirrored order (baseline then EAGLE-3, then EAGLE-3 then baseline, ...) with
every block on the same prompts for both arms. A slow spell then falls on both arms; each arm's rate is its output
tokens over its measured time pooled over its blocks. Each round's own speedup and its EAGLE-3 acceptance are kept:
a round's speedup moves with its prompts' acceptance as much as with the machine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from eagle3lab.bench.sweep import PointResult
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError

BASELINE, EAGLE3 = "baseline", "eagle3"


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
class Pooled:
    """One arm over its blocks: output tokens over measured seconds, and sglang's acceptance pooled the same way."""

    tok_s: float
    accept_length: float | None


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
    accept = None
    if all(m.accept_length for m in measured):  # else one block's acceptance is unknown, and so is the pool's
        accept = tokens / sum(m.output_tokens / m.accept_length for m in measured)
    return Pooled(tok_s=tokens / seconds, accept_length=accept)


def round_speedups(baseline: Sequence[PointResult], eagle3: Sequence[PointResult]) -> list[float]:
    """Each round's own speedup (its EAGLE-3 block's rate over its baseline block's, same prompts)."""
    if len(baseline) != len(eagle3):
        raise BenchError(f"{len(baseline)} baseline blocks against {len(eagle3)} EAGLE-3 blocks")
    return [pooled([e]).tok_s / pooled([b]).tok_s for b, e in zip(baseline, eagle3)]
