"""The model's validation in REPORT.md: the protocol's out-of-sample MAPE is the headline, beside its naive baselines,
with a verdict computed from the number; development fit and shape-only groups are labelled as fit quality; every
number is the evidence's own (``ModelEvidence.validation_protocol``), so changing the evidence changes the text."""

from __future__ import annotations

import copy

import pytest

from test_build import crash_sidecar, patch_sidecar, trace_sidecar  # the typed sidecars the report tests build
from eagle3lab.costmodel import validation
from eagle3lab.report import build, incident, provenance, sentences, validation_section
from eagle3lab.report.build import ReportSources, render


@pytest.fixture
def sources(evidence) -> ReportSources:
    return ReportSources(profile="cpu", generated="2026-11-30", environment=crash_sidecar().environment,
                         crash=crash_sidecar(), trace=trace_sidecar(), patch=patch_sidecar(),
                         model=copy.deepcopy(evidence), incident=incident.facts(), figures=[])


def section(text: str) -> str:
    return text[text.index("### How far to trust the model"):text.index("### The model against this run")]


def appendix(text: str) -> str:
    return text[text.index("## Appendix: the model's validation"):text.index("## Reproduce")]


def headline(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("**Out of sample:**"))


def cells(text: str, first: str) -> list[str]:
    """The cells of the table row whose first cell is ``first``."""
    row = next(line for line in text.splitlines() if line.startswith(f"| {first} |"))
    return [c.strip() for c in row.strip().strip("|").split("|")]


def held_out(protocol: dict) -> dict:
    return next(g for g in protocol["groups"] if g["role"] == validation.OUT_OF_SAMPLE)


def verdict_of(protocol: dict) -> str:
    return "met" if protocol["out_of_sample_mape_pct"] <= protocol["target_mape_pct"] else "not met"


def unsourced_and_untagged(text: str, sources: ReportSources) -> tuple[list[str], list[int]]:
    return ([t.text for t in provenance.unsourced_numbers(text, sources.evidence(), sources.structural())],
            [b.first_line for b in provenance.untagged_blocks(text, sources.structural())])


def test_the_evidence_carries_the_protocol_as_validation_report_computes_it(evidence):
    protocol = evidence.validation_protocol
    assert protocol["groups"] == validation.validation_report()["groups"]
    assert protocol["out_of_sample_mape_pct"] == held_out(protocol)["mape_pct"]
    assert protocol["target_mape_pct"] == validation.GOAL_MAPE_PCT


def test_the_section_shows_the_out_of_sample_group_and_its_naive_baseline(sources):
    protocol = sources.model.validation_protocol
    held = held_out(protocol)
    naive = held["naive_free_cycle"]
    assert naive, "the held-out points publish their acceptance, so the free-cycle baseline is defined"
    text = section(render(sources))
    row = cells(text, held["group"])
    assert row[1:4] == ["out of sample", str(held["points"]), f"{held['mape_pct']:.1f}"]
    assert row[5] == f"{naive['mape_pct']:.1f} ({naive['points']})"
    line = headline(text)
    assert f"MAPE {held['mape_pct']:.1f}% over {held['points']} points" in line
    assert f"against the goal of at most {protocol['target_mape_pct']:g}%: **{verdict_of(protocol)}**." in line
    assert f"'free cycle' {naive['mape_pct']:.1f}% over {naive['points']} points" in line
    assert all(name in line for name in protocol["protocol"]["held_out"])
    frozen = protocol["frozen"]
    assert f"frozen {frozen['date']} on {', '.join(frozen['fitted_on'])}" in text
    assert f"Split recorded {protocol['protocol']['split_recorded']}" in text
    for engine, values in frozen["engines"].items():
        assert f"{engine}: {values['spec_cycle_extra_s'] * 1e3:.2f} ms per EAGLE cycle" in text


@pytest.mark.parametrize("mape, target, verdict", [(9.5, 15.0, "met"), (15.0, 15.0, "met"), (15.04, 15.0, "not met"),
                                                   (41.7, 50.0, "met"), (None, 15.0, "not evaluated")])
def test_the_verdict_follows_the_number_in_a_fed_summary(sources, mape, target, verdict):
    protocol = sources.model.validation_protocol
    protocol["out_of_sample_mape_pct"], protocol["target_mape_pct"] = mape, target
    held_out(protocol)["mape_pct"] = mape
    text, binder = build.render_bound(sources)
    assert f": **{verdict}" in headline(text)
    assert f"MAPE {'n/a' if mape is None else f'{mape:.1f}%'} over" in headline(text)
    trust = next(line for line in text.splitlines() if line.startswith("- How far to trust"))
    first = f"on the first set of held-out sources (constants frozen {protocol['frozen']['date']}) MAPE "
    assert f"{first}{'n/a' if mape is None else f'{mape:.1f}%'} over {protocol['out_of_sample_points']} points: " \
        f"{verdict}" in trust and f"(goal: at most {target:g}%)" in trust
    assert provenance.broken_sentences(text, binder.sentences, sources.tree(), sentences.RULES) == []
    assert unsourced_and_untagged(text, sources) == ([], [])


