"""The validation protocol: computed from the stored dataset, never typed in. CI checks that the validation runs,
is reported and cannot leak held-out data into a fitted constant; it never checks that a MAPE target is met."""

from __future__ import annotations

import statistics

import pytest
import yaml

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.evaluation import current_frozen
from eagle3lab.costmodel.validation import current_report
from eagle3lab.costmodel.validation import (CALIBRATION_AT_BOUND, DATASET, FIRST_BATCH_CALIBRATION,
                                            HELD_OUT_SETS, OUT_OF_SAMPLE, OUT_OF_SAMPLE_2, OUT_OF_SAMPLE_3,
                                            PUBLISHED, SHAPE_ONLY, SHAPE_ONLY_ROLE, Dataset, development_only,
                                            fit_orchestration, frozen_engine, load_dataset, trend, trend_steps,
                                            validate, validation_points, validation_report, validation_summary)


@pytest.fixture(scope="module")
def results():
    return {r.source: r for r in validate()}


def test_dataset_has_independent_cited_sources_split_before_fitting():
    data = load_dataset()
    assert len(data.sources) >= 4
    assert len({s.url for s in data.sources}) == len(data.sources)
    # one publication may hold several sources (one per target), all in one split; publications are independent
    publications: dict[str, set[str]] = {}
    for src in data.sources:
        publications.setdefault(src.url.split("#")[0], set()).add(src.split)
    assert all(len(splits) == 1 for splits in publications.values())
    by_publication = {src.url.split("#")[0]: src.authors for src in data.sources}
    assert len(set(by_publication.values())) == len(by_publication)
    for source in data.sources:
        assert source.url.startswith("https://") and source.date and source.hardware
        assert source.capped_running_requests  # every source says whether it capped running requests
    p = data.protocol
    assert p.split_recorded and p.frozen.date and set(p.development).isdisjoint(p.held_out)
    assert {s.id for s in data.sources if s.split == "held_out"} == set(p.held_out)
    assert set(p.frozen.fitted_on) <= set(p.development)
    held = [s for src in data.sources if src.split == "held_out" for s in src.series]
    assert held and all(s.accept_length is not None for s in held)  # held out: acceptance published


def test_mape_and_errors_are_computed_from_the_points(results):
    for src in results.values():
        predicted = src.predicted_points
        assert predicted, src.source
        assert src.mape_pct == pytest.approx(statistics.fmean(abs(p.error_pct) for p in predicted))
        for p in predicted:
            assert p.error_pct == pytest.approx((p.predicted_speedup - p.published_speedup) / p.published_speedup * 100)


def test_acceptance_is_fitted_only_where_no_source_publishes_it(results):
    data = {(src.id, s.id): s for src in load_dataset().sources for s in src.series}
    for src in results.values():
        for s in src.series:
            fitted = [p for p in s.points if p.role == "calibration"]
            assert all(p.batch == 1 for p in fitted) and len(fitted) <= 1
            published = data[(src.source, s.series)].accept_length is not None
            assert (s.acceptance == PUBLISHED) == published
            if published:  # never fitted: every point of the series is a prediction
                assert not fitted and all(p.accept_length == data[(src.source, s.series)].accept_at(i)
                                          for i, p in enumerate(s.points))
            else:
                assert s.acceptance == SHAPE_ONLY and SHAPE_ONLY in s.calibration
                assert fitted and fitted[0].error_pct == pytest.approx(0.0, abs=1e-6)


def test_fitting_an_acceptance_a_source_publishes_is_refused():
    data = Dataset.model_validate(_tiny_dataset(accept_length=2.0))
    with pytest.raises(PerfModelError) as err:
        validate(data)
    assert (err.value.problem, err.value.parameter) == ("published_value_fitted", "accept_length")


def test_fitting_never_reads_held_out_data():
    """Corrupting every held-out number leaves the fitted constants unchanged, and the fit refuses a dataset that
    still holds a held-out source."""
    data = load_dataset()
    with pytest.raises(PerfModelError) as err:
        fit_orchestration(data)
    assert err.value.problem == "held_out_read" and err.value.value
    clean = fit_orchestration(development_only(data))
    raw = yaml.safe_load(DATASET.read_text())
    for src in raw["sources"]:
        if src["split"] == "held_out":
            for s in src["series"]:
                s["eagle3_tok_s"] = [v * 7.0 for v in s["eagle3_tok_s"]]
                s["accept_length"] = 1.01
    corrupted = Dataset.model_validate(raw)
    assert fit_orchestration(development_only(corrupted)) == clean


