"""The validation's results as tables and as one report (``validation_report``): each group's MAPE with its role
(out of sample, fit quality, shape only) beside the naive baselines, the frozen constants, the split's conditions.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict
from typing import Any, Mapping, Optional
from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.arch import DRAFTERS
from eagle3lab.costmodel.cycle import Deployment, spec_cycle
from eagle3lab.costmodel.presets import hardware_preset, stored_model, speculative_flags
from eagle3lab.costmodel.validation import schema
from eagle3lab.costmodel.validation.schema import (Dataset, Frozen, HELD_OUT_SETS, PUBLISHED, SHAPE_ONLY, SPLITS,
                                                   load_dataset)
from eagle3lab.costmodel.validation.evaluate import (SeriesResult, SourceResult, ValidationPoint, frozen_engine,
                                                     trend_steps, validate)
from eagle3lab.costmodel.validation.fit import development_only, fit_orchestration


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
    """One row per source: its split, MAPE over predicted points beside the naive baselines, the largest error,
    trends right (point by point), whether it capped running requests, and whether the target holds (reported,
    never gated)."""
    rows = []
    for r in results:
        steps = [t for s in r.series for t in s.trend_steps]
        rows.append({"source": r.source, "title": r.title, "url": r.url, "split": r.split,
                     "capped_running_requests": r.capped_running_requests, "series": len(r.series),
                     "shape_only_series": sum(s.acceptance == SHAPE_ONLY for s in r.series),
                     "predicted_points": len(r.predicted_points), "mape_pct": round(r.mape_pct, 2),
                     "naive_flat": _naive(r.predicted_points, "naive_flat_speedup"),
                     "naive_free_cycle": _naive(r.predicted_points, "naive_free_cycle_speedup"),
                     "max_abs_error_pct": round(r.max_abs_error_pct, 2),
                     "trends_right": f"{r.trends_right}/{len(r.series)}",
                     "trend_steps_right": f"{sum(t['right'] for t in steps)}/{len(steps)}",
                     "goal": f"MAPE <= {schema.GOAL_MAPE_PCT:g}% and every trend right", "goal_met": r.goal_met})
    return rows


def _mape(points: list[ValidationPoint]) -> Optional[float]:
    return round(statistics.fmean(abs(p.error_pct) for p in points), 2) if points else None


def _naive(points: list[ValidationPoint], field: str) -> Optional[dict[str, Any]]:
    """MAPE of a naive prediction over the points where it is defined, with how many those are."""
    errors = [abs(getattr(p, field) - p.published_speedup) / p.published_speedup * 100 for p in points
              if getattr(p, field) is not None]
    return {"points": len(errors), "mape_pct": round(statistics.fmean(errors), 2)} if errors else None


NAIVE_BASELINES = {
    "naive_flat": "the speedup stays at its single-stream value (defined at batch > 1 of a series whose batch 1 is "
                  "published)",
    "naive_free_cycle": "the speedup equals the published acceptance length: one cycle costs one plain step "
                        "(defined where the acceptance is published)",
}


OUT_OF_SAMPLE = "out of sample"


OUT_OF_SAMPLE_2 = "out of sample (second set)"


OUT_OF_SAMPLE_3 = "out of sample (third set)"


OUT_OF_SAMPLE_ROLES = {"held_out": OUT_OF_SAMPLE, "held_out_2": OUT_OF_SAMPLE_2, "held_out_3": OUT_OF_SAMPLE_3}


FIT_QUALITY = "fit quality, in sample"


FIT_QUALITY_FIRST = "fit quality, in sample (first-freeze constants, superseded)"


SHAPE_ONLY_ROLE = "fit quality / shape only"


def group_role(split: str, acceptance: str) -> str:
    """What a group's MAPE means: only held-out points with published acceptance are a validation (out of sample;
    each later held-out set is its own validation, never merged into another); development points measure fit
    quality; fitted-acceptance points test only the shape against batch size."""
    if acceptance == SHAPE_ONLY:
        return SHAPE_ONLY_ROLE
    return OUT_OF_SAMPLE_ROLES.get(split, FIT_QUALITY)


def _group(name: str, points: list[ValidationPoint], series: list[SeriesResult], split: str,
           acceptance: str) -> dict[str, Any]:
    steps = [t for s in series for t in s.trend_steps]
    return {"group": name, "split": split, "acceptance": acceptance, "role": group_role(split, acceptance),
            "points": len(points), "mape_pct": _mape(points),
            "naive_flat": _naive(points, "naive_flat_speedup"),
            "naive_free_cycle": _naive(points, "naive_free_cycle_speedup"),
            "trend_steps_right": f"{sum(t['right'] for t in steps)}/{len(steps)}"}


def step_sweeps(results: list[SourceResult]) -> list[dict[str, Any]]:
    """Sweeps of draft steps: single-point series of one source that differ only in num_steps (chain drafting),
    ordered by steps, with the published and predicted speedup and the direction of each step."""
    sweeps = []
    for r in results:
        singles = [s for s in r.series if len(s.points) == 1]
        by_key: dict[tuple, list[SeriesResult]] = {}
        for s in singles:
            by_key.setdefault((s.points[0].batch, s.series.rsplit("-k", 1)[0]), []).append(s)
        for (batch, stem), group in by_key.items():
            group = sorted(group, key=lambda s: s.points[0].num_steps)
            if len(group) < 3 or len({s.points[0].num_steps for s in group}) != len(group):
                continue
            pts = [s.points[0] for s in group]
            sweeps.append({"source": r.source, "series": stem, "batch": batch,
                           "num_steps": [p.num_steps for p in pts],
                           "published_speedup": [round(p.published_speedup, 4) for p in pts],
                           "predicted_speedup": [round(p.predicted_speedup, 4) for p in pts],
                           "published_best_steps": max(pts, key=lambda p: p.published_speedup).num_steps,
                           "predicted_best_steps": max(pts, key=lambda p: p.predicted_speedup).num_steps,
                           "steps": trend_steps([p.num_steps for p in pts], [p.published_speedup for p in pts],
                                                [p.predicted_speedup for p in pts])})
    return sweeps


def _public_checks(frozen: Frozen) -> list[dict[str, Any]]:
    """Each public check beside the frozen orchestration per cycle and, where the check states its deployment,
    the host time per cycle the model's spec-v2 preset hides there (computed, not fitted)."""
    rows = []
    for c in frozen.public_checks:
        row = {"url": c.url, "what": c.what, "hidden_host_ms_per_cycle": c.hidden_host_ms_per_cycle,
               "frozen_orchestration_ms_per_cycle":
                   frozen.engines.get("sglang-0.5", {}).get("spec_cycle_extra_s", 0.0) * 1e3,
               "kind": "reported (public source), computed here"}
        if c.model and c.hardware and c.flags:
            spec = speculative_flags(c.flags.num_steps, c.flags.eagle_topk, c.flags.num_draft_tokens)
            target = stored_model(c.model)
            cycles = [spec_cycle(Deployment(target, DRAFTERS["eagle3"](target), hardware_preset(c.hardware), c.tp,
                                            frozen_engine(name, frozen), 1024.0), spec, 1).total_s
                      for name in ("sglang-0.5", "sglang-0.5-spec-v2")]
            row["model_hidden_host_ms_per_cycle"] = (cycles[0] - cycles[1]) * 1e3
        rows.append(row)
    return rows


