"""The cost model's evidence for the report, in one object: what it predicts for the incident, where its verdict
flips, how far it missed data it was not fitted to, and how it fares against this machine's own run.

Why one object: the report must not carry a number or a verdict that was typed in. Every value here is the direct
output of a model function (``presets``, ``costmodel.validation``) or a measurement read through the bench's own
metrics; ``report.build`` only formats it, and the report's tests check that every number REPORT.md prints is one
of these (or a sidecar's). ``build_report`` writes it next to the sidecars, so a reader can trace each number.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import PerfModelError
from eagle3lab.paths import sidecar_dir
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, BenchReport
from eagle3lab.costmodel.cycle import check_accept_length, plain_step, plain_tok_s, spec_cycle, speedup
from eagle3lab.costmodel import turnover as turnover_model
from eagle3lab.costmodel.evaluation import current_frozen, protocol_report
from eagle3lab.costmodel.validation import PUBLISHED, SHAPE_ONLY, context_sensitivity, trend, validate
from eagle3lab.report.plots.model import measured_points_from_bench
from eagle3lab.report.run_model import run_deployment
from eagle3lab.runtime.speculative import SpeculativeSpec
from eagle3lab.errors import BenchError
from eagle3lab.runtime.profiles import Profile, load_profile
from eagle3lab.report.incident_model import incident_report, incident_spec
from eagle3lab.sidecars import today
from eagle3lab.bench.diagnostics.control_arm import control_cycles as measured_cycles


@dataclass
class ModelEvidence:
    """Plain JSON data, each part from one model function (named in the comment)."""

    incident: dict[str, Any]  # incident_model.incident_report(): predictions, break-evens, sensitivity, cycle breakdown
    spec: dict[str, Any]  # the incident's EAGLE flags (incident_model.incident_spec(), the launch's own object)
    # costmodel.evaluation.protocol_report(): the protocol's groups (seen sets as fit quality, shape only) with
    # naive baselines, the frozen constants and their date, the split, per-source rows, draft-step sweeps, the goal
    validation_protocol: dict[str, Any]
    validation_context: list[dict[str, Any]]  # costmodel.validation.context_sensitivity(frozen=current_frozen())
    published_acceptance: list[dict[str, Any]]  # published_acceptance(validate()): the sources' drafters
    computed_on: str = ""  # UTC date the model was run (the report's "generated on")
    run_check: Optional[dict[str, Any]] = None  # measured_run_check(profile, bench report) when this run measured
    run_check_missing: Optional[str] = None  # why there is no run check (one line), if there is none

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelEvidence":
        return cls(**data)


def evidence_path(profile: str) -> Path:
    """``artifacts/report_model_evidence.<profile>.json``: the model's numbers behind that profile's REPORT.md
    (beside the sidecars, so a staged run publishes it with them)."""
    return sidecar_dir() / f"report_model_evidence.{profile}.json"


def save(evidence: ModelEvidence, profile: str) -> Path:
    return write_json_atomic(evidence_path(profile), evidence.to_dict())


def load(profile: str, path: Optional[Path] = None) -> ModelEvidence:
    path = Path(path) if path is not None else evidence_path(profile)
    try:
        return ModelEvidence.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise PerfModelError(f"model evidence {path} is missing; write it with: python -m eagle3lab report "
                             f"--profile {profile} --no-run", path=path, problem="missing") from None
    except (json.JSONDecodeError, TypeError) as exc:
        raise PerfModelError(f"model evidence {path} is unreadable ({type(exc).__name__}: {exc}); rewrite it with: "
                             f"python -m eagle3lab report --profile {profile} --no-run", path=path,
                             problem="unreadable") from None


# ------------------------------------------------------------------------------------------ published sources
def published_acceptance(results) -> list[dict[str, Any]]:
    """Per validation source and kind of acceptance (costmodel.validation: "published acceptance" or "fitted
    acceptance, shape-only"): the range of acceptance lengths its EAGLE drafters ran at. Fitted values absorb the
    cycle model's error and are not a real drafter's; the report labels them so."""
    rows = []
    for src in results:
        by_kind: dict[str, list[float]] = {}
        for s in src.series:
            if s.points:
                by_kind.setdefault(getattr(s, "acceptance", PUBLISHED), []).append(s.points[0].accept_length)
        for kind, values in sorted(by_kind.items()):
            rows.append({"source": src.source, "kind": kind, "fitted": kind == SHAPE_ONLY, "series": len(values),
                         "min": min(values), "max": max(values)})
    return rows


# ------------------------------------------------------------------------------------------ a measured run
SPLIT_FIELDS = ("decode_ms", "prefill_ms", "other_ms", "wall_ms", "mean_batch_size", "full_batch_share",
                "decode_batches", "prefill_batches")


def _splits(point_times: Optional[Sequence[Any]], kinds: Mapping[str, str]) -> dict[tuple[str, int], Any]:
    """(arm kind, concurrency) -> that point's window split (``sidecars.PointTimeRecord``); ``kinds`` maps the
    report's arm names to their kind (baseline, eagle3, eagle3_control, ...)."""
    return {(kinds[p.arm], p.concurrency): p for p in point_times or () if p.arm in kinds}


def prefill_s(split: Any) -> Optional[float]:
    """Seconds per prefill batch in one point's window (its prefill time per decode batch x decode batches / prefill
    batches); None when the window ran no prefill."""
    if split is None or not split.prefill_batches:
        return None
    return split.prefill_ms * split.decode_batches / split.prefill_batches / 1e3


def measured_turnover(profile, splits: Mapping[tuple[str, int], Any]) -> dict[str, Any]:
    """Each arm's prefill of one new request, measured at concurrency 1 apart from the headline EAGLE-3 arm: the
    baseline's for plain decoding, the untrained-drafter control arm's for EAGLE-3 (the same target, the same
    drafter shapes, so the same prefill and draft extend). ``{"baseline": Turnover | None, "eagle3": ..., "missing":
    why one is absent}``."""
    out: dict[str, Any] = {"missing": []}
    for side, kind in (("baseline", ARM_KIND_BASELINE), ("eagle3", ARM_KIND_EAGLE3_CONTROL)):
        seconds = prefill_s(splits.get((kind, 1)))
        if seconds is None:
            out[side] = None
            out["missing"].append(f"no prefill timed in the {kind} arm's window at concurrency 1")
            continue
        split = splits[(kind, 1)]
        out[side] = turnover_model.Turnover(
            seconds, profile.bench_output_len - 1,
            f"measured here: arm '{split.arm}' at concurrency 1, {split.prefill_batches} prefill batches "
            f"(cycle timers)")
    return out


def _turnover_prediction(row: dict[str, Any], dep, spec, batch: int, turnover: Mapping[str, Any]) -> None:
    """The row's rates and speedup with the other requests' prefills counted (``costmodel.turnover``)."""
    base, spec_side = turnover.get("baseline"), turnover.get("eagle3")
    if base is None:
        return
    row["turnover_baseline_tok_s"] = turnover_model.decode_rate(plain_step(dep, batch).total_s, 1, batch, base)
    row["turnover_baseline_error_pct"] = (row["turnover_baseline_tok_s"] - row["measured_baseline_tok_s"]) / \
        row["measured_baseline_tok_s"] * 100
    if spec_side is None or "predicted_speedup" not in row:
        return
    rate = turnover_model.decode_rate(spec_cycle(dep, spec, batch).total_s, row["accept_length"], batch, spec_side)
    row["turnover_eagle3_tok_s"] = rate
    row["turnover_speedup"] = rate / row["turnover_baseline_tok_s"]
    row["turnover_speedup_error_pct"] = (row["turnover_speedup"] - row["measured_speedup"]) / \
        row["measured_speedup"] * 100


def naive_speedup_check(rows: Sequence[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """The naive baseline beside the model's speedup errors: the speedup measured at concurrency 1 held at every
    other concurrency, scored on the same points as the model (the concurrencies above 1 where both predicted);
    None without a measured single-stream speedup or a point beyond it."""
    one = next((r for r in rows if r["concurrency"] == 1 and "measured_speedup" in r), None)
    beyond = [r for r in rows if r["concurrency"] > 1 and "predicted_speedup" in r]
    if one is None or not beyond:
        return None
    naive = [abs(one["measured_speedup"] - r["measured_speedup"]) / r["measured_speedup"] * 100 for r in beyond]
    return {"concurrencies": [r["concurrency"] for r in beyond], "held_speedup": one["measured_speedup"],
            "naive_mape_pct": statistics.fmean(naive),
            "model_mape_pct": _mape(beyond, "speedup_error_pct"),
            "turnover_mape_pct": _mape(beyond, "turnover_speedup_error_pct")}


def _cycle_extra(dep, report) -> dict[str, Any]:
    """The model's orchestration per cycle beyond the counted passes, where it comes from, and whether that is the
    headline EAGLE-3 arm's own cycles (the CPU engine entry names the arm it timed)."""
    source = str(dep.engine.sources.get("spec_cycle_extra_s", ""))
    headline = [arm.name for arm in report.arms if arm.kind == ARM_KIND_EAGLE3]
    return {"ms": dep.engine.spec_cycle_extra_s * 1e3, "source": source, "measured": source.startswith("measured"),
            "from_headline_arm": any(f"arm '{name}'" in source for name in headline)}


def _per_request_host(dep) -> Optional[dict[str, Any]]:
    """The host work per running request inside each pass, where it was measured (the CPU engine entry): per layer,
    per target pass, and where it comes from; None where the engine has none."""
    per_layer = dep.engine.pass_per_request_layer_s
    if not per_layer:
        return None
    return {"ms_per_layer": per_layer * 1e3, "target_pass_ms": per_layer * dep.target.num_layers * 1e3,
            "source": str(dep.engine.sources.get("pass_per_request_layer_s", ""))}


def _mape(rows: Sequence[Mapping[str, Any]], key: str) -> Optional[float]:
    values = [abs(r[key]) for r in rows if key in r]
    return statistics.fmean(values) if values else None


def _compare_point(dep, spec, batch: int, baseline_tok_s: float,
                   eagle3: Optional[tuple[float, Optional[float]]]) -> dict[str, Any]:
    """One concurrency of a run check: the model's plain decode rate against the measured one and, given the
    EAGLE-3 side's measured (rate, acceptance), its speedup from that acceptance against the measured speedup (or a
    note on why the acceptance cannot be modelled). Concurrency 1 is the calibration point."""
    predicted = plain_tok_s(dep, batch)
    row: dict[str, Any] = {"concurrency": batch, "measured_baseline_tok_s": baseline_tok_s,
                           "predicted_baseline_tok_s": predicted,
                           "baseline_error_pct": (predicted - baseline_tok_s) / baseline_tok_s * 100,
                           "baseline_role": "calibration" if batch == 1 else "predicted"}
    if eagle3 is None:
        return row
    rate, accept = eagle3
    if accept is None:
        return row
    row.update(measured_eagle3_tok_s=rate, accept_length=accept, measured_speedup=rate / baseline_tok_s)
    try:
        check_accept_length(accept, spec)
    except PerfModelError as exc:
        row["note"] = str(exc)
        return row
    row["predicted_speedup"] = speedup(dep, spec, batch, accept)
    row["speedup_error_pct"] = (row["predicted_speedup"] - row["measured_speedup"]) / row["measured_speedup"] * 100
    return row


def _summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A run check's MAPEs over the points it predicted (the calibration point excluded), passes only and with
    request turnover, and the naive baseline on the same points."""
    predicted_base = [r for r in rows if r["baseline_role"] == "predicted"]
    with_speedup = [r for r in rows if "predicted_speedup" in r]
    return {"baseline_mape_pct": _mape(predicted_base, "baseline_error_pct"),
            "speedup_mape_pct": _mape(with_speedup, "speedup_error_pct"),
            "turnover_baseline_mape_pct": _mape(predicted_base, "turnover_baseline_error_pct"),
            "turnover_speedup_mape_pct": _mape(with_speedup, "turnover_speedup_error_pct"),
            "naive": naive_speedup_check(rows)}


def interleaved_run_check(profile, samples: Sequence[Any], turnover: Mapping[str, Any],
                          mem_bandwidth: Optional[float] = None,
                          report: Optional[BenchReport] = None) -> Optional[dict[str, Any]]:
    """The cost model against the interleaved launch (``sidecars.LaunchSample`` per concurrency, both arms measured
    in the same spells): calibrated on that launch's own plain single-stream decode step, it predicts the plain
    decode rate at the other concurrencies and the speedup at each from the acceptance pooled there. Decode-only
    rates, as the sweep's check. The first interleaved launch is used; None without one that measured
    concurrency 1 with decode rates. ``report`` is the run's benchmark record: the GPU it names is the one a cuda
    run is modelled on (``run_model.modelled_as``)."""
    interleaved = [s for s in samples if s.method == "interleaved" and s.concurrency and s.baseline_decode_tok_s]
    if not interleaved:
        return None
    launch = min(s.launch for s in interleaved)
    points = {s.concurrency: s for s in interleaved if s.launch == launch}
    if 1 not in points:
        return None
    where = (f"launch {launch}, both servers up, {len(points[1].round_speedups)} interleaved rounds, "
             f"{profile.name}")
    dep, calibrated = run_deployment(profile, report, mem_bandwidth,
                                     step=(1.0 / points[1].baseline_decode_tok_s, where))
    spec = SpeculativeSpec.from_profile(profile, profile.draft_model)
    rows = []
    for batch, sample in sorted(points.items()):
        eagle3 = (sample.eagle3_decode_tok_s, sample.accept_length) if sample.eagle3_decode_tok_s else None
        row = _compare_point(dep, spec, batch, sample.baseline_decode_tok_s, eagle3)
        if sample.speedup_low is not None and sample.speedup_high is not None:
            row["client_speedup_interval"] = [sample.speedup_low, sample.speedup_high]
        _turnover_prediction(row, dep, spec, batch, turnover)
        rows.append(row)
    return {"launch": launch, "calibrated_on": calibrated, "rows": rows, **_summary(rows)}


def sweep_gap(sweep_rows: Sequence[Mapping[str, Any]], interleaved_rows: Sequence[Mapping[str, Any]]
              ) -> Optional[dict[str, Any]]:
    """How far the sweep and the interleaved launch measured the same point's speedup apart (the largest gap over
    the concurrencies both measured, relative to the interleaved one): the resolution the sweep's own check has
    on this machine. None where no concurrency has a speedup in both."""
    interleaved = {r["concurrency"]: r["measured_speedup"] for r in interleaved_rows if "measured_speedup" in r}
    gaps = [{"concurrency": r["concurrency"], "sweep_speedup": r["measured_speedup"],
             "interleaved_speedup": interleaved[r["concurrency"]],
             "gap_pct": abs(r["measured_speedup"] - interleaved[r["concurrency"]]) / interleaved[r["concurrency"]]
             * 100} for r in sweep_rows if "measured_speedup" in r and r["concurrency"] in interleaved]
    return max(gaps, key=lambda g: g["gap_pct"]) if gaps else None


def measured_run_check(profile, report, mem_bandwidth: Optional[float] = None,
                       point_times: Optional[Sequence[Any]] = None,
                       interleaved: Sequence[Any] = ()) -> dict[str, Any]:
    """The cost model against a run measured here: calibrated on the run's own plain single-stream decode step
    (nothing else), it predicts the plain decode rate at every other concurrency and, where the EAGLE-3 arm was
    measured, the speedup at that concurrency from the measured acceptance. Rates are decode-only (the bench's
    ``decode_tok_per_s``), the rate the model predicts.

    ``profile`` is the run's ``runtime.profiles.Profile``, ``report`` its ``bench.sweep.BenchReport``;
    ``point_times`` the headline arms' windows split by the cycle timers (``bench.server_time``, the cycle table's
    ``by_point``), which say how much of each measured cycle is the decode batches the model describes;
    ``interleaved`` the interleaved launch's pairs (``sidecars.LaunchSample``), checked the same way under
    ``"interleaved"`` (``interleaved_run_check``).
    """

    dep, calibrated = run_deployment(profile, report, mem_bandwidth)
    if getattr(profile, "device", "cpu") == "cpu":
        mem_bandwidth = dep.hardware.mem_bandwidth  # the run's own, for the interleaved launch's calibration too
    spec = SpeculativeSpec.from_profile(profile, profile.draft_model)
    points = measured_points_from_bench(report, rate="decode")
    splits = _splits(point_times, {arm.name: arm.kind for arm in report.arms})
    turnover = measured_turnover(profile, splits)
    base = {p.batch: p for p in points if p.arm == "baseline"}
    eagle = {p.batch: p for p in points if p.arm == "eagle3"}
    rows = []
    for batch in sorted(base):
        other = eagle.get(batch)
        row = _compare_point(dep, spec, batch, base[batch].tok_s,
                             (other.tok_s, other.accept_length) if other is not None else None)
        if "predicted_speedup" in row:
            # one cycle's wall time: requests x tokens per cycle / rate; the modelled one from the model's own
            # EAGLE-3 rate (its speedup times its own plain rate), never mixed with a measured rate
            tokens_per_cycle = batch * row["accept_length"]
            row["measured_cycle_ms"] = tokens_per_cycle / row["measured_eagle3_tok_s"] * 1e3
            row["predicted_cycle_ms"] = tokens_per_cycle / (row["predicted_speedup"] *
                                                            row["predicted_baseline_tok_s"]) * 1e3
            row["unmodelled_cycle_ms"] = row["measured_cycle_ms"] - row["predicted_cycle_ms"]
        for kind, key in ((ARM_KIND_BASELINE, "baseline_split"), (ARM_KIND_EAGLE3, "eagle3_split")):
            if (kind, batch) in splits:
                row[key] = splits[(kind, batch)].model_dump(include=set(SPLIT_FIELDS))
        _turnover_prediction(row, dep, spec, batch, turnover)
        if "eagle3_split" in row and "predicted_cycle_ms" in row:
            # the decode batches alone against the model's cycle, and what runs between them
            row["decode_minus_model_ms"] = row["eagle3_split"]["decode_ms"] - row["predicted_cycle_ms"]
            row["between_cycles_ms"] = row["eagle3_split"]["prefill_ms"] + row["eagle3_split"]["other_ms"]
        rows.append(row)
    predicted_base = [r for r in rows if r["baseline_role"] == "predicted"]
    with_speedup = [r for r in rows if "predicted_speedup" in r]
    one = plain_step(dep, 1)
    parts = one.target.breakdown()
    summary = _summary(rows)
    out: dict[str, Any] = {
        "profile": report.profile, "date": report.date, "calibrated_on": calibrated, "rate": "decode",
        "target": dep.target.name, "hardware": dep.hardware.name, "context": dep.context, "rows": rows,
        "cpu_harness": bool(getattr(profile, "cpu_harness", False)),
        "single_stream_pct_by_part": {k: v / one.target.total_s * 100 for k, v in parts.items()},
        "baseline_mape_pct": summary["baseline_mape_pct"], "speedup_mape_pct": summary["speedup_mape_pct"],
    }
    out["turnover"] = {
        "decode_tokens": profile.bench_output_len - 1,
        "baseline_prefill_ms": turnover["baseline"].prefill_s * 1e3 if turnover["baseline"] else None,
        "eagle3_prefill_ms": turnover["eagle3"].prefill_s * 1e3 if turnover["eagle3"] else None,
        "sources": {side: turnover[side].source for side in ("baseline", "eagle3") if turnover[side]},
        "missing": turnover["missing"],
        "baseline_mape_pct": summary["turnover_baseline_mape_pct"],
        "speedup_mape_pct": summary["turnover_speedup_mape_pct"]}
    out["naive"] = summary["naive"]
    out["interleaved"] = interleaved_run_check(profile, interleaved, turnover, mem_bandwidth, report)
    if out["interleaved"]:
        out["interleaved"]["sweep_gap"] = sweep_gap(rows, out["interleaved"]["rows"])
    out["cycle_extra"] = _cycle_extra(dep, report)
    out["per_request_host"] = _per_request_host(dep)
    out["control_cycles"] = measured_cycles(report)  # the one computation, in the diagnostics engine
    if len(predicted_base) >= 1:
        batches = [r["concurrency"] for r in rows]
        out["baseline_trend"] = {"measured": trend(batches, [r["measured_baseline_tok_s"] for r in rows]),
                                 "predicted": trend(batches, [r["predicted_baseline_tok_s"] for r in rows])}
    if len(with_speedup) >= 2:
        batches = [r["concurrency"] for r in with_speedup]
        out["speedup_trend"] = {"measured": trend(batches, [r["measured_speedup"] for r in with_speedup]),
                                "predicted": trend(batches, [r["predicted_speedup"] for r in with_speedup])}
    return out


def _run_check(profile_name: str, bench_report_path: Optional[str],
               profile_values: Optional[dict[str, Any]] = None,
               point_times: Optional[Sequence[Any]] = None,
               interleaved: Sequence[Any] = ()) -> tuple[Optional[dict], Optional[str]]:
    """The run check of a profile's own benchmark, or why there is none (one line). ``profile_values`` is the
    profile exactly as notebook 03 ran it (its sidecar's ``profile_values``, overrides included); ``point_times``
    its points' windows split by the cycle timers."""
    from pydantic import ValidationError


    if not bench_report_path:
        return None, "notebook 03 ran no benchmark on this profile"
    if not Path(bench_report_path).is_file():
        return None, f"the benchmark report {Path(bench_report_path).name} of notebook 03 is missing"
    try:
        profile = Profile.model_validate(profile_values) if profile_values else load_profile(profile_name)
    except ValidationError as exc:
        return None, (f"notebook 03's profile values no longer match the profile schema "
                      f"({exc.errors()[0]['loc']}); rerun notebook 03")
    try:
        return measured_run_check(profile, BenchReport.load(Path(bench_report_path)),
                                  point_times=point_times, interleaved=interleaved), None
    except (PerfModelError, BenchError) as exc:
        return None, str(exc)


# ------------------------------------------------------------------------------------------------ all of it
def gather(profile: str, bench_report_path: Optional[str] = None,
           profile_values: Optional[dict[str, Any]] = None,
           point_times: Optional[Sequence[Any]] = None, interleaved: Sequence[Any] = ()) -> ModelEvidence:
    """Everything the report says about the cost model, computed now; the run check from notebook 03's benchmark
    report, the profile values it ran with, its points' windows split by the cycle timers and its interleaved
    launch's pairs, when there are any."""

    spec = incident_spec()
    results = validate()
    run_check, missing = _run_check(profile, bench_report_path, profile_values, point_times, interleaved)
    return ModelEvidence(
        computed_on=today(),
        incident=incident_report(),
        spec={"num_steps": spec.num_steps, "eagle_topk": spec.eagle_topk, "num_draft_tokens": spec.num_draft_tokens,
              "verify_tokens": spec.verify_tokens},
        validation_protocol=protocol_report(),
        validation_context=context_sensitivity(frozen=current_frozen()), published_acceptance=published_acceptance(results),
        run_check=run_check, run_check_missing=missing)