def test_the_second_held_out_set_is_recorded_after_the_freeze_and_every_number_is_quoted_with_its_page():
    """The second set is its own split, recorded no earlier than the freeze, apart from the first set and from
    everything fitted; each of its series publishes its acceptance, names the page its numbers are on, and every
    number it holds appears in the quote copied from that page."""
    data = load_dataset()
    p = data.protocol
    second = p.held_out_2
    assert second and second.rule and second.split_recorded >= p.frozen.date
    assert {s.id for s in data.sources if s.split == "held_out_2"} == set(second.sources)
    assert set(second.sources).isdisjoint(set(p.held_out) | set(p.development) | set(p.frozen.fitted_on))
    for src in (s for s in data.sources if s.split == "held_out_2"):
        assert src.series
        for s in src.series:
            assert (s.url or src.url).startswith("https://"), s.id
            values = [*s.baseline_tok_s, *s.eagle3_tok_s,
                      *(s.accept_length if isinstance(s.accept_length, list) else [s.accept_length])]
            missing = [v for v in values if f"{v:g}" not in s.quote]
            assert not missing, (s.id, missing)


def test_fitting_refuses_the_second_held_out_set_and_never_reads_it():
    """A dataset holding only the second held-out set besides development data is refused by the fit, naming that
    set; corrupting its numbers leaves the fitted constants unchanged."""
    data = load_dataset()
    second = set(data.protocol.held_out_2.sources)
    without_first = data.model_copy(update={"sources": [s for s in data.sources
                                                        if s.split in ("development", "held_out_2")]})
    with pytest.raises(PerfModelError) as err:
        fit_orchestration(without_first)
    assert err.value.problem == "held_out_read" and set(err.value.value) == second
    assert not {s.id for s in development_only(data).sources} & second
    clean = fit_orchestration(development_only(data))
    raw = yaml.safe_load(DATASET.read_text())
    for src in raw["sources"]:
        if src["split"] == "held_out_2":
            for s in src["series"]:
                s["eagle3_tok_s"] = [v * 7.0 for v in s["eagle3_tok_s"]]
    assert fit_orchestration(development_only(Dataset.model_validate(raw))) == clean


def test_the_second_held_out_set_is_reported_as_its_own_group_beside_its_naive_baselines():
    """Reported whatever it is: its MAPE over its own predicted points, the naive baselines on the same points,
    never merged into the first set's out-of-sample number."""
    report = validation_report()
    second = [g for g in report["groups"] if g["role"] == OUT_OF_SAMPLE_2]
    assert len(second) == 1 and second[0]["split"] == "held_out_2" and second[0]["acceptance"] == PUBLISHED
    points = [p for r in validate() if r.split == "held_out_2" for s in r.series for p in s.points
              if p.role == "predicted"]
    g = second[0]
    assert g["points"] == report["out_of_sample_2_points"] == len(points) > 0
    assert g["mape_pct"] == report["out_of_sample_2_mape_pct"]
    assert g["mape_pct"] == pytest.approx(statistics.fmean(abs(p.error_pct) for p in points), abs=0.01)
    assert g["naive_free_cycle"]["points"] == len(points)
    assert g["naive_flat"]["points"] == sum(p.batch > 1 for p in points)
    first = next(x for x in report["groups"] if x["role"] == OUT_OF_SAMPLE)
    first_points = [p for r in validate() if r.split == "held_out" for s in r.series for p in s.points]
    assert first["points"] == report["out_of_sample_points"] == len(first_points)
    assert report["protocol"]["held_out_2"]["sources"] == load_dataset().protocol.held_out_2.sources


def assert_refused(tmp_path, raw: dict, change, message: str) -> None:
    """The dataset ``raw`` after ``change`` is refused as invalid, naming ``message``."""
    change(raw)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(PerfModelError) as err:
        load_dataset(path)
    assert err.value.problem == "invalid" and message in str(err.value)


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["protocol"]["held_out_2"].update(split_recorded="2020-01-01"), "before the constants"),
    (lambda raw: raw["sources"][-1]["series"][0].pop("quote"), "quote it was copied from"),
    (lambda raw: raw["protocol"]["frozen"]["fitted_on"].append(raw["protocol"]["held_out_2"]["sources"][0]),
     "names a held-out source"),
    (lambda raw: raw["protocol"]["held_out_2"].update(sources=[]), "unlisted")])
def test_a_second_set_that_breaks_the_protocol_is_one_clear_error(tmp_path, change, message):
    raw = yaml.safe_load(DATASET.read_text())
    raw["sources"].append(raw["sources"].pop(next(i for i, s in enumerate(raw["sources"])
                                                  if s["split"] == "held_out_2")))
    assert raw["sources"][-1]["split"] == "held_out_2"
    assert_refused(tmp_path, raw, change, message)


