"""The model's validation in REPORT.md (issue 36, item 5): "held out" is said only of the sealed set, whose one
evaluation is the headline beside three naive baselines and names the constants' commit; the first three sets are
records, each shown as not demonstrably held out with its commits and figures as reported then; every seen set is
fit quality under the current constants. Every number is the evidence's own, so changing it changes the text."""

from __future__ import annotations

import copy

import pytest

from test_build import crash_sidecar, patch_sidecar, trace_sidecar  # the typed sidecars the report tests build
from eagle3lab.costmodel import validation
from eagle3lab.report import build, incident, provenance, sentences, validation_section
from eagle3lab.report.build import ReportSources


def render(sources: ReportSources) -> str:
    """REPORT.md and its appendices (the validation's tables are the validation appendix's)."""
    return build.joined(build.render_documents(sources)[0])


def render_bound(sources: ReportSources):
    documents, binder = build.render_documents(sources)
    return build.joined(documents), binder

SEALED = {"evaluated": True, "set": "held_out_4", "sources": ["https://example.org/a", "https://example.org/b"],
          "sealed_commit": "2a91501", "constants_commit": "abc1234", "constants": "frozen_3", "mape_pct": 12.34,
          "points": 7, "target_mape_pct": 20.0, "below_every_baseline": True,
          "baselines_mape_pct": {"no_gain": 30.0, "constant_speedup": 25.0, "accept_over_cycle": 18.0}}


@pytest.fixture
def sources(evidence) -> ReportSources:
    return ReportSources(profile="cpu", generated="2026-11-30", environment=crash_sidecar().environment,
                         crash=crash_sidecar(), trace=trace_sidecar(), patch=patch_sidecar(),
                         model=copy.deepcopy(evidence), incident=incident.facts(), figures=[])


@pytest.fixture
def sealed(sources) -> ReportSources:
    """The same report with a sealed evaluation fed in (the rendering under test, not the figure)."""
    sources.model.validation_protocol["sealed"] = copy.deepcopy(SEALED)
    return sources


def section(text: str) -> str:
    return text[text.index("## The validation protocol"):text.index("## The model against this run")]


def headline(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("**Held out (sealed):**"))


def trust(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("The model's baseline peak is"))


def cells(text: str, first: str) -> list[str]:
    row = next(line for line in text.splitlines() if line.startswith(f"| {first} |"))
    return [c.strip() for c in row.strip().strip("|").split("|")]


def unsourced_and_untagged(text: str, sources: ReportSources) -> tuple[list[str], list[int]]:
    return ([t.text for t in provenance.unsourced_numbers(text, sources.evidence(), sources.structural())],
            [b.first_line for b in provenance.untagged_blocks(text, sources.structural())])


def test_the_evidence_is_the_current_protocol(evidence):
    protocol = evidence.validation_protocol
    assert protocol["current"]["id"] == "frozen_3" and protocol["out_of_sample_sets"] == []
    assert {g["role"] for g in protocol["groups"]} <= {validation.SEEN_ROLE, validation.SHAPE_ONLY_ROLE}
    assert [p["split"] for p in protocol["past_evaluations"]] == ["held_out", "held_out_2", "held_out_3"]
    assert protocol["frozen"]["superseded_by"] == protocol["frozen_2"]["superseded_by"] == "frozen_3"


def test_held_out_is_said_only_of_the_sealed_set(sources):
    text = render(sources)
    sealed = sources.model.validation_protocol["sealed"]  # the stored evaluation, or the seal alone before it
    assert ("**Held out (sealed):**" in text) == sealed["evaluated"]
    assert ("No sealed set has been evaluated yet" in text) == (not sealed["evaluated"])
    assert ("no sealed set evaluated yet" in trust(text)) == (not sealed["evaluated"])
    if sealed["evaluated"]:
        assert f"MAPE {sealed['mape_pct']:.1f}% over {sealed['points']} points" in headline(text)
        verdict = validation_section.sealed_goal_verdict(sealed["mape_pct"], sealed["target_mape_pct"],
                                                         sealed["below_every_baseline"])
        assert f"**{verdict}**" in headline(text)
        assert (verdict == "met") == sealed["target_met"]  # the report agrees with the stored record


