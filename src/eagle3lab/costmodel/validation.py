"""The cost model against published speedup-versus-batch measurements it was not fitted to.

Each series of ``data/spec_validation.yaml`` is calibrated on its single-stream point only, in the way its source
allows (``calibrate``), and every other point is predicted. Per source: predicted vs published speedup, the mean
absolute percentage error over predicted points (MAPE), and whether the trend with batch size is right.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import DRAFTERS
from eagle3lab.costmodel.cycle import Deployment, plain_step, spec_cycle
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.predict import calibrate_accept_length, calibrate_baseline, calibrate_spec_extra
from eagle3lab.costmodel.presets import hardware_preset, stored_model, speculative_flags

DATASET = Path(__file__).resolve().parent / "data" / "spec_validation.yaml"
GOAL_MAPE_PCT = 15.0  # issue 9: MAPE <= 15% and the right trend on each source
TREND_TOLERANCE = 0.05  # a speedup that moves less than 5% from the smallest to the largest batch is "flat"
CALIBRATIONS = ("accept_length_from_single_stream_speedup", "spec_extra_from_single_stream_speedup",
                "baseline_and_spec_single_stream")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Flags(_Strict):
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int


class BaselineOnly(_Strict):
    batches: list[int]
    baseline_tok_s: list[float]


class CalibrateFrom(_Strict):
    from_series: str
    then: Optional[str] = None


class Series(_Strict):
    id: str
    figure: Optional[str] = None
    table: Optional[str] = None
    engine: str
    model: str
    drafter: str
    drafter_kind: Literal["eagle3", "eagle1"] = "eagle3"
    tp: int
    flags: Flags
    batches: list[int]
    speedup: Optional[list[float]] = None
    baseline_tok_s: Optional[list[float]] = None
    eagle3_tok_s: Optional[list[float]] = None
    accept_length: Union[float, list[float], None] = None
    calibrate: Union[str, CalibrateFrom]
    max_concurrency: Optional[int] = None
    context: Optional[float] = None
    baseline_only: Optional[BaselineOnly] = None

    @model_validator(mode="after")
    def _consistent(self) -> "Series":
        n = len(self.batches)
        if self.batches != sorted(self.batches) or not n or self.batches[0] != 1:
            raise ValueError(f"series {self.id}: batches must be increasing and start at 1 (the calibration point)")
        rates = self.baseline_tok_s is not None and self.eagle3_tok_s is not None
        if (self.speedup is None) == (not rates):
            raise ValueError(f"series {self.id}: give either speedup or both baseline_tok_s and eagle3_tok_s")
        for name in ("speedup", "baseline_tok_s", "eagle3_tok_s"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"series {self.id}: {name} has {len(values)} values for {n} batches")
        if isinstance(self.accept_length, list) and len(self.accept_length) != n:
            raise ValueError(f"series {self.id}: accept_length has {len(self.accept_length)} values for {n} batches")
        if isinstance(self.calibrate, str) and self.calibrate not in CALIBRATIONS:
            raise ValueError(f"series {self.id}: calibrate must be one of {CALIBRATIONS} or {{from_series: ...}}")
        return self

    @property
    def published_speedups(self) -> list[float]:
        if self.speedup is not None:
            return list(self.speedup)
        return [e / b for e, b in zip(self.eagle3_tok_s, self.baseline_tok_s)]  # type: ignore[arg-type]

    def accept_at(self, i: int) -> Optional[float]:
        if isinstance(self.accept_length, list):
            return self.accept_length[i]
        return self.accept_length


class Source(_Strict):
    id: str
    title: str
    authors: str
    url: str
    companion: Optional[str] = None
    date: str
    hardware: str
    notes: str
    read_off_figure: Optional[str] = None
    series: list[Series]


class Dataset(_Strict):
    default_context: float
    default_context_source: str
    sources: list[Source]


def load_dataset(path: Path = DATASET) -> Dataset:
    """The published measurements, checked against the schema (one clear line if malformed)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Dataset.model_validate(raw)
    except OSError as exc:
        raise PerfModelError(f"cannot read validation dataset {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise PerfModelError(f"validation dataset {path} is not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PerfModelError(f"validation dataset {path}: {where}: {first['msg']}") from None


# ------------------------------------------------------------------------------------------------ computing
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


@dataclass(frozen=True)
class SeriesResult:
    source: str
    series: str
    calibration: str
    points: tuple[ValidationPoint, ...]
    baseline_points: tuple[ValidationPoint, ...]
    published_trend: str
    predicted_trend: str

    @property
    def trend_right(self) -> bool:
        return self.published_trend == self.predicted_trend


@dataclass(frozen=True)
class SourceResult:
    source: str
    title: str
    url: str
    series: tuple[SeriesResult, ...]

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
        return self.mape_pct <= GOAL_MAPE_PCT and self.trends_right == len(self.series)


def trend(batches: list[int], values: list[float], tolerance: float = TREND_TOLERANCE) -> str:
    """'rises', 'falls' or 'flat': the relative change from the smallest to the largest batch, beyond tolerance."""
    if len(values) < 2:
        raise PerfModelError("trend: need at least two points")
    change = (values[-1] - values[0]) / values[0]
    return "rises" if change > tolerance else "falls" if change < -tolerance else "flat"


def _deployment(source: Source, series: Series, context: float) -> Deployment:

    target = stored_model(series.model)
    return Deployment(target, DRAFTERS[series.drafter_kind](target), hardware_preset(source.hardware), series.tp,
                      engine_preset(series.engine), series.context or context)


def _spec(series: Series):

    f = series.flags
    return speculative_flags(f.num_steps, f.eagle_topk, f.num_draft_tokens)


def _calibrate(source: Source, series: Series, dep: Deployment, done: dict[str, tuple[Deployment, Optional[float]]],
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
        dep2, accept, more, _ = _calibrate(source, series, dep, done, how.then)
        return dep2, accept, f"{text}; {more}", True
    if how == "accept_length_from_single_stream_speedup":
        accept = calibrate_accept_length(dep, spec, s1)
        return dep, accept, f"acceptance {accept:.3f} fitted to the published single-stream speedup {s1:g}", True
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
        dep = calibrate_spec_extra(dep, spec, series.accept_at(0), series.eagle3_tok_s[0], where)  # type: ignore[arg-type]
        return dep, None, (f"kernel overhead {dep.engine.kernel_overhead_s * 1e6:.2f} us fitted to the plain "
                           f"single-stream rate, per-cycle extra {dep.engine.spec_cycle_extra_s * 1e3:.2f} ms to the "
                           "EAGLE single-stream rate"), True
    raise PerfModelError(f"{where}: unknown calibration {how!r}")


def _series_result(source: Source, series: Series, context: float,
                   done: dict[str, tuple[Deployment, Optional[float]]]) -> SeriesResult:
    spec = _spec(series)
    dep = _deployment(source, series, context)
    dep, fitted_accept, how, fitted_first = _calibrate(source, series, dep, done, series.calibrate)
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
        points.append(ValidationPoint(source.id, series.id, batch, eff, published[i], predicted,
                                      (predicted - published[i]) / published[i] * 100, role, accept, pub_base,
                                      step.tok_s if pub_base is not None else None))
    if series.baseline_only:
        extra = series.baseline_only
        for batch, rate in zip(extra.batches, extra.baseline_tok_s):
            eff = min(batch, series.max_concurrency or batch)
            pred = plain_step(dep, eff).tok_s
            baseline_points.append(ValidationPoint(source.id, series.id, batch, eff, float("nan"), float("nan"),
                                                   float("nan"), "baseline only", float("nan"), rate, pred))
    return SeriesResult(source.id, series.id, how, tuple(points), tuple(baseline_points),
                        trend(series.batches, published), trend(series.batches, [p.predicted_speedup for p in points]))


def validate(dataset: Optional[Dataset] = None, context: Optional[float] = None) -> list[SourceResult]:
    """Every source of the dataset: calibrated at single stream, predicted elsewhere. ``context`` overrides the
    dataset's default context assumption (for the sensitivity check)."""
    data = dataset or load_dataset()
    results = []
    for source in data.sources:
        done: dict[str, tuple[Deployment, Optional[float]]] = {}
        series = tuple(_series_result(source, s, context or data.default_context, done) for s in source.series)
        results.append(SourceResult(source.id, source.title, source.url, series))
    return results


# ------------------------------------------------------------------------------------------------ tables
def validation_points(results: list[SourceResult]) -> list[dict[str, Any]]:
    """One row per published point: published vs predicted speedup, error, and whether it was fitted."""
    rows = []
    for src in results:
        for s in src.series:
            for p in s.points:
                row = asdict(p)
                rows.append({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    return rows


def validation_summary(results: list[SourceResult]) -> list[dict[str, Any]]:
    """One row per source: MAPE over predicted points, the largest error, trends right, and whether the goal holds."""
    return [{"source": r.source, "title": r.title, "url": r.url, "series": len(r.series),
             "predicted_points": len(r.predicted_points), "mape_pct": round(r.mape_pct, 2),
             "max_abs_error_pct": round(r.max_abs_error_pct, 2),
             "trends_right": f"{r.trends_right}/{len(r.series)}",
             "goal": f"MAPE <= {GOAL_MAPE_PCT:g}% and every trend right", "goal_met": r.goal_met}
            for r in results]


def trend_table(results: list[SourceResult]) -> list[dict[str, Any]]:
    return [{"source": s.source, "series": s.series, "published": s.published_trend, "predicted": s.predicted_trend,
             "right": s.trend_right, "calibration": s.calibration} for r in results for s in r.series]


def context_sensitivity(contexts: tuple[float, ...] = (512, 1024, 2048)) -> list[dict[str, Any]]:
    """MAPE per source under other context assumptions: how much the conclusion rests on that one assumption."""
    rows = []
    for ctx in contexts:
        for r in validate(context=ctx):
            rows.append({"context": ctx, "source": r.source, "mape_pct": round(r.mape_pct, 2),
                         "trends_right": f"{r.trends_right}/{len(r.series)}", "goal_met": r.goal_met})
    return rows
