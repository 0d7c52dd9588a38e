"""The three naive baselines every evaluation sets beside the model (issue 36, item 5).

- "no gain": EAGLE-3 gives nothing, speedup 1.0x;
- "constant speedup": one speedup for every point, fitted on development data (the MAPE-optimal constant, a
  weighted median);
- "acceptance over a fitted cycle": speedup = acceptance length / r, one cycle-to-step ratio r for every point,
  fitted on development data the same way.

A model that does not beat these on a set says nothing that a number in a spreadsheet would not. Fitting needs
only (published speedup, acceptance) pairs, so the development pool is whatever the caller passes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from eagle3lab.errors import PerfModelError

NAMES = {"no_gain": "no gain (1.0x)", "constant_speedup": "a constant speedup fitted on development data",
         "accept_over_cycle": "acceptance over a cycle/step ratio fitted on development data"}


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value minimising sum(w |v - x|): where the cumulative weight first reaches half."""
    if not values or len(values) != len(weights) or any(w < 0 for w in weights):
        raise PerfModelError("weighted median: need as many non-negative weights as values, at least one")
    pairs = sorted(zip(values, weights))
    half, total = sum(weights) / 2, 0.0
    for value, weight in pairs:
        total += weight
        if total >= half:
            return value
    return pairs[-1][0]


@dataclass(frozen=True)
class Baselines:
    """The fitted numbers and what they were fitted on."""

    constant_speedup: float
    cycle_ratio: float
    fitted_on: str
    points: int

    def predict(self, name: str, accept_length: Optional[float]) -> Optional[float]:
        if name == "no_gain":
            return 1.0
        if name == "constant_speedup":
            return self.constant_speedup
        if name == "accept_over_cycle":
            return None if accept_length is None else accept_length / self.cycle_ratio
        raise PerfModelError(f"unknown baseline '{name}'; known: {', '.join(NAMES)}")


def fit_baselines(speedups: Sequence[float], accepts: Sequence[Optional[float]], fitted_on: str) -> Baselines:
    """Both fitted baselines on a development pool: the constant minimises the MAPE of ``speedups``; the ratio
    minimises the MAPE of accept / r over the points with an acceptance."""
    if not speedups:
        raise PerfModelError("baselines: no development point to fit on")
    constant = weighted_median(list(speedups), [1.0 / s for s in speedups])
    paired = [(s, a) for s, a in zip(speedups, accepts) if a is not None]
    if not paired:
        raise PerfModelError("baselines: no development point with a published acceptance")
    # |a/r - s| / s = (a/s) |1/r - s/a|: a weighted median of s/a with weights a/s gives 1/r
    inverse = weighted_median([s / a for s, a in paired], [a / s for s, a in paired])
    return Baselines(constant, 1.0 / inverse, fitted_on, len(speedups))


def mape(predicted: Sequence[float], published: Sequence[float]) -> float:
    if not published or len(predicted) != len(published):
        raise PerfModelError("MAPE: need as many predictions as published values, at least one")
    return statistics.fmean(abs(p - y) / y * 100 for p, y in zip(predicted, published))


def baseline_mapes(baselines: Baselines, published: Sequence[float],
                   accepts: Sequence[Optional[float]]) -> dict[str, Optional[float]]:
    """Each baseline's MAPE over the points where it is defined (None where it is defined on none)."""
    out: dict[str, Optional[float]] = {}
    for name in NAMES:
        pairs = [(baselines.predict(name, a), y) for y, a in zip(published, accepts)]
        kept = [(p, y) for p, y in pairs if p is not None]
        out[name] = mape([p for p, _ in kept], [y for _, y in kept]) if kept else None
    return out