def test_the_sealed_goal_is_met_only_below_the_target_and_every_baseline():
    verdict = validation_section.sealed_goal_verdict
    assert verdict(15.0, 20.0, True) == "met"
    assert verdict(15.0, 20.0, False) == "not met"
    assert verdict(21.9, 20.0, True) == "not met"
    assert verdict(None, 20.0, None).startswith("not evaluated")


def test_the_earlier_sets_are_records_not_demonstrably_held_out_with_both_third_set_figures(sources):
    protocol = sources.model.validation_protocol
    text = section(render(sources))
    for past in protocol["past_evaluations"]:
        name = validation_section.set_names(past["split"])
        line = next(t for t in text.splitlines() if t.startswith(f"**The {name}, not demonstrably held out:**"))
        assert f"MAPE {past['mape_pct']:.1f}% over {past['points']} points as reported then" in line
        for commit in (past["constants_commit"], past["recorded_commit"], past["evaluated_commit"]):
            assert commit in line
        assert past["why"] in line
    third = next(t for t in text.splitlines() if t.startswith("**The third set, not demonstrably held out:**"))
    assert "MAPE 13.0% over 105 points" in third and "24.1% with frozen" in third
    assert "416d3c6" in third and "33e7555" in third and "2ffbbc0" in third


def test_the_sealed_headline_names_the_constants_commit_and_sets_three_baselines_beside_it(sealed):
    text, binder = render_bound(sealed)
    line = headline(text)
    assert "MAPE 12.3% over 7 points against the goal (at most 20% and below every naive baseline): **met**" in line
    assert "abc1234" in line and "2a91501" in line and "frozen_3" in line
    assert "no gain (1.0x) 30.0%" in line and "18.0%" in line and "below every one" in line
    assert "held out (sealed before any evaluation; constants of abc1234), MAPE 12.3%" in trust(text)
    assert provenance.broken_sentences(text, binder.sentences, sealed.tree(), sentences.RULES) == []
    assert unsourced_and_untagged(text, sealed) == ([], [])


@pytest.mark.parametrize("mape, verdict, below", [(19.9, "met", True), (20.1, "not met", False),
                                                 (19.9, "not met", False), (20.1, "not met", True)])
def test_the_verdicts_follow_the_numbers(sealed, mape, verdict, below):
    s = sealed.model.validation_protocol["sealed"]
    s["mape_pct"], s["below_every_baseline"] = mape, below
    line = headline(render(sealed))
    assert f"**{verdict}**" in line and ("below every one" if below else "not below every one") in line


def test_a_changed_number_breaks_its_sentences(sealed):
    text, binder = render_bound(sealed)
    tree = copy.deepcopy(sealed.tree())
    tree["model"]["validation_protocol"]["sealed"]["mape_pct"] += 1.0
    assert sorted(provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)) == \
        ["model.trust", "model.validation.sealed"]
    tree = copy.deepcopy(sealed.tree())
    tree["model"]["validation_protocol"]["past_evaluations"][2]["mape_pct"] += 1.0
    assert sorted(provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)) == \
        ["model.trust", "model.validation.past.held_out_3"]


def test_every_group_in_the_table_is_fit_quality_and_the_constants_line_names_the_freeze(sources):
    protocol = sources.model.validation_protocol
    text = section(render(sources))
    for g in protocol["groups"]:
        row = cells(text, g["group"])
        assert row[1] == g["role"] and row[2:4] == [str(g["points"]), f"{g['mape_pct']:.1f}"]
    current = protocol["current"]
    assert f"frozen {current['date']} ({current['id']}, commit {current['commit']})" in text
    assert validation_section.frozen_constants(current["engines"]) in text
    assert "None of these groups is a validation" in text