def test_frozen_constants_are_what_the_development_data_give_and_are_used_everywhere(results):
    # the first freeze is a record now: fitted under the model of its day, superseded by the third (constants.yaml),
    # so the current protocol shows it without refitting it (refitting it under today's model would say nothing)
    current = current_report(load_dataset(), current_frozen(), {"id": "frozen_3"})
    assert current["frozen"]["superseded_by"] == "frozen_3" and current["frozen"]["refit_matches_frozen"] is None
    assert current["frozen"]["engines"] == load_dataset().protocol.frozen.engines

    frozen = load_dataset().protocol.frozen
    engine = frozen_engine("sglang-0.5", frozen)
    assert engine.spec_cycle_extra_s == frozen.engines["sglang-0.5"]["spec_cycle_extra_s"]
    assert f"frozen {frozen.date}" in engine.sources["spec_cycle_extra_s"]
    assert frozen_engine("vllm-0.10", frozen).spec_cycle_extra_s == 0.0  # nothing to fit it on: not fitted


def test_validation_report_gives_out_of_sample_mape_beside_naive_baselines():
    """Reported whatever it is: the held-out MAPE, the development fit and the shape-only group, each with the
    naive baselines where they are defined; the target is stated, not asserted."""
    report = validation_report()
    names = [g["group"] for g in report["groups"]]
    assert names[0].startswith("held out") and any(SHAPE_ONLY in n for n in names)
    held = report["groups"][0]
    assert held["points"] == report["out_of_sample_points"] > 0
    assert report["out_of_sample_mape_pct"] == held["mape_pct"]
    points = [p for r in validate() if r.split == "held_out" for s in r.series for p in s.points]
    assert held["mape_pct"] == pytest.approx(statistics.fmean(abs(p.error_pct) for p in points), abs=0.01)
    assert held["naive_free_cycle"]["points"] == len(points)
    assert report["target_met"] == (held["mape_pct"] <= report["target_mape_pct"])
    for g in report["groups"]:
        assert g["naive_flat"] is not None or g["naive_free_cycle"] is not None
        # only held-out points with published acceptance validate; the rest is fit quality (or shape only)
        assert (g["role"] == OUT_OF_SAMPLE) == (g["split"] == "held_out" and g["acceptance"] == PUBLISHED)
        assert (g["role"] == SHAPE_ONLY_ROLE) == (g["acceptance"] == SHAPE_ONLY)
    assert [g["role"] for g in report["groups"]].count(OUT_OF_SAMPLE) == 1
    for check, raw in zip(report["frozen"]["public_checks"], load_dataset().protocol.frozen.public_checks):
        assert check["hidden_host_ms_per_cycle"] == pytest.approx(
            (raw.accept_exposed / raw.tok_s_exposed - raw.accept_overlapped / raw.tok_s_overlapped) * 1e3)
    sweep = report["step_sweeps"][0]
    assert sweep["source"] == "ranjan2025" and sweep["num_steps"] == sorted(sweep["num_steps"])


def test_fit_quality_on_development_data_is_reported_per_source(results):
    """Fit quality on development data (not an out-of-sample result): each source's MAPE is the mean of its
    predicted points' errors and the naive flat baseline is computed from the same points."""
    summary = {row["source"]: row for row in validation_summary(list(results.values()))}
    for name, row in summary.items():
        src = results[name]
        assert row["split"] == src.split and row["mape_pct"] == round(src.mape_pct, 2)
        flat = [p for p in src.predicted_points if p.naive_flat_speedup is not None]
        if flat:
            assert row["naive_flat"]["points"] == len(flat)
    assert summary["liu2025"]["shape_only_series"] == 17


def test_trends_are_judged_point_by_point():
    steps = trend_steps([1, 4, 16], [1.0, 1.2, 1.0], [1.0, 1.3, 1.4])
    assert [s["published"] for s in steps] == ["rises", "falls"]
    assert [s["right"] for s in steps] == [True, False]


def test_tables_are_plain_rows():
    rows = validation_points(validate())
    assert {"source", "series", "batch", "published_speedup", "predicted_speedup", "error_pct", "role"} <= set(rows[0])
    assert {r["role"] for r in rows} == {"calibration", "predicted"}
    assert {r["split"] for r in rows} == {"development", *HELD_OUT_SETS}


