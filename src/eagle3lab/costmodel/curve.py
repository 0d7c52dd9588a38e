"""Calibration on the plain-decode curve a user has measured: tok/s at a few concurrencies, not only one stream.

Why: a single-stream rate fixes the per-step overhead but says nothing about how fast the step grows with the batch
(expert weights touched, KV reads, compute), and that growth sets the verify pass's cost, which runs k x batch
tokens. With two or more points the model fits two numbers and nothing else: the kernel overhead at the smallest
batch (as ``calibrate_baseline`` does) and, at the largest, how concentrated the router is for a MoE target
(``MoE.effective_experts``: the uniform bound over every expert overstates the experts a real batch touches) or, for a
dense target (or a MoE one already slower than its peak under uniform routing), the achieved fraction of the
datasheet memory bandwidth (``Engine.bandwidth_efficiency``). Points in between are predicted and reported as a check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.cycle import Deployment, plain_step
from eagle3lab.costmodel.predict import calibrate_baseline

MIN_EFFICIENCY, MAX_EFFICIENCY = 0.2, 1.0  # achieved fraction of the datasheet bandwidth the fit may choose
GRID = 10  # coarse grid steps that find where the smallest point can be calibrated at all


@dataclass(frozen=True)
class CurvePoint:
    batch: int
    tok_s: float


@dataclass(frozen=True)
class CurveCalibration:
    """The calibrated deployment, what was fitted, and the model's plain rate at every given point."""

    deployment: Deployment
    fitted: str  # "kernel overhead", "effective experts" or "bandwidth efficiency" (the second number)
    value: float  # the second number's value (0 when only one point was given)
    kernel_overhead_s: float
    at_bound: bool  # the largest point could not be reached inside the second number's range
    points: tuple[tuple[int, float, float], ...]  # (batch, measured tok/s, calibrated model tok/s)

    @property
    def description(self) -> str:
        fitted = ", ".join(f"{b}: {m:g} tok/s (model {p:.1f})" for b, m, p in self.points)
        bound = " (held at its bound: the largest point lies outside what the model reaches)" if self.at_bound else ""
        second = {"effective experts": f", router concentration {self.value:.0f} effective experts at the largest",
                  "bandwidth efficiency": f", achieved bandwidth {self.value:.2f} of the datasheet at the largest"}
        return (f"plain-decode curve {fitted}: kernel overhead {self.kernel_overhead_s * 1e6:.2f} us at the smallest "
                f"batch{second.get(self.fitted, '')}{bound}")


def parse_curve(text: str) -> list[CurvePoint]:
    """'1:63.6,128:2370' -> points sorted by batch; one clear error for anything else."""
    points = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        batch, sep, rate = part.partition(":")
        try:
            point = CurvePoint(int(batch), float(rate))
        except ValueError:
            raise PerfModelError(f"--baseline-curve expects batch:tok/s pairs such as 1:63.6,128:2370, got '{part}'",
                                 parameter="baseline_curve", value=text, problem="unparsable") from None
        if not sep or point.batch < 1 or not point.tok_s > 0 or not math.isfinite(point.tok_s):
            raise PerfModelError(f"--baseline-curve: '{part}' needs a batch >= 1 and a finite rate > 0 (batch:tok/s)",
                                 parameter="baseline_curve", value=text, problem="out_of_range")
        points.append(point)
    if not points or len({p.batch for p in points}) != len(points):
        raise PerfModelError(f"--baseline-curve needs distinct batch sizes, got '{text}'", parameter="baseline_curve",
                             value=text, problem="duplicate")
    return sorted(points, key=lambda p: p.batch)


def _with_efficiency(dep: Deployment, efficiency: float, first: CurvePoint, where: str) -> Deployment:
    engine = dep.engine.with_(f"calibrated: achieved bandwidth from the plain-decode curve ({where})",
                              bandwidth_efficiency=efficiency)
    return calibrate_baseline(replace(dep, engine=engine), first.tok_s, where, batch=first.batch)


def _with_experts(dep: Deployment, experts: float, first: CurvePoint, where: str) -> Deployment:
    moe = dep.target.moe
    assert moe is not None
    target = replace(dep.target, moe=replace(moe, effective_experts=experts))
    return calibrate_baseline(replace(dep, target=target), first.tok_s, where, batch=first.batch)


def _bisect(build: Callable[[float], Deployment], lo: float, hi: float, batch: int,
            goal: float) -> tuple[float, bool]:
    """The value in [lo, hi] whose calibrated deployment decodes ``batch`` requests at ``goal`` tok/s, and whether it
    had to stop at a bound. Values where the smallest point cannot be calibrated at all are skipped (a coarse grid
    finds the feasible stretch; the rate is monotonic in the value over it, in either direction)."""

    def rate(value: float) -> float:
        try:
            return plain_step(build(value), batch).tok_s
        except PerfModelError:
            return float("nan")

    grid = [(v, rate(v)) for v in (lo + (hi - lo) * i / GRID for i in range(GRID + 1))]
    feasible = [(v, r) for v, r in grid if r == r]
    if not feasible:
        raise PerfModelError(f"calibration: no value in [{lo:g}, {hi:g}] lets the model reach the smallest measured "
                             "point; check the hardware, tp and context", problem="below_model_floor")
    (slow, r_slow), (fast, r_fast) = feasible[0], feasible[-1]
    if r_slow > r_fast:
        (slow, r_slow), (fast, r_fast) = (fast, r_fast), (slow, r_slow)
    if goal >= r_fast:
        return fast, not abs(goal - r_fast) <= 1e-9 * goal
    if goal <= r_slow:
        return slow, not abs(goal - r_slow) <= 1e-9 * goal
    for _ in range(60):
        mid = (slow + fast) / 2
        r = rate(mid)
        if r != r or r < goal:
            slow = mid
        else:
            fast = mid
    return (slow + fast) / 2, False


def calibrate_curve(dep: Deployment, points: list[CurvePoint], where: str) -> CurveCalibration:
    """Kernel overhead from the smallest batch; with a second point, the router concentration (MoE) or the achieved
    bandwidth (dense, or a MoE target already too fast under uniform routing) that matches the largest batch."""
    first, last = points[0], points[-1]
    fitted_name, value, at_bound = "kernel overhead", 0.0, False
    fitted = calibrate_baseline(dep, first.tok_s, where, batch=first.batch)
    if len(points) > 1:
        moe = dep.target.moe
        uniform_rate = plain_step(fitted, last.batch).tok_s
        if moe is not None and last.tok_s >= uniform_rate:
            value, at_bound = _bisect(lambda e: _with_experts(dep, e, first, where), float(moe.top_k),
                                      float(moe.n_experts), last.batch, last.tok_s)
            fitted_name, fitted = "effective experts", _with_experts(dep, value, first, where)
        else:
            value, at_bound = _bisect(lambda e: _with_efficiency(dep, e, first, where), MIN_EFFICIENCY,
                                      MAX_EFFICIENCY, last.batch, last.tok_s)
            fitted_name, fitted = "bandwidth efficiency", _with_efficiency(dep, value, first, where)
    rows = tuple((p.batch, p.tok_s, plain_step(fitted, p.batch).tok_s) for p in points)
    return CurveCalibration(fitted, fitted_name, value, fitted.engine.kernel_overhead_s, at_bound, rows)