def _frozen_record(data: Dataset, frozen: Frozen, superseded_by: Optional[str] = None) -> dict[str, Any]:
    """A freeze as the report shows it, with a refit of the development data today by the same fields; a superseded
    freeze is a record (fitted under the model of its day: refitting it under today's model says nothing)."""
    common = {"date": frozen.date, "fitted_on": frozen.fitted_on, "what": frozen.what, "engines": frozen.engines,
              "shared_with": frozen.shared_with, "evaluated_on": frozen.evaluated_on, "superseded_by": superseded_by}
    if superseded_by:
        return {**common, "refit_today": None, "public_checks": [], "refit_matches_frozen": None}
    refit = {engine: fit_orchestration(development_only(data), engine, tuple(values))
             for engine, values in frozen.engines.items()}
    return {**common, "refit_today": refit, "public_checks": _public_checks(frozen),
            "refit_matches_frozen": all(abs(refit[e][k] - v) <= 1e-6 for e in frozen.engines
                                        for k, v in frozen.engines[e].items())}


SEEN_ROLE = "seen: fit quality under the current constants, not a validation"
SET_LABELS = {"development": "development sources", "held_out": "first set", "held_out_2": "second set",
              "held_out_3": "third set"}


def current_report(data: Dataset, frozen: Frozen, current: Mapping[str, Any],
                   sealed: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The protocol as it stands after the third freeze (issue 36): every set of this file is seen, so each is shown
    under the constants the model predicts with now as fit quality; the first three sets' one evaluation each is a
    record (``past_evaluations``: its figure as reported then, its commits, and that sealing does not show it held
    out); the superseded freezes are records; the sealed set's evaluation (``sealed``) is the only validation."""
    protocol = data.protocol
    results = validate(data, frozen=frozen)
    points = [p for r in results for s in r.series for p in s.points if p.role == "predicted"]
    series = [s for r in results for s in r.series]
    groups = []
    for split in SPLITS:
        pts = [p for p in points if p.split == split and p.acceptance == PUBLISHED]
        if pts:
            g = _group(f"{SET_LABELS[split]}, published acceptance (seen; current constants)", pts,
                       [s for s in series if s.split == split and s.acceptance == PUBLISHED], split, PUBLISHED)
            groups.append({**g, "role": SEEN_ROLE})
    shape = [p for p in points if p.acceptance == SHAPE_ONLY]
    if shape:
        groups.append(_group(f"every set, {SHAPE_ONLY}", shape, [s for s in series if s.acceptance == SHAPE_ONLY],
                             "development", SHAPE_ONLY))
    superseded = str(current.get("id") or "the current freeze")
    return {
        "protocol": {"split_recorded": protocol.split_recorded if protocol else None,
                     "development": protocol.development if protocol else [],
                     "held_out": protocol.held_out if protocol else [],
                     "split_rule": protocol.split_rule if protocol else "",
                     "held_out_2": protocol.held_out_2.model_dump() if protocol and protocol.held_out_2 else None,
                     "held_out_3": protocol.held_out_3.model_dump() if protocol and protocol.held_out_3 else None},
        "current": dict(current),
        "frozen": _frozen_record(data, protocol.frozen, superseded) if protocol and protocol.frozen else None,
        "frozen_2": _frozen_record(data, protocol.frozen_2, superseded) if protocol and protocol.frozen_2 else None,
        "past_evaluations": [p.model_dump() for p in data.past_evaluations],
        "sealed": dict(sealed) if sealed else None,
        "groups": groups, "out_of_sample_sets": [],
        "out_of_sample_mape_pct": None, "out_of_sample_points": 0,
        "out_of_sample_2_mape_pct": None, "out_of_sample_2_points": 0,
        "out_of_sample_3_mape_pct": None, "out_of_sample_3_points": 0,
        "target_mape_pct": schema.GOAL_MAPE_PCT, "target_met": False,
        "naive_baselines": NAIVE_BASELINES,
        "shape_only_note": (f"'{SHAPE_ONLY}': the acceptance length of these series is not published and was fitted "
                            "to the single-stream speedup; it absorbs any error of the cycle's cost, so these series "
                            "test only the shape against batch size, and their fitted acceptances are not a real "
                            "drafter's"),
        "sources": validation_summary(results),
        "step_sweeps": step_sweeps(results),
        "kind": "modelled against reported (public sources); every set here is seen: fit quality",
    }


def set_conditions(data: Dataset, split: str) -> dict[str, list]:
    """Where a held-out set's verdict holds: the hardware, TP sizes and batch sizes of its series with published
    acceptance (a MAPE says nothing of conditions its points never had)."""
    series = [(src, s) for src in data.sources if src.split == split for s in src.series
              if s.acceptance_kind == PUBLISHED]
    return {"hardware": sorted({src.hardware for src, _ in series}), "tp": sorted({s.tp for _, s in series}),
            "batches": sorted({b for _, s in series for b in s.batches})}


def validation_report(dataset: Optional[Dataset] = None) -> dict[str, Any]:
    """The protocol's result, JSON-ready: the split and its dates, each freeze of constants (which held-out sets it
    was evaluated on, and whether refitting the development data today reproduces it), and MAPE per group beside
    the naive baselines. Each held-out set is its own out-of-sample group, evaluated with the constants frozen
    before it was recorded (``Protocol.constants_for``); nothing is fitted to held-out data and no two sets are
    merged. Development fit quality is shown under the newest constants and under the first freeze's."""
    data = dataset or load_dataset()
    protocol = data.protocol
    if protocol is None or protocol.frozen is None:
        raise PerfModelError("validation dataset has no protocol with frozen constants; record the split and freeze "
                             "the constants (fit_orchestration on development_only) first")
    frozen = protocol.frozen
    results = validate(data)
    points = [p for r in results for s in r.series for p in s.points if p.role == "predicted"]
    series = [s for r in results for s in r.series]

    def pick(split: str, acceptance: str, pts: list[ValidationPoint] = points,
             ser: list[SeriesResult] = series) -> tuple[list[ValidationPoint], list[SeriesResult], str, str]:
        return ([p for p in pts if p.split == split and p.acceptance == acceptance],
                [s for s in ser if s.split == split and s.acceptance == acceptance], split, acceptance)

    sets = {"held_out": ("held out, published acceptance (out of sample)", None),
            "held_out_2": ("held out (second set, recorded after the freeze), published acceptance (out of sample)",
                           protocol.held_out_2),
            "held_out_3": ("held out (third set, recorded after the second freeze), published acceptance (out of "
                           "sample)", protocol.held_out_3)}
    out_groups = {split: _group(name, *pick(split, PUBLISHED)) for split, (name, record) in sets.items()
                  if split == "held_out" or record is not None}
    dev_now = _group("development, published acceptance (fit quality, in sample)", *pick("development", PUBLISHED))
    groups = [*out_groups.values(), dev_now]
    if protocol.frozen_2 is not None:
        before = [r for r in validate(data, splits=("development",), frozen=frozen)]
        b_pts = [p for r in before for s in r.series for p in s.points if p.role == "predicted"]
        b_ser = [s for r in before for s in r.series]
        first = _group(f"development, published acceptance, under the first freeze ({frozen.date}; fit quality)",
                       *pick("development", PUBLISHED, b_pts, b_ser))
        groups.append({**first, "role": FIT_QUALITY_FIRST})
    groups.append(_group(f"development, {SHAPE_ONLY} (batch > 1 only)", *pick("development", SHAPE_ONLY)))
    for split in HELD_OUT_SETS:
        if pick(split, SHAPE_ONLY)[0]:
            groups.append(_group(f"{split.replace('_', ' ')}, {SHAPE_ONLY}", *pick(split, SHAPE_ONLY)))
    held = out_groups["held_out"]  # always a group (above), recorded or not; the later sets only once recorded
    second, third = (out_groups.get(k) for k in HELD_OUT_SETS[1:])
    out_of_sample_sets = []
    for split, g in out_groups.items():
        constants = protocol.constants_for(split)
        record = sets[split][1]
        out_of_sample_sets.append({
            **set_conditions(data, split), "current": constants is protocol.current,
            "split": split, "role": g["role"], "group": g["group"],
            "sources": list(record.sources) if record else list(protocol.held_out),
            "split_recorded": record.split_recorded if record else protocol.split_recorded,
            "constants_frozen": constants.date if constants else None,
            "constants": "frozen_2" if split == "held_out_3" else "frozen",
            "mape_pct": g["mape_pct"], "points": g["points"], "naive_flat": g["naive_flat"],
            "naive_free_cycle": g["naive_free_cycle"], "trend_steps_right": g["trend_steps_right"],
            "target_met": g["mape_pct"] is not None and g["mape_pct"] <= schema.GOAL_MAPE_PCT})
    return {
        "protocol": {"split_recorded": protocol.split_recorded, "development": protocol.development,
                     "held_out": protocol.held_out, "split_rule": protocol.split_rule,
                     "held_out_2": protocol.held_out_2.model_dump() if protocol.held_out_2 else None,
                     "held_out_3": protocol.held_out_3.model_dump() if protocol.held_out_3 else None},
        "frozen": _frozen_record(data, frozen),
        "frozen_2": _frozen_record(data, protocol.frozen_2) if protocol.frozen_2 else None,
        "groups": groups,
        "out_of_sample_sets": out_of_sample_sets,
        "out_of_sample_mape_pct": held["mape_pct"], "out_of_sample_points": held["points"],
        "out_of_sample_2_mape_pct": second["mape_pct"] if second else None,
        "out_of_sample_2_points": second["points"] if second else 0,
        "out_of_sample_3_mape_pct": third["mape_pct"] if third else None,
        "out_of_sample_3_points": third["points"] if third else 0,
        "target_mape_pct": schema.GOAL_MAPE_PCT,
        "target_met": held["mape_pct"] is not None and held["mape_pct"] <= schema.GOAL_MAPE_PCT,
        "naive_baselines": NAIVE_BASELINES,
        "shape_only_note": (f"'{SHAPE_ONLY}': the acceptance length of these series is not published and was fitted "
                            "to the single-stream speedup; it absorbs any error of the cycle's cost, so these series "
                            "test only the shape against batch size, and their fitted acceptances are not a real "
                            "drafter's"),
        "sources": validation_summary(results),
        "step_sweeps": step_sweeps(results),
        "kind": "modelled against reported (public sources); constants frozen before each held-out evaluation",
    }


def trend_table(results: list[SourceResult]) -> list[dict[str, Any]]:
    return [{"source": s.source, "series": s.series, "split": s.split, "acceptance": s.acceptance,
             "published": s.published_trend, "predicted": s.predicted_trend, "right": s.trend_right,
             "steps_right": f"{sum(t['right'] for t in s.trend_steps)}/{len(s.trend_steps)}",
             "calibration": s.calibration} for r in results for s in r.series]


def context_sensitivity(contexts: tuple[float, ...] = (512, 1024, 2048),
                        frozen: Optional[Frozen] = None) -> list[dict[str, Any]]:
    """MAPE per source under other context assumptions: how much the conclusion rests on that one assumption
    (with ``frozen`` for every set where given: the constants the model predicts with now)."""
    rows = []
    for ctx in contexts:
        for r in validate(context=ctx, frozen=frozen):
            rows.append({"context": ctx, "source": r.source, "mape_pct": round(r.mape_pct, 2),
                         "trends_right": f"{r.trends_right}/{len(r.series)}", "goal_met": r.goal_met})
    return rows
