"""Notebook 03's validation view: the same protocol, sentences and rows as REPORT.md, with the verdict computed from
the out-of-sample MAPE (``notebook.model_validation``)."""

from __future__ import annotations

import copy

import pytest

from eagle3lab.costmodel import validation
from eagle3lab.notebook import model_validation, show
from eagle3lab.report import validation_section


@pytest.fixture(scope="module")
def protocol() -> dict:
    """The real protocol, computed once."""
    return validation.validation_report()


@pytest.fixture(scope="module")
def context_rows() -> list[dict]:
    return validation.context_sensitivity()


def with_mape(protocol: dict, mape) -> dict:
    changed = copy.deepcopy(protocol)
    changed["out_of_sample_mape_pct"] = mape
    return changed


def test_the_view_is_validation_report_rendered_by_the_report_section(protocol, context_rows):
    view = model_validation.protocol_view()
    assert view.protocol == protocol
    assert view.groups == validation_section.group_rows(protocol)
    assert view.sources == validation_section.source_rows(protocol)
    assert view.sweeps == validation_section.sweep_rows(protocol)
    assert [row["source"] for row in view.context] == [row["source"] for row in context_rows]
    assert {row["role"] for row in view.groups} >= {validation.OUT_OF_SAMPLE, validation.FIT_QUALITY,
                                                    validation.SHAPE_ONLY_ROLE}


def test_the_headline_carries_the_out_of_sample_mape_naive_baselines_and_frozen_constants(protocol, context_rows):
    view = model_validation.protocol_view(protocol, context_rows)
    held = next(g for g in protocol["groups"] if g["role"] == validation.OUT_OF_SAMPLE)
    text = view.markdown()
    assert view.headline in text and view.frozen in text
    assert validation_section.mape_text(protocol["out_of_sample_mape_pct"]) in view.headline
    assert validation_section.naive_text(held) in view.headline
    assert f"**{view.verdict}**" in view.headline
    assert protocol["frozen"]["date"] in view.frozen
    assert validation_section.frozen_constants(protocol["frozen"]["engines"]) in view.frozen


@pytest.mark.parametrize("offset, verdict", [(-0.1, "met"), (0.0, "met"), (0.1, "not met")])
def test_the_verdict_is_computed_from_the_mape_against_the_goal(protocol, context_rows, offset, verdict):
    mape = protocol["target_mape_pct"] + offset
    view = model_validation.protocol_view(with_mape(protocol, mape), context_rows)
    assert view.verdict == verdict
    assert f"**{verdict}**" in view.headline and validation_section.mape_text(mape) in view.headline


def test_no_held_out_point_says_so_instead_of_a_headline(protocol, context_rows):
    bare = copy.deepcopy(protocol)
    bare["groups"] = [g for g in bare["groups"] if g["role"] != validation.OUT_OF_SAMPLE]
    bare["out_of_sample_mape_pct"] = None
    view = model_validation.protocol_view(bare, context_rows)
    assert view.headline is None and view.verdict.startswith("not evaluated")
    assert "no out-of-sample figure" in view.markdown()


def test_the_view_shows_each_later_held_out_set_like_the_report(protocol, context_rows):
    """The second and third sets each get the report's own headline sentence (MAPE over their own points, verdict
    against the goal, naive baselines), and the revised constants are shown with their date; never merged."""
    view = model_validation.protocol_view(protocol, context_rows)
    text = view.markdown()
    splits = [s["split"] for s in protocol["out_of_sample_sets"] if s["split"] != "held_out"]
    assert len(view.later_headlines) == len(splits) == 2
    for split, line in zip(splits, view.later_headlines):
        s = next(x for x in protocol["out_of_sample_sets"] if x["split"] == split)
        group = next(g for g in protocol["groups"] if g["role"] == s["role"])
        assert line in text and validation_section.mape_text(s["mape_pct"]) in line
        verdict = validation_section.goal_verdict(s["mape_pct"], protocol["target_mape_pct"])
        assert f"**{verdict}**" in line and validation_section.naive_text(group) in line
    assert view.frozen_2 in text and protocol["frozen_2"]["date"] in view.frozen_2
    assert view.evaluation_note and view.evaluation_note in text


def test_show_markdown_renders_the_text():
    assert show.markdown("**a**").data == "**a**"