@pytest.mark.parametrize("values, expected", [([1.8, 1.7, 1.2], "falls"), ([0.8, 0.9], "rises"),
                                              ([1.0, 1.04, 0.98], "flat"), ([1.3], "single point")])
def test_trend_classification(values, expected):
    assert trend(list(range(1, len(values) + 1)), values) == expected


def _tiny_dataset(**series_overrides) -> dict:
    series = {"id": "s", "engine": "sglang-0.5", "model": "llama-3.1-8b-instruct", "drafter": "EAGLE-3", "tp": 1,
              "flags": {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4}, "batches": [1, 64],
              "speedup": [1.7, 1.0], "calibrate": "accept_length_from_single_stream_speedup", **series_overrides}
    return {"default_context": 1024, "default_context_source": "test",
            "sources": [{"id": "t", "title": "t", "authors": "a", "url": "https://example.org", "date": "2025",
                         "hardware": "h100-sxm", "notes": "n", "series": [series]}]}


def test_a_source_that_misses_its_trend_fails_the_goal(tmp_path):
    data = Dataset.model_validate(_tiny_dataset(speedup=[1.7, 2.5]))  # published rises; the model predicts a fall
    (result,) = validate(data)
    assert result.series[0].published_trend == "rises" and not result.goal_met


@pytest.mark.parametrize("override, message", [({"batches": [2, 4]}, "start at 1"),
                                               ({"speedup": [1.7]}, "1 values for 2 batches"),
                                               ({"calibrate": "guess"}, "calibrate must be one of"),
                                               ({"typo_field": 1}, "typo_field")])
def test_malformed_dataset_is_one_clear_error(tmp_path, override, message):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_tiny_dataset(**override)))
    with pytest.raises(PerfModelError) as err:
        load_dataset(path)
    assert (err.value.problem, err.value.path) == ("invalid", path)
    # the rule broken is said only in the schema validator's own sentence, so its wording is what is checked
    assert message in str(err.value)


# ------------------------------------------------------------------------------------------------ the third set
def test_the_third_set_is_its_own_group_never_merged_with_another():
    """Each held-out set is one out-of-sample group over exactly its own predicted points (evaluated with the
    constants frozen before it), beside the naive baselines on those points; no group mixes splits."""
    report = validation_report()
    points = [p for r in validate() for s in r.series for p in s.points if p.role == "predicted"]
    roles = {"held_out": OUT_OF_SAMPLE, "held_out_2": OUT_OF_SAMPLE_2, "held_out_3": OUT_OF_SAMPLE_3}
    sets = {s["split"]: s for s in report["out_of_sample_sets"]}
    assert set(sets) == set(HELD_OUT_SETS)
    for split, role in roles.items():
        (group,) = [g for g in report["groups"] if g["role"] == role]
        mine = [p for p in points if p.split == split and p.acceptance == PUBLISHED]
        assert group["split"] == split and group["points"] == sets[split]["points"] == len(mine) > 0
        assert group["mape_pct"] == sets[split]["mape_pct"] == pytest.approx(
            statistics.fmean(abs(p.error_pct) for p in mine), abs=0.01)
        assert group["naive_free_cycle"]["points"] == len(mine)
        assert sets[split]["target_met"] == (group["mape_pct"] <= report["target_mape_pct"])
    assert report["out_of_sample_3_mape_pct"] == sets["held_out_3"]["mape_pct"]
    assert sets["held_out_3"]["constants"] == "frozen_2" and sets["held_out"]["constants"] == "frozen"
    # every point of the third set was predicted with the second freeze, the first two sets with the first
    p = load_dataset().protocol
    third = next(src for src in load_dataset().sources if src.split == "held_out_3")
    assert f"frozen {p.frozen_2.date}" in frozen_engine(third.series[0].engine, p.frozen_2).sources["spec_tp_extra_s"]
    assert p.constants_for("held_out_3") is p.frozen_2 and p.constants_for("held_out_2") is p.frozen