def test_changing_the_goal_flips_the_verdict(sources, monkeypatch):
    """The goal is a constant of the costmodel; the report's verdict is computed against whatever it is."""
    mape = sources.model.validation_protocol["out_of_sample_mape_pct"]
    for goal, verdict in ((mape + 1.0, "met"), (mape - 1.0, "not met")):
        monkeypatch.setattr(validation.schema, "GOAL_MAPE_PCT", goal)
        sources.model.validation_protocol = validation.validation_report()
        assert sources.model.validation_protocol["target_met"] == (verdict == "met")
        assert f"at most {goal:g}%: **{verdict}**." in headline(render(sources))


def test_an_edited_verdict_or_a_changed_number_breaks_its_sentences(sources):
    text, binder = build.render_bound(sources)
    protocol = sources.model.validation_protocol
    said, other = verdict_of(protocol), "met" if verdict_of(protocol) == "not met" else "not met"
    first = headline(text)
    tampered = text.replace(first, first.replace(f": **{said}**.", f": **{other}**."))
    assert provenance.broken_sentences(tampered, binder.sentences, sources.tree(), sentences.RULES) == \
        ["model.validation.out_of_sample"]
    tree = copy.deepcopy(sources.tree())
    tree["model"]["validation_protocol"]["out_of_sample_mape_pct"] += 1.0
    assert sorted(provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)) == \
        ["model.validation.out_of_sample", "summary.trust"]
    tree = copy.deepcopy(sources.tree())
    tree["model"]["validation_protocol"]["frozen"]["date"] = "2030-01-01"
    assert sorted(provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)) == \
        ["model.validation.frozen", "summary.trust"]


def test_fit_quality_and_shape_only_groups_are_not_called_validation(sources):
    protocol = sources.model.validation_protocol
    text = section(render(sources))
    roles = {g["group"]: cells(text, g["group"])[1] for g in protocol["groups"]}
    for g in protocol["groups"]:
        expected = (validation.SHAPE_ONLY_ROLE if g["acceptance"] == validation.SHAPE_ONLY else
                    validation.OUT_OF_SAMPLE_ROLES.get(g["split"], validation.FIT_QUALITY))
        if expected == validation.FIT_QUALITY and "first freeze" in g["group"]:
            expected = validation.FIT_QUALITY_FIRST  # the superseded constants' fit quality: still not a validation
        assert roles[g["group"]] == expected
    assert sum(role == validation.SHAPE_ONLY_ROLE for role in roles.values()) >= 1
    assert list(roles.values()).count(validation.OUT_OF_SAMPLE) == 1
    shape = next(g for g in protocol["groups"] if g["role"] == validation.SHAPE_ONLY_ROLE)
    assert f"{shape['mape_pct']:.1f}%" not in headline(text)  # the shape-only fit is never the headline


def test_a_changed_group_number_changes_the_table(sources):
    before = section(render(sources))
    held = held_out(sources.model.validation_protocol)
    held["naive_free_cycle"] = {"points": held["points"], "mape_pct": 77.777}
    after = section(render(sources))
    assert f"77.8 ({held['points']})" in after and "77.8" not in before
    assert "'free cycle' 77.8%" in headline(after)


def test_without_a_held_out_group_the_report_has_no_out_of_sample_figure(sources):
    protocol = sources.model.validation_protocol
    protocol["groups"] = [g for g in protocol["groups"] if g["role"] != validation.OUT_OF_SAMPLE]
    text = render(sources)
    assert "**Out of sample:**" not in text and "No held-out source was evaluated" in text
    assert "no held-out source was evaluated" in next(l for l in text.splitlines() if l.startswith("- How far"))


def test_step_sweeps_set_the_measured_peak_beside_the_modelled_one(sources):
    sweeps = sources.model.validation_protocol["step_sweeps"]
    assert sweeps, "the dataset holds a published sweep of draft steps"
    text = section(render(sources))
    for s in sweeps:
        row = cells(text, f"{s['source']} | {s['series']}")
        assert row[2:4] == [str(s["batch"]), " / ".join(str(n) for n in s["num_steps"])]
        assert row[4] == " / ".join(f"{v:.2f}" for v in s["published_speedup"])
        assert row[6:8] == [str(s["published_best_steps"]), str(s["predicted_best_steps"])]


def test_the_appendix_shows_each_source_with_its_split_and_request_cap(sources):
    protocol = sources.model.validation_protocol
    text = appendix(render(sources))
    for r in protocol["sources"]:
        row = cells(text, f"[{r['source']}]({r['url']})")
        assert row[1] == r["split"].replace("_", " ") and row[4] == f"{r['mape_pct']:.1f}"
        assert row[-1] == r["capped_running_requests"].replace("|", "/")
    assert "goal met" not in text  # the goal is the out-of-sample figure's, not each source's


