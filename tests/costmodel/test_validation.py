"""The validation table: computed from the stored dataset, never typed in; the goal asserted only where it holds."""

from __future__ import annotations

import statistics

import pytest
import yaml

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel.validation import (DATASET, GOAL_MAPE_PCT, Dataset, load_dataset, trend, validate,
                                            validation_points, validation_summary)


@pytest.fixture(scope="module")
def results():
    return {r.source: r for r in validate()}


def test_dataset_has_independent_cited_sources_and_holds_out_the_eagle3_table():
    data = load_dataset()
    assert len(data.sources) >= 2
    assert len({s.url for s in data.sources}) == len(data.sources)
    assert len({s.authors for s in data.sources}) == len(data.sources)
    for source in data.sources:
        assert source.url.startswith("https://") and source.date and source.hardware
        assert "2503.01840" not in source.url + (source.companion or "")  # EAGLE-3 paper: held out
    text = DATASET.read_text()
    assert "2503.01840" not in text and "Table 3" not in text.replace("Li et al. 2025, Table 3", "")


def test_mape_and_errors_are_computed_from_the_points(results):
    for src in results.values():
        predicted = src.predicted_points
        assert predicted, src.source
        assert src.mape_pct == pytest.approx(statistics.fmean(abs(p.error_pct) for p in predicted))
        for p in predicted:
            assert p.error_pct == pytest.approx((p.predicted_speedup - p.published_speedup) / p.published_speedup * 100)


def test_each_series_is_calibrated_on_its_single_stream_point_only(results):
    for src in results.values():
        for s in src.series:
            fitted = [p for p in s.points if p.role == "calibration"]
            assert all(p.batch == 1 for p in fitted)
            assert len(fitted) <= 1
            for p in fitted:  # a fitted point is reproduced, so it cannot count as evidence
                assert p.error_pct == pytest.approx(0.0, abs=1e-6)
            assert any(p.role == "predicted" for p in s.points)


def test_series_calibrated_from_a_sibling_share_its_engine_and_predict_their_own_batch_one(results):
    tree = next(s for s in results["liu2025"].series if s.series == "sglang-qwen3-8b-gsm8k-tree21")
    assert tree.points[0].role == "predicted" and "calibrated on sglang-qwen3-8b-gsm8k-chain" in tree.calibration


def test_goal_holds_for_liu2025(results):
    """Holds today: MAPE <= 15% and every trend right on 19 series of Liu et al. 2025 (vLLM and SGLang, H100)."""
    src = results["liu2025"]
    assert src.mape_pct <= GOAL_MAPE_PCT
    assert src.trends_right == len(src.series)
    assert src.goal_met


def test_zzsf11_meets_the_mape_goal_but_not_every_trend(results):
    """Partly holds: MAPE <= 15% on the Qwen3-30B-A3B reports, but the two-point TP2 chain series rises 10% from
    batch 1 to 4 where the model predicts about 1% (flat): the goal is not met for this source, and says so."""
    src = results["zzsf11"]
    assert src.mape_pct <= GOAL_MAPE_PCT
    assert not src.goal_met
    summary = {row["source"]: row for row in validation_summary(list(results.values()))}
    assert summary["zzsf11"]["goal_met"] is False and summary["liu2025"]["goal_met"] is True


def test_tables_are_plain_rows():
    rows = validation_points(validate())
    assert {"source", "series", "batch", "published_speedup", "predicted_speedup", "error_pct", "role"} <= set(rows[0])
    assert {r["role"] for r in rows} == {"calibration", "predicted"}


@pytest.mark.parametrize("values, expected", [([1.8, 1.7, 1.2], "falls"), ([0.8, 0.9], "rises"),
                                              ([1.0, 1.04, 0.98], "flat")])
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
    with pytest.raises(PerfModelError, match=message):
        load_dataset(path)
