"""The only fitted constants: the engine's orchestration per cycle, per draft step and per TP rank, fitted by
non-negative least squares on development points with published acceptance.
"""

from __future__ import annotations

import itertools
import numpy as np
from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.cycle import plain_step
from eagle3lab.costmodel.engine import ORCHESTRATION
from eagle3lab.costmodel.validation.schema import Dataset, Frozen, PUBLISHED, Series
from eagle3lab.costmodel.validation.evaluate import ValidationPoint, calibrate_deployment, series_deployment, validate


ORCHESTRATION_FIELDS = ORCHESTRATION  # per cycle, per draft step, per cycle per TP rank beyond the first


FIRST_FREEZE_FIELDS = ("spec_cycle_extra_s", "spec_step_extra_s")  # what the first freeze fitted


def development_only(data: Dataset) -> Dataset:
    """The dataset with its held-out sources removed: the only thing fitting may read."""
    return data.model_copy(update={"sources": [s for s in data.sources if s.split == "development"]})


def fit_orchestration(data: Dataset, engine: str = "sglang-0.5",
                      fields: tuple[str, ...] = ORCHESTRATION_FIELDS) -> dict[str, float]:
    """Orchestration for ``engine`` (the ``fields`` among per cycle, per draft step and per cycle per TP rank
    beyond the first), fitted on development points whose acceptance length is published: the cycle each such
    point implies (acceptance x plain step / published speedup) minus the model's cycle without orchestration,
    regressed on [1, num_steps, tp - 1] by non-negative least squares on the relative error. Refuses a dataset that
    still holds held-out sources, so no held-out number can leak into a constant."""
    unknown = set(fields) - set(ORCHESTRATION_FIELDS)
    if unknown or not fields:
        raise PerfModelError(f"fit_orchestration: fields must be among {ORCHESTRATION_FIELDS}, got {fields}")
    held = [s.id for s in data.sources if s.split != "development"]
    if held:
        raise PerfModelError(f"fit_orchestration: held-out sources {held} must not be read when fitting; pass "
                             "development_only(dataset)", value=held, problem="held_out_read")
    zero = Frozen(date="fit", fitted_on=[], what="fit", engines={engine: {k: 0.0 for k in ORCHESTRATION_FIELDS}})
    rows: list[list[float]] = []
    needs: list[float] = []
    for src in validate(data, splits=("development",), frozen=zero):
        for s in src.series:
            if s.acceptance != PUBLISHED:
                continue
            for p in s.points:
                series = next(x for x in next(d for d in data.sources if d.id == src.source).series
                              if x.id == p.series)
                if series.engine != engine:
                    continue
                # the model's speedup is accept * step / cycle; the published one implies cycle * predicted/published
                cycle_model = p.accept_length / p.predicted_speedup  # in plain steps
                cycle_needed = p.accept_length / p.published_speedup
                step_s = _step_seconds(data, src.source, series, p)
                per = {"spec_cycle_extra_s": 1.0, "spec_step_extra_s": float(p.num_steps),
                       "spec_tp_extra_s": float(series.tp - 1)}
                rows.append([per[k] / (cycle_needed * step_s) for k in fields])
                needs.append((cycle_needed - cycle_model) / cycle_needed)
    if not rows:
        return {k: 0.0 for k in fields}
    return dict(zip(fields, _nnls(rows, needs)))


def _step_seconds(data: Dataset, source_id: str, series: Series, p: ValidationPoint) -> float:
    """The plain step (s) the model uses at this point, under the same calibration as in ``validate``."""
    source = next(s for s in data.sources if s.id == source_id)
    zero = Frozen(date="fit", fitted_on=[], what="fit", engines={})
    dep = series_deployment(source, series, series.context or data.default_context, zero)
    dep, _, _, _ = calibrate_deployment(source, series, dep, {}, series.calibrate if isinstance(series.calibrate, str)
                              else "none")
    return plain_step(dep, p.effective_batch).total_s


def _nnls(rows: list[list[float]], y: list[float]) -> tuple[float, ...]:
    """argmin ||A x - y|| over x >= 0 for a few columns, exactly: the best least-squares fit over every subset of
    columns whose unconstrained solution is non-negative (the others held at 0). All-zero columns stay 0."""
    a, b = np.asarray(rows, dtype=float), np.asarray(y, dtype=float)
    n = a.shape[1]
    best, best_err = np.zeros(n), float(np.sum(b ** 2))
    for subset in itertools.chain.from_iterable(itertools.combinations(range(n), k) for k in range(1, n + 1)):
        cols = list(subset)
        if any(not np.any(a[:, c]) for c in cols):
            continue
        x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if (x < 0).any():
            continue
        cand = np.zeros(n)
        cand[cols] = x
        err = float(np.sum((a @ cand - b) ** 2))
        if err < best_err - 1e-15:
            best, best_err = cand, err
    return tuple(float(v) for v in best)