# ------------------------------------------------------------------------------------------------ later sets
def later(text: str, split: str) -> str:
    name = validation_section.set_names(split)
    return next(line for line in text.splitlines() if line.startswith(f"**Out of sample, {name}:**"))


def test_each_later_held_out_set_has_its_own_headline_shown_like_the_first(sources):
    """The second and third sets: each its own MAPE over its own points, its verdict against the goal, the naive
    baselines on those points and the date its constants were frozen; the first set's headline is unchanged."""
    protocol = sources.model.validation_protocol
    text = render(sources)
    sets = {s["split"]: s for s in protocol["out_of_sample_sets"]}
    assert set(sets) == {"held_out", "held_out_2", "held_out_3"}
    for split in ("held_out_2", "held_out_3"):
        s = sets[split]
        group = next(g for g in protocol["groups"] if g["role"] == s["role"])
        line = later(text, split)
        verdict = "met" if s["mape_pct"] <= protocol["target_mape_pct"] else "not met"
        assert f"MAPE {s['mape_pct']:.1f}% over {s['points']} points" in line
        where = validation_section.conditions(s["hardware"], s["tp"], s["batches"])
        assert f"at most {protocol['target_mape_pct']:g}%: **{verdict}**, on points measured at {where}." in line
        assert validation_section.naive_text(group) in line and s["constants_frozen"] in line
        assert all(name in line for name in s["sources"])
        row = cells(section(text), group["group"])
        assert row[1:4] == [s["role"], str(s["points"]), f"{s['mape_pct']:.1f}"]
    assert f"MAPE {protocol['out_of_sample_mape_pct']:.1f}% over {protocol['out_of_sample_points']} points" in \
        headline(text)
    second = protocol["frozen_2"]
    assert f"frozen {second['date']} on {', '.join(second['fitted_on'])}" in text
    assert validation_section.frozen_constants(second["engines"]) in text


def test_the_third_set_verdict_follows_its_own_number_and_the_goal(sources, monkeypatch):
    protocol = sources.model.validation_protocol
    third = next(s for s in protocol["out_of_sample_sets"] if s["split"] == "held_out_3")
    for goal, verdict in ((third["mape_pct"] + 1.0, "met"), (third["mape_pct"] - 1.0, "not met")):
        monkeypatch.setattr(validation.schema, "GOAL_MAPE_PCT", goal)
        sources.model.validation_protocol = validation.validation_report()
        new = next(s for s in sources.model.validation_protocol["out_of_sample_sets"] if s["split"] == "held_out_3")
        assert new["target_met"] == (verdict == "met")
        assert f"at most {goal:g}%: **{verdict}**, on points measured at" in later(render(sources), "held_out_3")


def test_a_changed_third_set_number_breaks_only_its_own_sentence(sources):
    text, binder = build.render_bound(sources)
    assert unsourced_and_untagged(text, sources) == ([], [])
    tree = copy.deepcopy(sources.tree())
    i = next(i for i, s in enumerate(tree["model"]["validation_protocol"]["out_of_sample_sets"])
             if s["split"] == "held_out_3")
    tree["model"]["validation_protocol"]["out_of_sample_sets"][i]["mape_pct"] += 1.0
    # its headline in section 6 and the summary's trust line, which names each set's MAPE; nothing else
    assert sorted(provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)) == \
        ["model.validation.out_of_sample.held_out_3", "summary.trust"]


def test_the_summary_leads_with_the_set_evaluated_with_the_constants_in_use_and_where_its_points_were_measured(
        sources):
    """The trust line's first verdict is the held-out set the current constants were evaluated on, with the
    hardware, TP and batch sizes its points come from; sets evaluated with superseded constants follow, named so."""
    protocol = sources.model.validation_protocol
    sets = protocol["out_of_sample_sets"]
    (current,) = [s for s in sets if s["current"]]
    assert current["constants"] == "frozen_2" and current["constants_frozen"] == protocol["frozen_2"]["date"]
    data = validation.load_dataset()
    series = [(src, x) for src in data.sources if src.split == current["split"] for x in src.series]
    assert current["hardware"] == sorted({src.hardware for src, _ in series})
    assert current["batches"] == sorted({b for _, x in series for b in x.batches})
    trust = next(line for line in render(sources).splitlines() if line.startswith("- How far to trust"))
    lead = trust.index("with the constants it predicts with now")
    verdict = "met" if current["mape_pct"] <= protocol["target_mape_pct"] else "not met"
    mine = trust.index(f"MAPE {current['mape_pct']:.1f}% over {current['points']} points: {verdict}")
    where = validation_section.conditions(current["hardware"], current["tp"], current["batches"])
    superseded = trust.index("with constants since superseded")
    assert lead < mine < trust.index(where) < superseded
    for s in (s for s in sets if not s["current"]):
        assert trust.index(f"(constants frozen {s['constants_frozen']}) MAPE {s['mape_pct']:.1f}%") > superseded
