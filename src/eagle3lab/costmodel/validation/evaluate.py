"""The cost model run on each published series, calibrated only as its source allows, point by point against the
published speedups (``validate``).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, Optional, Union
from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import DRAFTERS
from eagle3lab.costmodel.cycle import Deployment, plain_step, spec_cycle
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.predict import calibrate_accept_length, calibrate_baseline, calibrate_spec_extra
from eagle3lab.costmodel.presets import hardware_preset, stored_model, speculative_flags
from eagle3lab.costmodel.validation import schema
from eagle3lab.costmodel.validation.schema import (CALIBRATION_AT_BOUND, CalibrateFrom, Dataset,
                                                   FIRST_BATCH_CALIBRATION, Frozen, PUBLISHED, SHAPE_ONLY, SPLITS,
                                                   Series, Source, TREND_TOLERANCE, load_dataset)


@dataclass(frozen=True)
class ValidationPoint:
    source: str
    series: str
    batch: int
    effective_batch: int
    published_speedup: float
    predicted_speedup: float
    error_pct: float  # (predicted - published) / published * 100
    role: str  # "calibration" (fitted at this point) or "predicted"
    accept_length: float
    published_baseline_tok_s: Optional[float] = None
    predicted_baseline_tok_s: Optional[float] = None
    split: str = "development"
    acceptance: str = PUBLISHED
    num_steps: int = 0
    naive_flat_speedup: Optional[float] = None  # the series' published single-stream speedup (batch > 1 only)
    naive_free_cycle_speedup: Optional[float] = None  # the published acceptance length (a cycle = one plain step)


@dataclass(frozen=True)
class SeriesResult:
    source: str
    series: str
    calibration: str
    points: tuple[ValidationPoint, ...]
    baseline_points: tuple[ValidationPoint, ...]
    published_trend: str
    predicted_trend: str
    split: str = "development"
    acceptance: str = PUBLISHED

    @property
    def trend_right(self) -> bool:
        return self.published_trend == self.predicted_trend

    @property
    def trend_steps(self) -> list[dict[str, Any]]:
        """Each step from one batch size to the next: published and predicted direction, and whether they agree."""
        return trend_steps([p.batch for p in self.points], [p.published_speedup for p in self.points],
                           [p.predicted_speedup for p in self.points])


@dataclass(frozen=True)
class SourceResult:
    source: str
    title: str
    url: str
    series: tuple[SeriesResult, ...]
    split: str = "development"
    capped_running_requests: Optional[str] = None

    @property
    def predicted_points(self) -> list[ValidationPoint]:
        return [p for s in self.series for p in s.points if p.role == "predicted"]

    @property
    def mape_pct(self) -> float:
        """Mean absolute percentage error of the predicted (not calibrated) speedups."""
        return statistics.fmean(abs(p.error_pct) for p in self.predicted_points)

    @property
    def max_abs_error_pct(self) -> float:
        return max(abs(p.error_pct) for p in self.predicted_points)

    @property
    def trends_right(self) -> int:
        return sum(s.trend_right for s in self.series)

    @property
    def goal_met(self) -> bool:
        """MAPE <= the target and every multi-point trend right: reported, never a CI gate."""
        multi = [s for s in self.series if len(s.points) > 1]
        return self.mape_pct <= schema.GOAL_MAPE_PCT and all(s.trend_right for s in multi)


def trend(batches: list[int], values: list[float], tolerance: float = TREND_TOLERANCE) -> str:
    """'rises', 'falls' or 'flat': the relative change from the smallest to the largest batch, beyond tolerance;
    'single point' for a series of one point."""
    if len(values) < 1:
        raise PerfModelError("trend: need at least one point")
    if len(values) == 1:
        return "single point"
    change = (values[-1] - values[0]) / values[0]
    return "rises" if change > tolerance else "falls" if change < -tolerance else "flat"


def _direction(a: float, b: float, tolerance: float) -> str:
    change = (b - a) / a
    return "rises" if change > tolerance else "falls" if change < -tolerance else "flat"


def trend_steps(xs: list[float], published: list[float], predicted: list[float],
                tolerance: float = TREND_TOLERANCE) -> list[dict[str, Any]]:
    """Point by point: for each consecutive pair, the published and predicted direction and whether they agree."""
    return [{"from": xs[i], "to": xs[i + 1], "published": _direction(published[i], published[i + 1], tolerance),
             "predicted": _direction(predicted[i], predicted[i + 1], tolerance),
             "right": _direction(published[i], published[i + 1], tolerance)
             == _direction(predicted[i], predicted[i + 1], tolerance)} for i in range(len(xs) - 1)]


def series_deployment(source: Source, series: Series, context: float, frozen: Optional[Frozen]) -> Deployment:

    target = stored_model(series.model)
    return Deployment(target, DRAFTERS[series.drafter_kind](target), hardware_preset(source.hardware), series.tp,
                      frozen_engine(series.engine, frozen), series.context or context)


def frozen_engine(name: str, frozen: Optional[Frozen]):
    """The engine preset with the frozen orchestration constants of the protocol applied (if any for it)."""
    engine = engine_preset(name)
    values = ((frozen.engines.get(name) or frozen.engines.get(frozen.shared_with.get(name, ""))) if frozen
              else None) or {}
    if frozen is None or not values:
        return engine
    return engine.with_(f"fitted on development sources {', '.join(frozen.fitted_on)}, frozen {frozen.date} "
                        "(costmodel.validation.fit_orchestration)", **values)


def _spec(series: Series):

    f = series.flags
    return speculative_flags(f.num_steps, f.eagle_topk, f.num_draft_tokens)


def calibrate_deployment(source: Source, series: Series, dep: Deployment, done: dict[str, tuple[Deployment, Optional[float]]],
               how: Union[str, CalibrateFrom]) -> tuple[Deployment, Optional[float], str, bool]:
    """(deployment, calibrated acceptance or None, description, whether batch 1 was fitted)."""
    spec, where = _spec(series), f"{source.id}/{series.id}"
    s1 = series.published_speedups[0]
    if isinstance(how, CalibrateFrom):
        if how.from_series not in done:
            raise PerfModelError(f"{where}: calibrate.from_series '{how.from_series}' must be an earlier series of "
                                 "the same source")
        base, _ = done[how.from_series]
        dep = replace(dep, engine=base.engine)
        text = f"engine constants calibrated on {how.from_series}"
        if how.then is None:
            return dep, None, text, False
        dep2, accept, more, _ = calibrate_deployment(source, series, dep, done, how.then)
        return dep2, accept, f"{text}; {more}", True
    if how == "none":
        return dep, None, "nothing fitted to this series (engine constants as stated or frozen)", False
    if how == FIRST_BATCH_CALIBRATION:
        if series.baseline_tok_s is None:
            raise PerfModelError(f"{where}: {FIRST_BATCH_CALIBRATION} needs the published plain rates")
        batch = min(series.batches[0], series.max_concurrency or series.batches[0])
        try:
            dep = calibrate_baseline(dep, series.baseline_tok_s[0], where, batch=batch)
        except PerfModelError as exc:
            if exc.problem != "below_model_floor":
                raise
            # the published plain rate is faster than the model's physics allows with no launch overhead at all:
            # the constrained fit is the bound (overhead 0); said in the series' calibration text, never hidden
            dep = replace(dep, engine=dep.engine.with_(f"{CALIBRATION_AT_BOUND} ({where})", kernel_overhead_s=0.0))
            return dep, None, (f"{CALIBRATION_AT_BOUND}: the published plain rate at batch {batch} is faster than the "
                               "model's plain step with no kernel overhead, so the overhead is held at 0 (nothing "
                               "from the EAGLE arm)"), False
        return dep, None, (f"kernel overhead {dep.engine.kernel_overhead_s * 1e6:.2f} us fitted to the published plain "
                           f"rate at batch {batch} (nothing from the EAGLE arm)"), False
    if how == "baseline_single_stream":
        if series.baseline_tok_s is None:
            raise PerfModelError(f"{where}: baseline_single_stream needs the published plain rates")
        dep = calibrate_baseline(dep, series.baseline_tok_s[0], where)
        return dep, None, (f"kernel overhead {dep.engine.kernel_overhead_s * 1e6:.2f} us fitted to the published plain "
                           "single-stream rate (nothing from the EAGLE arm)"), False
    if how == "accept_length_from_single_stream_speedup":
        if series.accept_length is not None:
            raise PerfModelError(f"{where}: the source publishes the acceptance length; it must not be fitted",
                                 parameter="accept_length", problem="published_value_fitted")
        accept = calibrate_accept_length(dep, spec, s1)
        return dep, accept, (f"{SHAPE_ONLY}: acceptance {accept:.3f} fitted to the published single-stream speedup "
                             f"{s1:g}"), True
    if how == "spec_extra_from_single_stream_speedup":
        accept = series.accept_at(0)
        if accept is None:
            raise PerfModelError(f"{where}: spec_extra calibration needs the published accept_length")
        step, cycle = plain_step(dep, 1).total_s, spec_cycle(dep, spec, 1).total_s
        extra = accept * step / s1 - cycle
        if extra < 0:
            raise PerfModelError(f"{where}: the model's cycle is already slower than the published single-stream "
                                 f"speedup allows ({-extra * 1e3:.2f} ms too slow)")
        dep = replace(dep, engine=dep.engine.with_(f"calibrated on {where} batch 1", spec_cycle_extra_s=extra))
        return dep, None, f"per-cycle extra {extra * 1e3:.2f} ms fitted to the single-stream speedup {s1:g}", True
    if how == "baseline_and_spec_single_stream":
        if series.baseline_tok_s is None or series.eagle3_tok_s is None or series.accept_at(0) is None:
            raise PerfModelError(f"{where}: baseline_and_spec_single_stream needs both rates and the acceptance")
        dep = calibrate_baseline(dep, series.baseline_tok_s[0], where)
        accept0 = float(series.accept_at(0))  # type: ignore[arg-type]
        dep = calibrate_spec_extra(dep, spec, accept0, series.eagle3_tok_s[0], where)
        return dep, None, (f"kernel overhead {dep.engine.kernel_overhead_s * 1e6:.2f} us fitted to the plain "
                           f"single-stream rate, per-cycle extra {dep.engine.spec_cycle_extra_s * 1e3:.2f} ms to the "
                           "EAGLE single-stream rate"), True
    raise PerfModelError(f"{where}: unknown calibration {how!r}")


def _series_result(source: Source, series: Series, context: float,
                   done: dict[str, tuple[Deployment, Optional[float]]], frozen: Optional[Frozen]) -> SeriesResult:
    spec = _spec(series)
    dep = series_deployment(source, series, context, frozen)
    dep, fitted_accept, how, fitted_first = calibrate_deployment(source, series, dep, done, series.calibrate)
    done[series.id] = (dep, fitted_accept)
    published = series.published_speedups
    points, baseline_points = [], []
    for i, batch in enumerate(series.batches):
        eff = min(batch, series.max_concurrency or batch)
        accept = fitted_accept if fitted_accept is not None else series.accept_at(i)
        if accept is None:
            raise PerfModelError(f"{source.id}/{series.id}: no acceptance length at batch {batch}")
        step, cycle = plain_step(dep, eff), spec_cycle(dep, spec, eff)
        predicted = accept * step.total_s / cycle.total_s
        role = "calibration" if i == 0 and fitted_first else "predicted"
        pub_base = series.baseline_tok_s[i] if series.baseline_tok_s else None
        points.append(ValidationPoint(
            source.id, series.id, batch, eff, published[i], predicted,
            (predicted - published[i]) / published[i] * 100, role, accept, pub_base,
            step.tok_s if pub_base is not None else None, source.split, series.acceptance_kind,
            series.flags.num_steps, published[0] if i > 0 else None,
            series.accept_at(i) if series.accept_length is not None else None))
    if series.baseline_only:
        extra = series.baseline_only
        for batch, rate in zip(extra.batches, extra.baseline_tok_s):
            eff = min(batch, series.max_concurrency or batch)
            pred = plain_step(dep, eff).tok_s
            baseline_points.append(ValidationPoint(source.id, series.id, batch, eff, float("nan"), float("nan"),
                                                   float("nan"), "baseline only", float("nan"), rate, pred,
                                                   source.split, series.acceptance_kind))
    return SeriesResult(source.id, series.id, how, tuple(points), tuple(baseline_points),
                        trend(series.batches, published), trend(series.batches, [p.predicted_speedup for p in points]),
                        source.split, series.acceptance_kind)


def validate(dataset: Optional[Dataset] = None, context: Optional[float] = None,
             splits: tuple[str, ...] = SPLITS, frozen: Optional[Frozen] = None) -> list[SourceResult]:
    """Every source of the chosen splits, each with the constants its split is evaluated with
    (``Protocol.constants_for``), or ``frozen`` for all if given. ``context``
    overrides the dataset's default context assumption (for the sensitivity check)."""
    data = dataset or load_dataset()
    results = []
    for source in data.sources:
        if source.split not in splits:
            continue
        constants = frozen if frozen is not None else (data.protocol.constants_for(source.split) if data.protocol
                                                       else None)
        done: dict[str, tuple[Deployment, Optional[float]]] = {}
        series = tuple(_series_result(source, s, context or data.default_context, done, constants)
                       for s in source.series)
        results.append(SourceResult(source.id, source.title, source.url, series, source.split,
                                    source.capped_running_requests))
    return results
