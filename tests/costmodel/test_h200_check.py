"""The raw-PyTorch H200 measurements against the model's terms (measured once, data/measured/h200_cycle_parts.json):
checks of physics, labelled as measured, never fitted."""

from __future__ import annotations

import pytest

from eagle3lab.costmodel.h200_check import LABEL, h200_report


def test_the_measurement_says_where_it_comes_from():
    r = h200_report()
    assert r["kind"] == LABEL and r["provenance"]["label"] == "raw PyTorch, H200" and "H200" in r["gpu"]


def test_uniform_routing_predicts_the_experts_random_routing_touched():
    for m in h200_report()["moe"]:
        for row in m["rows"]:
            assert row["distinct_expected"] == pytest.approx(row["distinct_measured"], rel=0.12), (m["name"], row)


def test_an_expert_layer_costs_a_fixed_time_plus_a_time_per_distinct_expert():
    for m in h200_report()["moe"]:
        assert m["seconds_per_expert"] > 0 and m["fixed_seconds_per_layer"] > 0
        assert m["worst_linear_residual"] < 0.15, m["name"]
        # the bandwidth the expert bytes reached is below the model's assumed fraction: said, not hidden
        assert m["achieved_fraction_of_datasheet"] < m["model_fraction_of_datasheet"]


def test_the_drafter_pass_is_within_a_fifth_of_the_uncalibrated_model():
    rows = h200_report()["drafter"]
    assert rows and all(0.8 < r["ratio"] < 1.25 for r in rows), rows
