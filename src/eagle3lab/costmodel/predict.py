"""The one call a user makes: a deployment, EAGLE flags, an acceptance length, batch sizes -> throughput and speedup.

Calibration uses single-stream measurements only, and each fits exactly one number:
- a measured plain single-stream rate fits the engine's kernel overhead (the fixed per-step cost);
- a measured EAGLE single-stream rate with its acceptance fits a per-cycle extra (``spec_cycle_extra_s``);
- a published single-stream *speedup* without its acceptance fits the acceptance length instead.
Everything at other batch sizes is then predicted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.cycle import (Deployment, SpeculativeFlags, break_even_accept_length, check_accept_length,
                                       max_accept_length, plain_step, spec_cycle)
from eagle3lab.costmodel.forward import kernel_count
from eagle3lab.costmodel.cycle import verify_tokens


def _solve_increasing(f: Callable[[float], float], target: float, lo: float, hi: float, what: str) -> float:
    """x in [lo, hi] with f(x) == target for a non-decreasing f (bisection to machine precision)."""
    f_lo, f_hi = f(lo), f(hi)
    if target < f_lo:
        raise PerfModelError(f"calibration: {what} is below what the model allows with no overhead at all "
                             f"({target:.6g} < {f_lo:.6g}); check the hardware, tp and context", value=target,
                             problem="below_model_floor")
    if target > f_hi:
        raise PerfModelError(f"calibration: {what} needs more than {hi:.3g} of overhead ({target:.6g} > "
                             f"{f_hi:.6g}); check the measurement and its units", value=target,
                             problem="above_model_ceiling")
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return (lo + hi) / 2


def calibrate_baseline(dep: Deployment, single_stream_tok_s: float, where: str, batch: int = 1) -> Deployment:
    """The deployment whose kernel overhead makes ``batch`` requests (one unless given) decode at the measured
    plain rate (output tokens/s of all of them).

    The kernel overhead is the only fitted number: it stands for every fixed per-step cost the physics does not
    count (launch gaps, small kernels, synchronisation), spread over the kernels a pass launches.
    """
    if not single_stream_tok_s > 0 or batch < 1:
        raise PerfModelError(f"calibration: the measured plain rate must be > 0 tok/s at batch >= 1, got "
                             f"{single_stream_tok_s!r} at batch {batch!r}", parameter="single_stream_tok_s",
                             value=single_stream_tok_s, problem="not_positive")
    step = batch / single_stream_tok_s

    def step_with(overhead: float) -> float:
        return plain_step(_with_engine(dep, kernel_overhead_s=overhead), batch).total_s

    per_kernel_cap = step / max(1, kernel_count(dep.target, dep.engine))
    overhead = _solve_increasing(step_with, step, 0.0, per_kernel_cap * 1.0001, "the measured step time")
    what = "single-stream" if batch == 1 else f"at batch {batch}"
    return _with_engine(dep, source=f"calibrated: plain {what} {single_stream_tok_s:.6g} tok/s ({where})",
                        kernel_overhead_s=overhead)


def calibrate_spec_extra(dep: Deployment, spec: SpeculativeFlags, accept_length: float, spec_single_stream_tok_s: float,
                         where: str) -> Deployment:
    """The deployment whose per-cycle extra makes one request decode at the measured EAGLE rate."""
    check_accept_length(accept_length, spec)
    cycle = accept_length / spec_single_stream_tok_s
    base = spec_cycle(_with_engine(dep, spec_cycle_extra_s=0.0), spec, 1).total_s
    if cycle < base:
        raise PerfModelError(f"calibration: the measured EAGLE single-stream cycle ({cycle * 1e3:.3f} ms) is shorter "
                             f"than the model's ({base * 1e3:.3f} ms) before any extra; the physics overestimates "
                             f"the cycle for {where}", parameter="spec_single_stream_tok_s",
                             value=spec_single_stream_tok_s, problem="cycle_shorter_than_model")
    return _with_engine(dep, source=f"calibrated: EAGLE single-stream {spec_single_stream_tok_s:.6g} tok/s at "
                                    f"acceptance {accept_length:g} ({where})", spec_cycle_extra_s=cycle - base)


def calibrate_accept_length(dep: Deployment, spec: SpeculativeFlags, single_stream_speedup: float) -> float:
    """The acceptance length that reproduces a published single-stream speedup (speedup is linear in it)."""
    if not single_stream_speedup > 0:
        raise PerfModelError(f"calibration: speedup must be > 0, got {single_stream_speedup!r}",
                             parameter="single_stream_speedup", value=single_stream_speedup, problem="not_positive")
    accept = single_stream_speedup * break_even_accept_length(dep, spec, 1)
    top = max_accept_length(spec)
    if not 1.0 <= accept <= top:
        raise PerfModelError(f"calibration: a single-stream speedup of {single_stream_speedup:g} needs acceptance "
                             f"{accept:.3f}, outside [1, {top}]: the model's cycle cost is off for this deployment",
                             parameter="single_stream_speedup", value=single_stream_speedup,
                             problem="acceptance_out_of_range")
    return accept


def _with_engine(dep: Deployment, source: str = "", **changes: float) -> Deployment:
    from dataclasses import replace

    return replace(dep, engine=dep.engine.with_(source or "set for calibration", **changes))


# ------------------------------------------------------------------------------------------------- prediction
@dataclass(frozen=True)
class PredictedPoint:
    """One batch size: plain and EAGLE-3 output tokens/s, their ratio, and the acceptance that breaks even."""

    batch: int
    baseline_tok_s: float
    eagle3_tok_s: float
    speedup: float
    break_even_accept_length: float


@dataclass(frozen=True)
class Prediction:
    """What the model predicts for one deployment and flag set; JSON-ready through ``to_dict``."""

    model: str
    hardware: str
    tp: int
    engine: str
    context: float
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    accept_length: float
    max_accept_length: int
    kernel_overhead_s: float
    calibration: str
    points: tuple[PredictedPoint, ...]
    notes: tuple[str, ...] = field(default=())
    understood: tuple[str, ...] = field(default=())  # what the inputs were read as (costmodel.understood)

    @property
    def break_even_single_stream(self) -> float:
        return break_even_of(self.points, 1)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["points"] = [asdict(p) for p in self.points]
        data["notes"] = list(self.notes)
        data["understood"] = list(self.understood)
        return data


def break_even_of(points: Sequence[PredictedPoint], batch: int) -> float:
    for p in points:
        if p.batch == batch:
            return p.break_even_accept_length
    raise PerfModelError(f"no predicted point at batch {batch}")


def predict(dep: Deployment, spec: SpeculativeFlags, accept_length: float, batches: Sequence[int],
            calibration: str = "none: default engine constants") -> Prediction:
    """Plain and EAGLE-3 throughput, speedup and break-even acceptance at each batch size."""
    check_accept_length(accept_length, spec)
    if not batches or any(int(b) != b or b < 1 for b in batches):
        raise PerfModelError(f"batch sizes must be integers >= 1, got {list(batches)}", parameter="batches",
                             value=list(batches))
    points = []
    for b in sorted(set(int(x) for x in batches)):
        step, cycle = plain_step(dep, b), spec_cycle(dep, spec, b)
        base = b / step.total_s
        eagle = b * accept_length / cycle.total_s
        points.append(PredictedPoint(b, base, eagle, eagle / base, cycle.total_s / step.total_s))

    notes = []
    if spec.eagle_topk == 1 and spec.num_draft_tokens != spec.num_steps + 1:
        notes.append(f"topk 1: sglang verifies num_steps + 1 = {spec.num_steps + 1} tokens per request, not the "
                     f"{spec.num_draft_tokens} given (server_args.py adjusts --speculative-num-draft-tokens)")
    cap = dep.engine.spec_max_running_requests
    if cap and max(batches) > cap:
        notes.append(f"{dep.engine.name} caps running requests at {cap} under speculation unless "
                     "--max-running-requests is set; points above it assume the cap was raised")
    return Prediction(model=dep.target.name, hardware=dep.hardware.name, tp=dep.tp, engine=dep.engine.name,
                      context=dep.context, num_steps=spec.num_steps, eagle_topk=spec.eagle_topk,
                      num_draft_tokens=verify_tokens(spec), accept_length=accept_length,
                      max_accept_length=max_accept_length(spec), kernel_overhead_s=dep.engine.kernel_overhead_s,
                      calibration=calibration, points=tuple(points), notes=tuple(notes))
