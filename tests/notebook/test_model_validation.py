"""Notebook 03's validation view: the same protocol, sentences and rows as REPORT.md (``notebook.model_validation``),
with the verdict computed from the sealed set's MAPE and the earlier sets shown as not demonstrably held out."""

from __future__ import annotations

import copy

import pytest

from eagle3lab.costmodel import validation
from eagle3lab.costmodel.evaluation import current_frozen, protocol_report
from eagle3lab.notebook import model_validation, show
from eagle3lab.report import validation_section


@pytest.fixture(scope="module")
def protocol() -> dict:
    """The real protocol, computed once."""
    return protocol_report()


@pytest.fixture(scope="module")
def context_rows() -> list[dict]:
    return validation.context_sensitivity(frozen=current_frozen())


def with_sealed(protocol: dict, mape: float) -> dict:
    changed = copy.deepcopy(protocol)
    changed["sealed"] = {"evaluated": True, "sources": ["https://example.org/a"], "sealed_commit": "2a91501",
                         "constants_commit": "abc1234", "constants": "frozen_3", "mape_pct": mape, "points": 7,
                         "target_mape_pct": 20.0, "below_every_baseline": True,
                         "baselines_mape_pct": {"no_gain": 30.0, "constant_speedup": 25.0, "accept_over_cycle": 22.0}}
    return changed


def test_the_view_is_the_protocol_rendered_by_the_report_section(protocol, context_rows):
    view = model_validation.protocol_view(protocol, context_rows)
    assert view.groups == validation_section.group_rows(protocol)
    assert view.sources == validation_section.source_rows(protocol)
    assert [row["source"] for row in view.context] == [row["source"] for row in context_rows]
    assert {row["role"] for row in view.groups} <= {validation.SEEN_ROLE, validation.SHAPE_ONLY_ROLE}


def test_without_a_sealed_evaluation_the_view_says_so(protocol, context_rows):
    view = model_validation.protocol_view({**protocol, "sealed": {"evaluated": False}}, context_rows)
    assert view.headline is None and view.verdict.startswith("not evaluated")
    assert "No sealed set has been evaluated yet" in view.markdown()


@pytest.mark.parametrize("mape, verdict", [(19.9, "met"), (20.0, "met"), (20.1, "not met")])
def test_the_verdict_is_computed_from_the_sealed_mape_against_its_goal(protocol, context_rows, mape, verdict):
    view = model_validation.protocol_view(with_sealed(protocol, mape), context_rows)
    assert view.verdict == verdict and f"**{verdict}**" in view.headline
    assert validation_section.mape_text(mape) in view.headline and view.headline in view.markdown()


def test_the_earlier_sets_are_shown_as_not_demonstrably_held_out(protocol, context_rows):
    view = model_validation.protocol_view(protocol, context_rows)
    assert len(view.later_headlines) == len(protocol["past_evaluations"]) == 3
    for past, line in zip(protocol["past_evaluations"], view.later_headlines):
        assert "not demonstrably held out" in line and f"{past['mape_pct']:.1f}%" in line
        assert line in view.markdown()
    assert view.frozen_2 and "Superseded constants" in view.frozen_2


def test_show_markdown_renders_the_text():
    assert show.markdown("**a**").data == "**a**"
