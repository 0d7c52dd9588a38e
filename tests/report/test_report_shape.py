"""REPORT.md's shape on a real run, without rerunning it: the sidecars of the run committed in
``reports-evidence/cpu.json`` (the last cold ``make run``), the cost model's evidence as the code computes it now (with
that run's own check of the model), and the incident's facts as the package states them. The summary is five bottom
lines in at most 250 words, REPORT.md at most 3,000 words, the long tables in the appendices, every number in every
document sourced, tagged and bound, and the run's speed verdicts drawn from intervals."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from eagle3lab.paths import REPO_ROOT
from eagle3lab.report import build, incident, provenance, summary
from eagle3lab.report.build import ReportSources
from eagle3lab.report.sentences import RULES
from eagle3lab.sidecars import CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar

COMMITTED = REPO_ROOT / "reports-evidence" / "cpu.json"


@pytest.fixture(scope="module")
def committed_tree() -> dict:
    return json.loads(COMMITTED.read_text(encoding="utf-8"))["tree"]


@pytest.fixture
def run(committed_tree, evidence) -> ReportSources:
    model = copy.deepcopy(evidence)
    model.run_check = committed_tree["model"].get("run_check")  # that run's own check of the model
    model.run_check_missing = committed_tree["model"].get("run_check_missing")
    t = committed_tree
    return ReportSources(profile="cpu", generated=t["generated"], environment=t["environment"],
                         crash=CrashReproSidecar.model_validate(t["crash"]),
                         trace=InterfaceTraceSidecar.model_validate(t["trace"]),
                         patch=PatchBenchSidecar.model_validate(t["patch"]), model=model,
                         incident=incident.facts(), figures=t["figures"], rendered_by="0123abc")


@pytest.fixture
def documents(run) -> dict[str, str]:
    return build.render_documents(run)[0]


def bullets(text: str) -> list[str]:
    block = text.split("## Summary\n", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("- ")]


def test_the_summary_is_five_bottom_lines_in_at_most_250_words(documents):
    lines = bullets(documents[build.REPORT_MD])
    words = sum(summary.words(line) for line in lines)
    print(f"summary: {len(lines)} bullets, {words} words")  # the count, for the note
    assert len(lines) == summary.BULLETS and words <= summary.MAX_WORDS
    leads = [line.split("**")[1] for line in lines]
    assert leads[0] == "What broke:" and leads[1] == "The fix:" and leads[-1] == "What to do, in order:"
    assert leads[2].startswith("Would EAGLE-3 pay on the incident's deployment")
    assert leads[3].startswith("Did it pay on this run")
    todo = lines[-1]
    for command in ("preflight-model", "bench", "doctor", "predict"):  # named, in the order a user needs them
        assert f"`eagle3lab {command}`" in todo
    assert [todo.index(f"`eagle3lab {c}`") for c in ("preflight-model", "bench", "doctor", "predict")] == \
        sorted(todo.index(f"`eagle3lab {c}`") for c in ("preflight-model", "bench", "doctor", "predict"))


def test_report_md_is_at_most_3000_words_and_the_long_tables_are_appendices(documents):
    text = documents[build.REPORT_MD]
    print(f"REPORT.md: {summary.words(text)} words; appendices: "
          + ", ".join(f"{name} {summary.words(t)}" for name, t in documents.items() if name != build.REPORT_MD))
    assert summary.words(text) <= build.MAX_WORDS
    appendix = {a.name: documents[a.path] for a in build.APPENDICES}
    moved = {"| obstacle | change | where | kind | servers | what |": "benchmark",  # the CPU harness's shims
             "| cause | applies | threshold | evidence |": "diagnostics",  # every rule
             "## The audit of every registered entry class": "audit",
             "| source | EAGLE series | acceptance | kind |": "public-evidence",  # the other drafters
             "| group | what it is | points | MAPE % |": "validation",  # the full validation tables
             "| assumption changed | context (tokens) |": "cost-model"}  # the sensitivity table
    for marker, name in moved.items():
        assert marker not in text and marker in appendix[name], marker
    for a in build.APPENDICES:
        assert f"]({a.path})" in text  # each linked from REPORT.md
    headings = re.findall(r"^## (\d)\. (.*)$", text, re.MULTILINE)
    assert [n for n, _ in headings] == [str(i) for i in range(1, len(headings) + 1)]
    assert all(title.endswith("?") for _, title in headings)  # each section answers one question


def test_every_number_of_every_document_is_sourced_tagged_and_bound(run):
    documents, binder = build.render_documents(run)
    evidence, structural = run.evidence(), run.structural()
    for name, text in documents.items():
        assert [(t.text, t.line) for t in provenance.unsourced_numbers(text, evidence, structural)] == [], name
        assert [(b.first_line, b.text[:60]) for b in provenance.untagged_blocks(text, structural)] == [], name
    assert provenance.broken_sentences(build.joined(documents), binder.sentences, run.tree(), RULES) == []


def test_this_runs_verdicts_come_from_the_interleaved_intervals_not_the_sweeps_draws(run, documents):
    line = bullets(documents[build.REPORT_MD])[3]
    points = {p.concurrency: p for p in run.patch.interleaved_sweep}
    for p in points.values():
        assert f"{p.speedup:.2f}x" in line and f"{p.speedup_low:.2f}-{p.speedup_high:.2f}" in line
    from eagle3lab.report.run_speed import verdicts_text

    tree_points = [p.model_dump() for p in run.patch.interleaved_sweep]
    assert line.split("**", 2)[2].lstrip().startswith(verdicts_text(tree_points))  # the verdict leads the line
    for record in run.patch.speedup:  # the sweep's single draws are not in the summary
        if not any(f"{record['speedup']:.2f}x" == f"{p.speedup:.2f}x" for p in points.values()):
            assert f"{record['speedup']:.2f}x" not in line
    # the verdict follows each interval, whatever this run measured: one interval holding 1 is "not resolved"
    held = copy.deepcopy(tree_points)
    for p, (low, high) in zip(held, [(1.10, 1.60), (0.96, 1.39), (1.02, 1.71)]):
        p["speedup_low"], p["speedup_high"] = low, high
    concurrencies = [str(p["concurrency"]) for p in held]
    assert verdicts_text(held) == (f"Faster at concurrency {concurrencies[0]} and {concurrencies[2]}, "
                                   f"not resolved at {concurrencies[1]}")
    held[1]["speedup_low"] = 1.02
    assert verdicts_text(held) == f"Faster at concurrency {', '.join(concurrencies[:2])} and {concurrencies[2]}"
    held[1]["speedup_low"], held[1]["speedup_high"] = 0.80, 0.95
    assert f"slower at {concurrencies[1]}" in verdicts_text(held)


def test_the_launches_are_compared_on_the_prompts_both_measured(run, documents):
    text = documents[build.REPORT_MD]
    rows = {r["concurrency"]: r for r in run.derived()["run_speed"]["common_prompts"]}
    first = rows[1]
    assert first["prompts"] == 16 and first["rounds"] == 2 and first["interleaved_prompts"] == 48
    assert f"| 1 | 16 | {first['sequential_speedup']:.2f}x | {first['interleaved_speedup_common']:.2f}x (rounds 1-2) |" \
        in text
    # the same greedy prompts give the same acceptance in both launches: the prompts are indeed the same
    assert first["interleaved_accept_common"] == pytest.approx(first["sequential_accept"], abs=0.01)
    # the sentence follows this run's spread at concurrency 1, whichever side of the 10% rule it fell
    if first["apart_common_pct"] <= 10:
        assert "agree within the project's 10% rule at concurrency 1" in text
    else:
        assert re.search(r"differ (beyond it|by more than the project's 10% rule) at (concurrency )?1\b", text)


def test_each_rounds_acceptance_stands_beside_its_speedups(run, documents):
    text = documents[build.REPORT_MD]
    first = run.patch.interleaved_sweep[0]
    row = f"| 1 | 8 | {first.round_accept_lengths[0]:.2f} | " + " | ".join(
        f"{p.round_speedups[0]:.2f}x" for p in run.patch.interleaved_sweep) + " |"
    assert row in text


def test_the_small_findings_stay_mended(documents, run):
    text = documents[build.REPORT_MD]
    everything = build.joined(documents)
    # no generated file a reader of the repository cannot open: not in REPORT.md, nor in any template (the committed
    # run's own calibration strings still name one; the code that writes them names notebook 03's timers now)
    assert "artifacts/" not in text
    templates = Path(build.__file__).parent / "templates"
    assert not [p.name for p in templates.rglob("*.jinja") if "artifacts/" in p.read_text()]
    assert not re.search(r"\|\s*None\s*\|", everything)  # no Python None in a table
    crash = run.crash.crash
    assert re.search(rf"\b{crash.peak_pss_bytes / 2**30:.2f} GiB PSS", text) and "summed RSS" in text
    assert "0.0 s" not in everything  # a bisect read from the release record has no time of its own
    assert f"from the run at commit\n`{run.environment['git revision']}`, by the code at commit `0123abc`" in text
    cpu_row = next(line for line in text.splitlines() if line.startswith("| cpu | `srt/model_executor/model_runner.py:622`"))
    assert "`--disable-cuda-graph`" in cpu_row
    assert "plain step ms (timers)" in documents["docs/report/benchmark.md"]  # one name per measurement


def test_the_incident_answer_states_the_peak_matching_context(run, documents):
    match = run.model.incident["context_matching_reported_peak"]
    line = bullets(documents[build.REPORT_MD])[2]
    assert (f"{match['context_len']:,.0f}-token context that reproduces the engineer's "
            f"{match['reported_peak_tok_s']:,.0f} tok/s peak") in line
    assert summary.reach_verdict(match["predicted"]) in line
    one = run.incident["evidence"]["one_stream"]["cell"]["speedup"]
    assert f"{one:.2f}x at one stream" in line


def test_the_overlap_scheduler_asymmetry_is_said_uncontrolled_or_measured_as_the_run_did(run):
    from eagle3lab.bench import interleave, launch_spread

    def overlap_line(sources: ReportSources) -> str:
        text = build.render_documents(sources)[0][build.REPORT_MD]
        return next(line for line in text.splitlines() if line.startswith("The arms do not run the same scheduler"))

    first = run.patch.interleaved_sweep[0]
    measured = [v for v in run.patch.interleaved_variants if v.role == "overlap_control"]
    if not measured:  # a run without the control says so; one with it states what the control measured
        assert "These rounds do not control for it" in overlap_line(run)
    else:
        assert "These rounds do not control for it" not in overlap_line(run)
        assert "over that baseline EAGLE-3's speedup is" in overlap_line(run)
    uncontrolled = copy.deepcopy(run)
    uncontrolled.patch.interleaved_variants = [v for v in run.patch.interleaved_variants if v.role != "overlap_control"]
    assert "These rounds do not control for it" in overlap_line(uncontrolled)
    run.patch.interleaved_variants = list(uncontrolled.patch.interleaved_variants)
    # a baseline without the scheduler in the same rounds, 10% slower in each: the asymmetry resolved
    slower = [[tokens, seconds * 1.1] for tokens, seconds in first.round_baseline]
    fields = launch_spread._interval_fields(first.round_baseline, slower)
    control = first.model_copy(update={"role": "overlap_control", "eagle3_arm": "baseline-no-overlap-launch2-c1",
                                       "eagle3_tok_s": first.baseline_tok_s / 1.1, "speedup": 1 / 1.1, **fields})
    run.patch.interleaved_variants = [*run.patch.interleaved_variants, control]
    line = overlap_line(run)
    assert f"ran at {1 / 1.1:.3f} times the default baseline's rate" in line
    assert "the scheduler makes sglang's default baseline faster, so it narrows EAGLE-3's speedup here" in line
    same = interleave.pooled_rate(first.round_eagle3) / interleave.pooled_rate(slower)
    assert f"over that baseline EAGLE-3's speedup is {same:.2f}x" in line and f"against {first.speedup:.2f}x" in line
    documents, binder = build.render_documents(run)
    assert provenance.broken_sentences(build.joined(documents), binder.sentences, run.tree(), RULES) == []
    evidence, structural = run.evidence(), run.structural()
    assert provenance.unsourced_numbers(documents[build.REPORT_MD], evidence, structural) == []
    assert provenance.untagged_blocks(documents[build.REPORT_MD], structural) == []