def test_the_third_split_is_recorded_after_the_second_freeze_and_quotes_every_number():
    data = load_dataset()
    p = data.protocol
    third = p.held_out_3
    assert third.split_recorded > p.frozen_2.date >= p.frozen.date
    assert {s.id for s in data.sources if s.split == "held_out_3"} == set(third.sources)
    assert set(third.sources).isdisjoint(set(p.held_out) | set(p.held_out_2.sources) | set(p.development))
    assert "held_out_3" in p.frozen_2.evaluated_on and "held_out_3" not in p.frozen.evaluated_on
    for src in (s for s in data.sources if s.split == "held_out_3"):
        assert src.url.startswith("https://")
        for s in src.series:
            assert s.accept_length is not None and s.quote
            values = [*s.baseline_tok_s, *s.eagle3_tok_s, s.accept_length]
            assert not [v for v in values if repr(v) not in s.quote], s.id


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw["protocol"]["held_out_3"].update(split_recorded=raw["protocol"]["frozen_2"]["date"]),
     "not after"),
    (lambda raw: raw["protocol"]["frozen_2"]["fitted_on"].append(raw["protocol"]["held_out_3"]["sources"][0]),
     "frozen_2.fitted_on names a held-out source"),
    (lambda raw: raw["protocol"]["frozen"]["fitted_on"].append(raw["protocol"]["held_out_3"]["sources"][0]),
     "frozen.fitted_on names a held-out source"),
    (lambda raw: raw["protocol"]["held_out_2"]["sources"].append(raw["protocol"]["held_out_3"]["sources"][0]),
     "two sets"),
    (lambda raw: raw["protocol"].pop("frozen_2"), "needs protocol.frozen_2")])
def test_a_third_set_that_breaks_the_protocol_is_one_clear_error(tmp_path, change, message):
    raw = yaml.safe_load(DATASET.read_text())
    assert_refused(tmp_path, raw, change, message)


def test_fitted_on_never_names_a_held_out_source_and_the_fit_refuses_the_third_set():
    data = load_dataset()
    p = data.protocol
    held = p.held_out_sources()
    assert {"held_out_3"} <= {s.split for s in data.sources} and set(p.held_out_3.sources) <= held
    for frozen in (p.frozen, p.frozen_2):
        assert not set(frozen.fitted_on) & held and set(frozen.fitted_on) <= set(p.development)
    only_third = data.model_copy(update={"sources": [s for s in data.sources
                                                     if s.split in ("development", "held_out_3")]})
    with pytest.raises(PerfModelError) as err:
        fit_orchestration(only_third)
    assert err.value.problem == "held_out_read" and set(err.value.value) == set(p.held_out_3.sources)


def test_the_second_freeze_is_what_the_development_data_give():
    """Refitting the development data today by the second freeze's fields gives its constants; the spec-v2 preset
    takes the v1 worker's (shared_with), and the public v1/v2 check sets the host time the preset hides beside the
    published one (computed, not fitted)."""
    report = validation_report()
    second = report["frozen_2"]
    assert second["engines"] == load_dataset().protocol.frozen_2.engines  # kept verbatim as a record
    p = load_dataset().protocol
    v1, v2 = (frozen_engine(name, p.frozen_2) for name in ("sglang-0.5", "sglang-0.5-spec-v2"))
    assert (v2.spec_cycle_extra_s, v2.spec_tp_extra_s) == (v1.spec_cycle_extra_s, v1.spec_tp_extra_s)
    assert v2.overlap_spec and not v1.overlap_spec
    check = second["public_checks"][0]
    assert check["model_hidden_host_ms_per_cycle"] > 0 and check["hidden_host_ms_per_cycle"] > 0


def test_a_series_published_at_one_batch_above_one_calibrates_its_plain_rate_there():
    """baseline_at_first_batch fits the kernel overhead to the plain rate at the series' own batch (the model's
    plain rate there equals the published one); a rate faster than the model allows stops at overhead 0 and says
    so; any other calibration still needs batch 1 first."""
    from eagle3lab.costmodel.cycle import plain_step
    from eagle3lab.costmodel.validation.evaluate import calibrate_deployment, series_deployment

    def one(rate: float):
        raw = _tiny_dataset(batches=[8], speedup=None, baseline_tok_s=[rate], eagle3_tok_s=[rate * 1.2],
                            accept_length=2.0, calibrate=FIRST_BATCH_CALIBRATION)
        data = Dataset.model_validate(raw)
        src = data.sources[0]
        dep = series_deployment(src, src.series[0], 1024, None)
        dep, _, how, fitted = calibrate_deployment(src, src.series[0], dep, {}, FIRST_BATCH_CALIBRATION)
        return dep, how, fitted, validate(data)[0].series[0]

    dep, how, fitted, series = one(400.0)
    assert plain_step(dep, 8).tok_s == pytest.approx(400.0, rel=1e-6) and not fitted
    assert series.points[0].role == "predicted" and series.points[0].naive_flat_speedup is None
    dep, how, _, _ = one(1e7)
    assert dep.engine.kernel_overhead_s == 0.0 and CALIBRATION_AT_BOUND in how
    with pytest.raises(ValueError, match="start at 1"):
        Dataset.model_validate(_tiny_dataset(batches=[8], speedup=[1.2]))
