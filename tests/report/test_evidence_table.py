"""The incident's evidence table: every rtx6kpro cell of the named sweeps plus the public rows, each with its URL;
the two implications computed from the reference sweep and the incident's reported rates; every printed number
bound to its evidence key, so a changed value breaks its sentence by name."""

from __future__ import annotations

import copy

import pytest

from eagle3lab.report import incident, provenance
from eagle3lab.report.evidence_table import incident_evidence, render


@pytest.fixture(scope="module")
def evidence():
    return incident_evidence(incident.SINGLE_STREAM.value, incident.PEAK.value)


def test_rows_hold_every_sweep_cell_and_each_public_row_with_its_url(evidence):
    rows = evidence["rows"]
    sweep = [r for r in rows if r["key"].startswith("k26-v4-")]
    assert len([r for r in sweep if r["dcp"] == 1]) == 22 and len([r for r in sweep if r["dcp"] == 8]) == 34
    assert all(r["url"].startswith("https://") for r in rows)
    assert {"sglang_pr_19689", "vllm_pr_35966", "trtllm_blog2_dsr1_mtp_b200"} <= {r["key"] for r in rows}
    for r in rows:  # a computed speedup is its two published rates' ratio
        if r["speedup_kind"] == "computed":
            assert r["speedup"] == pytest.approx(r["spec_tok_s"] / r["no_spec_tok_s"], abs=5e-4)


def test_implications_read_the_reference_sweep_and_the_reported_rates(evidence):
    one, peak = evidence["one_stream"], evidence["peak"]
    assert (one["cell"]["context"], one["cell"]["concurrency"], one["cell"]["speedup"]) == ("0", 1, 1.32)
    assert one["implied_tok_s"] == pytest.approx(incident.SINGLE_STREAM.value * 1.32) and one["gains"]
    assert (peak["cell"]["concurrency"], peak["cell"]["no_spec_tok_s"]) == (128, 2222.6)
    assert peak["plain_gap_pct"] == pytest.approx((1 - 2222.6 / incident.PEAK.value) * 100)
    assert peak["about_no_gain"]


def test_every_printed_number_is_bound_and_tagged(evidence):
    tree = {"incident": {"evidence": evidence}}
    b = provenance.Binder(tree)
    text = render(b, evidence)
    assert provenance.broken_sentences(text, b.sentences, tree, b.rules) == []
    assert provenance.unsourced_numbers(text, provenance.Evidence.of(tree)) == []
    assert provenance.untagged_blocks(text) == []
    assert "gains at one stream" in text and "agrees with the public measurement" in text
    changed = copy.deepcopy(tree)
    changed["incident"]["evidence"]["peak"]["cell"]["speedup"] = 1.4
    changed["incident"]["evidence"]["peak"]["about_no_gain"] = False
    assert "evidence-peak" in provenance.broken_sentences(text, b.sentences, changed, b.rules)


def test_the_incident_facts_carry_the_table():
    facts = incident.facts()
    assert facts["evidence"]["one_stream"]["incident_tok_s"] == incident.SINGLE_STREAM.value
