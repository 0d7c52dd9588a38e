"""REPORT.md from typed sidecars built here and the cost model's real evidence: every number it prints is one its
sources hold, every number says where it comes from, and the summary and section 6 follow the evidence."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jinja2
import pytest

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel import validation
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS, cpu_environment
from eagle3lab.runtime.cpu_harness.changes import harness_changes
from eagle3lab.report import (build, contexts, evidence_file, incident, model_evidence, provenance,
                             run_check_text, sentences, summary)
from eagle3lab.report import validation_section
from eagle3lab.report.build import ReportSources, render
from eagle3lab.report.sentences import flip_sentence, matching_sentence, peak_verdict, sensitivity_rows
from eagle3lab.sidecars import (CrashReproSidecar, InterfaceTraceSidecar, LaunchSample, LaunchSpreadRecord,
                                PatchBenchSidecar)


# ------------------------------------------------------------------------------------------------ sidecars
def crash_sidecar() -> CrashReproSidecar:
    return CrashReproSidecar(
        profile="cpu", parameters={}, profile_values={"name": "cpu"},
        environment={"sglang": "0.5.9", "machine": "x86_64, 2 cores, 24 GiB", "accelerators": "none"},
        models={"target": "/m/t", "draft": "/m/d"},
        crash={"status": "died", "seconds_to_outcome": 61.37, "peak_rss_bytes": 3_672_199_086,
               "category": "interface_gap",
               "signature": "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
                            "'set_eagle3_layers_to_capture'",
               "call_site": "sglang/srt/model_executor/model_runner.py:622 in initialize", "log": "l"},
        control={"seconds_to_ready": 57.9, "peak_rss_bytes": 3_328_599_654, "generate_seconds": 0.84,
                 "completion_tokens": 16, "completion": "w", "log": "l"})


def _site(where: str, member: str, role: str, access: str) -> dict:
    return {"file": where.split(":")[0], "line": int(where.split(":")[1]), "function": "f", "receiver": "self.model",
            "member": member, "role": role, "access": access, "where": where}


def trace_sidecar(one_method_enough: bool = False) -> InterfaceTraceSidecar:
    raise_site = {"where": "srt/model_executor/model_runner.py:622", "function": "ModelRunner.initialize",
                  "member": "set_eagle3_layers_to_capture", "certain": True, "undecided_branches": []}
    return InterfaceTraceSidecar(
        profile="cpu",
        contract=[_site("srt/model_executor/model_runner.py:622", "set_eagle3_layers_to_capture", "target", "call"),
                  _site("srt/speculative/eagle_worker.py:157", "get_embed_and_head", "target", "call"),
                  _site("srt/speculative/eagle_worker.py:170", "model", "draft", "read"),
                  _site("srt/speculative/eagle_worker.py:171", "load_lm_head_from_target", "draft", "check")],
        verdict={"sglang_version": "0.5.9", "required_members": ["get_embed_and_head", "set_eagle3_layers_to_capture"],
                 "missing_members": ["get_embed_and_head", "set_eagle3_layers_to_capture"],
                 "delegation_gaps": ["get_embed_and_head", "set_eagle3_layers_to_capture"],
                 "one_method_enough": one_method_enough, "first_raise": {"cpu": raise_site},
                 "next_raise_after_one_method": {"cpu": {"where": "srt/speculative/eagle_worker.py:157",
                                                         "function": "EAGLEWorker.__init__",
                                                         "member": "get_embed_and_head"}},
                 "class_report": {"inner_class": "DeepseekV3ForCausalLM"}},
        layer_ids=[{"profile": "cpu", "depth": 4, "aux_layer_ids": [0, 1, 2],
                    "eager_forwards_capture": {"self.model.layers_to_capture": [1, 2, 3]}}],
        bisect={"appeared": "0.5.9", "first_fixed": "0.5.10", "member_gained": {"get_embed_and_head": "0.5.10"}},
        timings={"audit_seconds_one_release": 8.812, "bisect_seconds_warm_cache": 71.3, "bisect_releases": 25})


def patch_sidecar(eagle3_note: str = "EAGLE is not supported on CPU") -> PatchBenchSidecar:
    return PatchBenchSidecar(
        profile="cpu", parameters={"prompt_kind": "ids"},
        profile_values={"bench_input_len": 32, "bench_output_len": 32, "bench_concurrency": [1, 2, 4]},
        models={"target": "/m/t", "draft": "/m/d"}, patch="kimi_k25-eagle3-delegation",
        delegated_members=["get_embed_and_head", "set_eagle3_layers_to_capture"],
        chain=[{"step": "unpatched", "outcome": "died", "category": "interface_gap", "error": "AttributeError: x",
                "call_site": "model_runner.py:622", "seconds": 58.12},
               {"step": "full delegation patch", "outcome": "died", "category": "cpu_limitation",
                "error": "RuntimeError: EAGLE", "call_site": "eagle_worker.py:90", "seconds": 66.4}],
        story=["unpatched: dies asking the wrapper for 'set_eagle3_layers_to_capture'",
               "with the full patch every wrapper hook that ran passed; the server then stops at a CPU limitation"],
        arms=[{"arm": "baseline", "concurrency": 1, "status": "ok", "out_tok_s": 21.4, "ttft_p50_ms": 301.2,
               "itl_per_token_p50_ms": 44.1, "accept_len": None},
              {"arm": "baseline", "concurrency": 4, "status": "ok", "out_tok_s": 52.9, "ttft_p50_ms": 612.7,
               "itl_per_token_p50_ms": 70.3, "accept_len": None},
              {"arm": "eagle3", "status": "not_runnable", "note": eagle3_note}],
        cross_check={"concurrency": 4, "num_prompts": 64, "ours_output_tok_per_s": 52.93,
                     "theirs_output_tok_per_s": 50.11, "ratio": 1.0563, "rounds": 3,
                     "round_ratios": [1.0212, 1.0871, 1.0601]},
        harness=[change.to_dict() for change in harness_changes(cpu_environment(CONTROL_SHIMS, base={}),
                                                                cpu_environment(SPEC_SHIMS, base={}, speculative=True))],
        diagnostics=[{"cause": "spec_request_cap", "applies": "no", "threshold_provenance": "server log",
                      "evidence": "speculative limit 48 (log: Max running requests is reset to 48)", "fix": ""},
                     {"cause": "low_acceptance", "applies": "yes", "threshold_provenance": "measured",
                      "evidence": "served acceptance 1.11; break-even 4.44 [measured]; modelled 3.33 [modelled]",
                      "fix": ""}])


@pytest.fixture
def sources(evidence) -> ReportSources:
    return ReportSources(profile="cpu", generated="2026-11-30", environment=crash_sidecar().environment,
                         crash=crash_sidecar(), trace=trace_sidecar(), patch=patch_sidecar(),
                         model=copy.deepcopy(evidence), incident=incident.facts(),
                         figures=["report_speedup_rtx.png", "model_validation.png"])


def render_all(sources: ReportSources) -> str:
    """REPORT.md and every appendix, one after the other (the long tables moved to the appendices)."""
    return build.joined(build.render_documents(sources)[0])


def unsourced(text: str, sources: ReportSources) -> list[str]:
    return [t.text for t in provenance.unsourced_numbers(text, sources.evidence(), sources.structural())]


def untagged(text: str, sources: ReportSources) -> list[int]:
    return [b.first_line for b in provenance.untagged_blocks(text, sources.structural())]


# ------------------------------------------------------------------------------------------------ provenance
def test_every_number_of_the_rendered_report_is_sourced_and_tagged(sources):
    text = render_all(sources)
    assert unsourced(text, sources) == []
    assert untagged(text, sources) == []
    assert len(provenance.numeric_tokens(text)) > 100  # the check saw the report's numbers, not an empty page


def test_a_number_typed_into_a_sentence_in_code_is_caught(sources, monkeypatch):
    original = contexts.cycle_sentence
    monkeypatch.setattr(contexts, "cycle_sentence",
                        lambda *a: original(*a) + " It costs close to 3.73 plain steps **[modelled]**.")
    assert unsourced(render_all(sources), sources) == ["3.73"]


def test_a_number_typed_into_the_template_is_caught(sources, monkeypatch, tmp_path):
    import shutil

    shutil.copytree(Path(build.__file__).parent / "templates", tmp_path / "templates")
    main = tmp_path / "templates" / build.TEMPLATE
    main.write_text(main.read_text().replace(
        "## 6. How far can the cost model be trusted?",
        "EAGLE-3 only pays above 2,048.5 tokens **[modelled]**.\n\n## 6. How far can the cost model be trusted?"))
    monkeypatch.setattr(jinja2, "PackageLoader", lambda *a: jinja2.FileSystemLoader(str(tmp_path / "templates")))
    assert unsourced(render_all(sources), sources) == ["2,048.5"]


def test_a_number_without_a_provenance_tag_is_caught(sources, monkeypatch):
    original = contexts.model_context

    def with_untagged(*args):
        context = original(*args)
        context["why"].append(f"The cap is {context['spec_max_batch']} requests.")
        return context

    monkeypatch.setattr(build, "model_context", with_untagged)
    text = render_all(sources)
    assert unsourced(text, sources) == []  # the number is the model's own ...
    lines = untagged(text, sources)  # ... but nothing says so
    assert len(lines) == 1 and "The cap is" in text.splitlines()[lines[0] - 1]


def test_a_changed_model_value_changes_the_report(sources):
    before = render_all(sources)
    rtx = sources.model.incident["predicted"]["rtx_pro_6000_x8"]
    rtx["break_even_at_peak"] = 4.4321
    after = render_all(sources)
    assert "4.43" in after and "4.43" not in before
    assert "cannot gain at any acceptance (needs 4.43" in after


# ------------------------------------------------------------------------------------------------ summary
def summary_of(text: str) -> list[str]:
    """The summary's bullets as rendered."""
    block = text.split("## Summary\n", 1)[1].split("\n## ", 1)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("- ")]


def test_summary_is_five_bottom_lines_within_the_word_limit(sources):
    bullets = summary_of(render(sources))
    assert [b.split(":**")[0].split("?**")[0] for b in bullets] == [
        "**What broke", "**The fix", "**Would EAGLE-3 pay on the incident's deployment (if it ran with both hooks "
        "delegated)", "**What to do, in order"]  # no benchmark in this fixture: no bullet about this run
    assert sum(summary.words(b) for b in bullets) <= summary.MAX_WORDS


def test_summary_follows_the_trace_verdict(sources):
    not_enough = summary_of(render(sources))
    sources.trace = trace_sidecar(one_method_enough=True)
    enough = summary_of(render(sources))
    assert "the write-up's one-method patch is not enough **[traced]**" in not_enough[1]
    assert "the write-up's one-method patch is enough **[traced]**" in enough[1]
    assert "the patched server still does not start **[measured]**" in enough[1]  # the fixture's chain ends died
    # the deployment answer is conditional only while the trace contradicts the write-up
    assert "(if it ran with both hooks delegated)" in not_enough[2]
    assert "(if it ran" not in enough[2]


def test_summary_answers_the_deployment_question_at_the_peak_matching_context(sources):
    match = sources.model.incident["context_matching_reported_peak"]
    pred = match["predicted"]
    verdict = next(b for b in summary_of(render(sources)) if "incident's deployment" in b)
    one, peak = sources.incident["evidence"]["one_stream"], sources.incident["evidence"]["peak"]
    assert f"gains {one['cell']['speedup']:.2f}x at one stream and {peak['cell']['speedup']:.2f}x at its" in verdict
    assert f"at the {match['context_len']:,.0f}-token context that reproduces the engineer's " \
           f"{match['reported_peak_tok_s']:,.0f} tok/s peak, EAGLE-3 under sglang's {pred['spec_max_batch']}-request cap" \
           in verdict
    assert summary.reach_verdict(pred) in verdict
    assert verdict.index("**[reported]**") < verdict.index("**[modelled]**")


def test_section_6_says_how_far_to_trust_the_model_without_calling_a_seen_set_held_out(sources):
    trust = next(line for line in render(sources).splitlines() if line.startswith("The model's baseline peak is"))
    protocol = sources.model.validation_protocol
    for past in protocol["past_evaluations"]:  # the earlier sets, named not held out, as reported then
        assert f"{validation_section.set_names(past['split'])} {past['mape_pct']:.1f}%" in trust
    assert "not demonstrably held out" in trust
    seen = [g for g in protocol["groups"] if g["role"] == validation.SEEN_ROLE]
    assert seen and all(f"{g['points']} points {g['mape_pct']:.1f}%" in trust for g in seen)
    assert ("no sealed set evaluated yet" in trust) == (not protocol["sealed"]["evaluated"])
    for row in protocol["sources"]:  # per-source MAPEs (fit quality mixed with held out) are not the headline
        assert row["source"] not in trust
    assert "**[modelled]**" in trust


def test_reach_and_bottom_line_rules_follow_their_evidence():
    cannot = {"break_even_at_peak": 4.67, "max_accept_length": 4}
    can = {"break_even_at_peak": 3.1, "max_accept_length": 4}
    assert summary.reach_verdict(cannot) == \
        "cannot reach the baseline's peak at any acceptance (needs 4.67, at most 4)"
    assert summary.reach_verdict(can) == "reaches the baseline's peak only above acceptance 3.10 (at most 4)"
    assert summary.incident_bottom_line(True, True, cannot) == "At one stream yes, at its peak no"
    assert summary.incident_bottom_line(False, False, can) == "At one stream no, at its peak only with high acceptance"
    assert summary.incident_bottom_line(True, False, cannot).endswith("the public sweep and the model disagree")
    assert summary.every_fix_release("0.5.10", "0.5.11") == "0.5.11"
    assert summary.every_fix_release("0.5.10.post1", "0.5.9") == "0.5.10.post1"
    assert summary.every_fix_release(None, None) == "unknown"


def test_summary_run_verdict_without_an_interleaved_launch_is_not_resolved(sources):
    sources.patch.speedup = [{"concurrency": 1, "speedup": 0.6446}, {"concurrency": 4, "speedup": 1.2}]
    line = next(b for b in summary_of(render(sources)) if "this run" in b)
    assert "Not resolved: no interleaved launch measured an interval" in line
    assert "0.64" not in line and "1.20" not in line  # a single draw is no verdict
    assert "no evidence about GPUs" in line


def test_premise_says_what_the_trace_proves_and_what_stays_unknown(sources):
    incident_ctx = contexts.incident_context(sources.incident)
    broken = contexts.premise_context(incident_ctx, contexts.trace_context(trace_sidecar()), None)
    assert not broken["holds"] and "eagle_worker.py:157" in broken["proved"][0]
    assert "conditional" in broken["condition"]
    chain = {"chain": [{"step": "one-method patch", "outcome": "ready", "call_site": None}]}
    fine = contexts.premise_context(incident_ctx, contexts.trace_context(trace_sidecar(one_method_enough=True)), chain)
    assert fine["holds"] and fine["condition"] == ""
    died = {"chain": [{"step": "one-method patch", "outcome": "died", "call_site": "eagle_worker.py:157"}]}
    measured = contexts.premise_context(incident_ctx, contexts.trace_context(trace_sidecar(one_method_enough=True)), died)
    assert not measured["holds"] and "died at `eagle_worker.py:157` **[measured]**" in measured["proved"][-1]


def test_public_rows_place_the_published_rate_against_the_break_evens(sources):
    model = {"break_even_1": "1.36", "break_even_max": "1.67", "break_even_peak": "3.50", "spec_max_batch": 48}
    rows = {r["key"]: r for r in sentences.public_rows(sources.incident["public"], model)}
    vllm = rows["vllm_pr_35966"]
    assert vllm["published"] == "51.78% acceptance rate, 4 speculative tokens"
    assert "3.07 tokens per verify step" in vllm["against"]
    assert "above the break-even at one request, 48 requests; not above it at EAGLE-3's peak" in vllm["against"]
    assert rows["sglang_pr_19689"]["published"] == "--"  # not transcribed: said, never invented
    assert "sglang_pr_25454" not in rows  # a shift cost, not an acceptance: it sits beside the mismatch experiment


def test_layer_claim_holds_only_when_the_drafter_ids_equal_sglang_default(sources):
    facts = dict(sources.incident)
    assert facts["sglang_default_aux_ids"] == [2, facts["target_layers"] // 2, facts["target_layers"] - 3]
    same = sentences.layer_claim({**facts, "writeup_aux_ids": facts["sglang_default_aux_ids"]})
    assert "They are equal" in same and "only while the drafter's ids equal sglang's default" in same
    other = sentences.layer_claim({**facts, "writeup_aux_ids": [1, 29, 57]})
    assert "does not apply" in other


def test_shift_sentence_sets_the_public_cost_beside_the_cpu_experiment(sources):
    mismatch = {"target_layers": 6, "drop": [0.341], "concurrency": [1]}
    text = sentences.shift_sentence(sources.incident["public"], mismatch)
    assert "about 0.10 acceptance length" in text and "loses 0.341 at concurrency 1 **[measured]**" in text
    assert sentences.shift_sentence({}, mismatch) is None


# ------------------------------------------------------------------------------------------------ section 6
def _prediction(need: float, top: int = 4, name: str = "x") -> dict:
    return {"variation": name, "changed": {}, "context_len": 1152.0, "baseline_peak_tok_s": 1500.0,
            "baseline_peak_batch": 100, "spec_max_batch": 48, "break_even_single_stream": 1.3,
            "break_even_at_spec_max_batch": 1.6, "break_even_at_peak": need, "max_accept_length": top}


def test_peak_verdict_flips_where_the_needed_acceptance_passes_the_maximum():
    assert peak_verdict(_prediction(3.99)) == "gains only above acceptance 3.99 (at most 4 possible)"
    assert peak_verdict(_prediction(4.01)) == "cannot gain at any acceptance (needs 4.01, at most 4 possible)"
    assert peak_verdict(_prediction(4.01, top=5)).startswith("gains only above")


def test_flip_sentence_names_the_extremes_and_the_rows_where_no_acceptance_suffices():
    rows = [_prediction(2.9, name="as stated"), _prediction(5.2, name="short context"),
            _prediction(1.7, name="no cap")]
    text = flip_sentence(rows)
    assert "from 1.70 (no cap) to 5.20 (short context)" in text
    assert "in 1 of 3 no acceptance can reach it (short context)" in text
    assert "in all 2 some acceptance" in flip_sentence(rows[::2])
    table = sensitivity_rows(rows)
    assert [r["be_peak"] for r in table] == ["2.90", "5.20", "1.70"] and table[1]["verdict"].startswith("cannot")


def test_matching_sentence_only_when_a_context_reproduces_the_reported_peak():
    assert matching_sentence(None, 1152.0) is None
    match = {"context_len": 695.0, "reported_peak_tok_s": 2370.0,
             "predicted": {**_prediction(4.19), "baseline_peak_tok_s": 2373.6, "baseline_peak_batch": 209},
             "predicted_without_request_cap": {**_prediction(1.96), "spec_max_batch": 191}}
    text = matching_sentence(match, 1152.0)
    assert "context of 695 tokens instead of the assumed 1,152" in text
    assert "48-request cap cannot gain at any acceptance (needs 4.19" in text
    assert "(191 requests fit) it gains only above acceptance 1.96" in text


def test_model_context_takes_every_figure_from_the_evidence(evidence):
    ctx = contexts.model_context(evidence, ["a.png"], None)
    rtx = evidence.incident["predicted"]["rtx_pro_6000_x8"]
    assert ctx["break_even_peak"] == f"{rtx['break_even_at_peak']:.2f}"
    assert ctx["spec_max_batch"] == rtx["spec_max_batch"] and ctx["peak_batch"] == rtx["baseline_peak_batch"]
    assert ctx["peak_error"] == f"{abs(evidence.incident['side_by_side']['peak_tok_s']['error_pct']):.1f}"
    cycle = ctx["why"][0]
    for row in evidence.incident["cycle_breakdown"]:
        assert f"{row['cycle_over_plain_step']:.2f} at {row['batch']} request" in cycle
    assert [r["variation"] for r in ctx["sensitivity"]] == [r["variation"] for r in evidence.incident["sensitivity"]]
    protocol = evidence.validation_protocol
    assert [r["group"] for r in ctx["protocol"]["groups"]] == [g["group"] for g in protocol["groups"]]
    assert [r["source"] for r in ctx["protocol"]["sources"]] == [r["source"] for r in protocol["sources"]]
    assert ctx["run"] == {"rows": [], "missing": evidence.run_check_missing}


def test_run_check_context_with_and_without_measured_speedups():
    base_rows = [{"concurrency": 1, "measured_baseline_tok_s": 20.0, "predicted_baseline_tok_s": 20.0,
                  "baseline_error_pct": 0.0, "baseline_role": "calibration"},
                 {"concurrency": 4, "measured_baseline_tok_s": 50.0, "predicted_baseline_tok_s": 60.0,
                  "baseline_error_pct": 20.0, "baseline_role": "predicted"}]
    check = {"rows": base_rows, "baseline_mape_pct": 20.0, "speedup_mape_pct": None,
             "baseline_trend": {"measured": "rises", "predicted": "rises"},
             "single_stream_pct_by_part": {"launch": 80.0, "weights": 5.0, "gemm_compute": 15.0, "sampling": 0.4},
             "context": 48.0}
    ctx = run_check_text.run_check_context(check, None, "EAGLE is not supported on CPU")
    assert [r["error"] for r in ctx["rows"]] == ["calibration", "20.0"] and not ctx["has_speedup"]
    assert any("MAPE 20.0%" in line and "rises as measured and rises as predicted" in line for line in ctx["lines"])
    assert any("(EAGLE is not supported on CPU)" in line and "not checked" in line for line in ctx["lines"])
    assert any("80.0% fixed per-step overhead (calibrated residual), 15.0% GEMM compute beyond weights, 5.0% weights read" in line
               for line in ctx["lines"])
    with_speedup = {**check, "speedup_mape_pct": 12.5, "speedup_trend": {"measured": "falls", "predicted": "flat"},
                    "rows": [{**base_rows[1], "measured_eagle3_tok_s": 55.0, "accept_length": 1.5,
                              "measured_speedup": 1.1, "predicted_speedup": 1.2, "speedup_error_pct": 9.09}]}
    ctx = run_check_text.run_check_context(with_speedup, None, None, goal=15.0)
    assert ctx["has_speedup"] and ctx["rows"][0]["predicted_speedup"] == "1.20"
    assert any("MAPE 12.5% (goal of at most 15%: met)" in line for line in ctx["lines"])
    assert any("MAPE 20.0% (goal of at most 15%: not met)" in line for line in ctx["lines"])
    assert any("MAPE 12.5% (goal of at most 15%: met); with concurrency it falls as measured and flat as predicted"
               in line for line in ctx["lines"])
    assert run_check_text.run_check_context(None, "no benchmark", None) == {"rows": [], "missing": "no benchmark"}


def test_eagle3_note_comes_from_the_arm_that_did_not_run():
    assert contexts.eagle3_missing_note(patch_sidecar("EAGLE is not supported on CPU\nmore")) == "EAGLE is not supported on CPU"
    assert contexts.eagle3_missing_note(None) is None


def test_evidence_round_trips_through_its_file(evidence, tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    path = model_evidence.save(evidence, "cpu")
    assert path == tmp_path / "report_model_evidence.cpu.json"
    assert model_evidence.load("cpu").to_dict() == json.loads(json.dumps(evidence.to_dict()))
    path.write_text("{")
    with pytest.raises(PerfModelError) as err:
        model_evidence.load("cpu")
    assert (err.value.problem, err.value.path) == ("unreadable", path)
    assert "--no-run" in str(err.value)  # the line gives the command that rewrites it


def test_capacity_sentence_names_what_limits_eagle3():
    rtx = {**_prediction(2.9), "baseline_max_batch": 126, "spec_max_batch": 48}
    capped = sentences.capacity_sentence(rtx, {**rtx, "spec_max_batch": 115})
    assert "at most 48 requests unless `--max-running-requests` is set" in capped and "would hold 115" in capped
    kv_bound = sentences.capacity_sentence(rtx, {**rtx, "spec_max_batch": 48})
    assert "KV cache of target and drafter holds 48 requests" in kv_bound and "--max-running" not in kv_bound
    assert "fits the KV cache of 126 requests" in kv_bound


def test_measured_speedups_render_sourced_in_the_summary_and_section_5(sources):
    patch = patch_sidecar()
    patch.arms = [*patch.arms[:2], {"arm": "eagle3", "concurrency": 1, "status": "ok", "out_tok_s": 13.8,
                                    "accept_len": 2.376, "accept_len_pooled": 2.216}]
    patch.speedup = [{"concurrency": 1, "baseline_tok_s": 21.4, "eagle3_tok_s": 13.8, "speedup": 13.8 / 21.4,
                      "accept_length": 2.216}]
    sources.patch = patch
    text = render_all(sources)
    assert "| eagle3 | 1 | 13.8 | 0.64x |" in text  # the speedup column, pooled acceptance only
    assert text.count("0.64x at concurrency 1 (slower)") == 1  # the benchmark appendix: a single draw, no verdict
    assert not any("0.64" in line for line in summary_of(render(sources)))
    assert unsourced(text, sources) == [] and untagged(text, sources) == []


# ------------------------------------------------------------------------------------------------ bindings
def test_every_summary_sentence_is_bound_and_checks_against_its_evidence(sources):
    documents, binder = build.render_documents(sources)
    ids = [x.id for x in binder.sentences]
    assert {"summary.crash", "summary.fix", "summary.incident_verdict", "summary.todo", "model.trust"} <= set(ids)
    assert all(x.bindings for x in binder.sentences if x.id.startswith("summary."))
    assert provenance.broken_sentences(build.joined(documents), binder.sentences, sources.tree(),
                                       sentences.RULES) == []


def test_changing_one_evidence_value_a_sentence_reads_breaks_that_sentence(sources):
    documents, binder = build.render_documents(sources)
    text = build.joined(documents)
    tree = copy.deepcopy(sources.tree())
    tree["model"]["incident"]["predicted"]["rtx_pro_6000_x8"]["break_even_single_stream"] += 0.5
    assert provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES) == \
        ["model.why.single"]  # the sentences that print it, only those
    tree = copy.deepcopy(sources.tree())
    tree["trace"]["verdict"]["one_method_enough"] = True  # a verdict: its rule no longer gives "not enough"
    assert provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES) == ["summary.fix"]
    tree = copy.deepcopy(sources.tree())
    tree["model"]["incident"]["sensitivity"][0]["break_even_at_peak"] = 9.99  # a verdict over a whole list
    assert provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES) == ["model.flip"]
    tree = copy.deepcopy(sources.tree())
    match = tree["model"]["incident"]["context_matching_reported_peak"]["predicted"]
    match["max_accept_length"] = 5  # EAGLE-3 could now reach the peak: the summary's answer flips
    assert "summary.incident_verdict" in provenance.broken_sentences(text, binder.sentences, tree, sentences.RULES)


def test_a_sentence_edited_after_rendering_is_caught(sources):
    documents, binder = build.render_documents(sources)
    tampered = build.joined(documents).replace("**What to do, in order:** check", "**What to do, in order:** skip", 1)
    assert provenance.broken_sentences(tampered, binder.sentences, sources.tree(), sentences.RULES) == ["summary.todo"]


def test_committed_evidence_lets_a_reader_check_the_report(sources, tmp_path):
    report_md = tmp_path / "REPORT.md"
    written, evidence = evidence_file.write_report(sources, report_md)
    assert written == report_md and evidence == tmp_path / "reports-evidence" / "cpu.json"
    assert evidence_file.check_report(report_md, evidence) == []
    assert "/work/" not in evidence.read_text() and str(tmp_path) not in evidence.read_text()
    data = json.loads(evidence.read_text())
    data["tree"]["model"]["incident"]["context_matching_reported_peak"]["predicted"]["spec_max_batch"] += 1
    evidence.write_text(json.dumps(data))
    assert evidence_file.check_report(report_md, evidence) == [
        "sentence model.matching does not follow from its evidence",
        "sentence summary.incident_verdict does not follow from its evidence"]
    report_md.write_text(report_md.read_text() + "\nA line added by hand.\n")
    assert evidence_file.check_report(report_md, evidence)[0] == "REPORT.md is not the text cpu.json was rendered with"


def test_the_appendices_are_written_beside_report_md_and_checked_like_it(sources, tmp_path):
    report_md = tmp_path / "REPORT.md"
    _, evidence = evidence_file.write_report(sources, report_md)
    for appendix in build.APPENDICES:
        assert (tmp_path / appendix.path).is_file() and f"]({appendix.path})" in report_md.read_text()
    assert evidence_file.check_report(report_md, evidence) == []
    diagnostics = tmp_path / "docs" / "report" / "diagnostics.md"
    diagnostics.write_text(diagnostics.read_text().replace("| spec_request_cap | no |", "| spec_request_cap | yes |"))
    assert evidence_file.check_report(report_md, evidence) == [
        "docs/report/diagnostics.md is not the text cpu.json was rendered with"]
    diagnostics.unlink()
    assert "docs/report/diagnostics.md is missing" in evidence_file.check_report(report_md, evidence)


def test_diagnostics_rows_show_each_thresholds_provenance(sources):
    text = render_all(sources)
    assert "| cause | applies | threshold | evidence |\n" in text
    assert "| spec_request_cap | no | server log **[measured]** |" in text
    sources.patch.diagnostics = [{**sources.patch.diagnostics[0].model_dump(), "threshold_provenance": "modelled"}]
    text = render_all(sources)
    assert "| spec_request_cap | no | modelled **[modelled]** |" in text
    assert untagged(text, sources) == []


def test_per_benchmark_public_lengths_are_set_against_each_threshold(sources):
    model = {"break_even_1": "1.36", "break_even_max": "1.67", "break_even_peak": "2.94", "spec_max_batch": 48}
    public = {"sglang_pr_19689": {**sources.incident["public"]["sglang_pr_19689"],
                                  "values": {"bench a": 2.5, "bench b": 3.1}}}
    (row,) = sentences.public_rows(public, model)
    assert row["published"] == "bench a 2.5, bench b 3.1"
    assert row["against"] == ("one request 1.36: every benchmark above; 48 requests 1.67: every benchmark above; "
                              "EAGLE-3's peak vs the baseline's 2.94: some benchmarks above")


def test_a_point_measured_with_repeats_shows_its_spread(sources):
    assert "repeats)" not in render_all(sources)  # no repeats recorded: no spread claimed
    sources.patch.arms = [{**sources.patch.arms[0].model_dump(), "out_tok_s_sd": 0.8, "repeats": 3},
                          *sources.patch.arms[1:]]
    text = render_all(sources)
    assert "| baseline | 1 | 21.4 ± 0.8 (sd of 3 repeats) |" in text
    assert unsourced(text, sources) == []


def test_the_capture_order_defect_is_stated_from_notebook_02s_trace_with_its_sources(sources):
    from eagle3lab.sidecars import CaptureOrderRecord

    assert "A second defect" not in render_all(sources)  # no trace of it: no claim
    call = {"where": "srt/model_executor/cuda_graph_runner.py:365", "with_ids": False}
    sources.trace.capture_order = CaptureOrderRecord(
        drafter_ids=[2, 30, 58], depth=61, ids_source="the write-up's quote",
        releases=[{"release": "0.5.9", "defect": True, "default_expr": "[2, num_layers // 2, num_layers - 3]",
                   "calls": [call, {"where": "srt/model_executor/model_runner.py:622", "with_ids": True}]}],
        layers=[{"release": "0.5.9", "depth": 61, "cuda_graph_layers": [2, 30, 58], "eager_layers": [3, 31, 59],
                 "mismatch": True},
                {"release": "0.5.9", "depth": 6, "cuda_graph_layers": [2, 3, 3], "eager_layers": [2, 3, 5],
                 "mismatch": True}],
        first_fixed="0.5.11", fix_pr="https://github.com/sgl-project/sglang/pull/22836")
    text = render_all(sources)
    assert "| 0.5.9 | [2, 30, 58] | [3, 31, 59] | no |" in text
    assert "[2, 3, 3]" not in text  # only the incident's depth is tabled
    paragraph = text[text.index("A second defect"):text.index("| sglang | CUDA-graph")]
    assert "`srt/model_executor/cuda_graph_runner.py:365`" in paragraph and "model_runner.py:622" not in paragraph
    assert "Fixed upstream in 0.5.11" in text and "pull/22836" in text
    fix = summary_of(text)[1]  # the summary names the release with every fix: the newer of the two
    assert "sglang 0.5.11 has every fix this drafter needs (delegation 0.5.10, capture order 0.5.11)" in fix
    assert untagged(text, sources) == []
    # with notebook 02's milestones: a first id of 2 is captured as given under sglang PR #25454's convention, so
    # the release with every fix is the first with both the order fix and the PR's rule, not the order fix alone
    sources.trace.capture_order.milestones = {"order_fixed": "0.5.11", "convention_rule": "0.5.13", "both": "0.5.13",
                                              "convention_pr": "https://github.com/sgl-project/sglang/pull/25454"}
    text = render_all(sources)
    fix = summary_of(text)[1]
    assert ("sglang 0.5.13 has every fix this drafter needs (delegation 0.5.10, capture order and ids as given "
            "(PR #25454) 0.5.13)") in fix
    assert "0.5.13 is the first release with both fixes" in text and "sglang-eagle3-first-id-rule.patch" in text
    assert "Run sglang 0.5.13 or later" in text and "upgrade to sglang 0.5.10" not in text
    assert untagged(text, sources) == [] and unsourced(text, sources) == []


def test_a_trace_without_a_bisect_names_no_fixed_release(sources):
    """A GPU rehearsal's notebook 02 may bisect nothing: the summary then names no release instead of failing."""
    sources.trace.bisect.first_fixed = None
    text = render_all(sources)
    bullets = summary_of(text)
    assert "every fix this drafter needs" not in bullets[1] and "run sglang" not in bullets[-1]
    assert "**The fix:**" in text and untagged(text, sources) == []


def test_launch_spread_renders_every_pair_sourced_and_the_verdict_follows_the_rule(sources):
    def sample(launch: int, base: float, spec: float, rounds: tuple[float, ...] = ()) -> LaunchSample:
        return LaunchSample(launch=launch, baseline_arm="baseline", eagle3_arm="eagle3", baseline_tok_s=base,
                            eagle3_tok_s=spec, speedup=spec / base, accept_length=2.266, plain_step_ms=10.65,
                            cycle_ms=15.43, cycle_in_plain_steps=1.449,
                            method="interleaved" if rounds else "sequential", round_speedups=list(rounds),
                            round_accept_lengths=[2.1, 2.45, None][:len(rounds)])

    launches = [sample(1, 45.46, 70.85), sample(2, 71.07, 115.81, (1.702, 1.551, 1.64))]
    speedups = sorted(s.speedup for s in launches)
    record = LaunchSpreadRecord(concurrency=1, measured_on="2026-12-02", order="eagle3, baseline | baseline, eagle3",
                                launches=launches, baseline_spread_pct=44.0, eagle3_spread_pct=48.2,
                                speedup_min=speedups[0], speedup_median=sum(speedups) / 2, speedup_max=speedups[1],
                                speedup_spread_pct=4.4, tolerance_pct=10.0, agrees=True)
    sources.patch.launch_spread = record
    text = render_all(sources)
    assert "| 1 | one sweep each, in turn | 45.5 | 70.8 | 1.56x |" in text
    assert ("| 2 | both up, 3 rounds: 1.55x to 1.70x, acceptance 2.10 to 2.45 | 71.1 | 115.8 | 1.63x | 2.27 | 10.65 | "
            "15.43 | 1.45 |") in text
    assert "Within the project's 10% rule" in text and "one draw" not in text
    assert unsourced(text, sources) == [] and untagged(text, sources) == []

    sources.patch.launch_spread = record.model_copy(update={"speedup_spread_pct": 12.5, "agrees": False})
    text = render_all(sources)
    assert "Beyond the project's 10% rule: on this machine one launch's speedup is one draw" in text
    assert unsourced(text, sources) == []



def test_the_interleaved_run_check_renders_its_own_table_sourced_beside_the_sweeps(sources, cpu_profile):
    """A run check with an interleaved launch: its table and MAPE lines in section 6 and the summary, every number
    one of the evidence's; without it, no such table."""
    from conftest import synthetic_arm

    from eagle3lab.bench import launch_spread
    from eagle3lab.bench.sweep import BenchReport

    def pair(c: int, base_step: float, spec_step: float):
        base = [synthetic_arm(f"baseline-launch2-c{c}-round{r}", (c,), base_step, kind="baseline") for r in (1, 2)]
        spec = [synthetic_arm(f"eagle3-launch2-c{c}-round{r}", (c,), spec_step, verify_ct=3, kind="eagle3")
                for r in (1, 2)]
        return launch_spread.interleaved_sample(2, base, spec, c)

    report = BenchReport.create("cpu", [synthetic_arm("baseline", (1, 4), 0.02),
                                        synthetic_arm("eagle3", (1, 4), 0.04, verify_ct=6)])
    check = model_evidence.measured_run_check(cpu_profile, report, mem_bandwidth=5e9,
                                              interleaved=[pair(1, 0.025, 0.03), pair(4, 0.025, 0.045)])
    sources.model.run_check, sources.model.run_check_missing = check, None
    text = render_all(sources)
    assert "The same model against the interleaved launch (launch 2" in text
    assert f"| 4 | {check['interleaved']['rows'][1]['measured_baseline_tok_s']:,.1f} | " in text
    inter = check["interleaved"]
    # REPORT.md's section 6 gives the interleaved check in one sentence, with its verdict against the goal
    brief = next(line for line in render(sources).splitlines() if line.startswith("Against this run's interleaved"))
    goal = sources.model.validation_protocol["target_mape_pct"]
    verdict = "met" if inter["speedup_mape_pct"] <= goal else "not met"
    assert f"miss by MAPE {inter['speedup_mape_pct']:,.1f}% (goal of at most {goal:g}%: {verdict})" in brief
    # the validation appendix leads with the interleaved check, then the sweep's, with how far the two measured
    # the same point apart
    full = next(line for line in text.splitlines() if line.startswith("On this run, against the interleaved"))
    lead = full.index(f"miss by MAPE {inter['speedup_mape_pct']:,.1f}% counting the decode passes only")
    gap = inter["sweep_gap"]
    sweep_rows = {r["concurrency"]: r for r in check["rows"] if "measured_speedup" in r}
    assert gap["concurrency"] in sweep_rows and gap["sweep_speedup"] == sweep_rows[gap["concurrency"]]["measured_speedup"]
    assert lead < full.index(f"misses by MAPE {check['speedup_mape_pct']:,.1f}%") < \
        full.index(f"up to {gap['gap_pct']:,.1f}% apart (concurrency {gap['concurrency']}: "
                   f"{gap['sweep_speedup']:.2f}x in the sweep, {gap['interleaved_speedup']:.2f}x interleaved)")
    assert unsourced(text, sources) == [] and untagged(text, sources) == []
    documents, binder = build.render_documents(sources)
    tree = copy.deepcopy(sources.tree())
    tree["model"]["run_check"]["interleaved"]["speedup_mape_pct"] = goal + 50.0  # the verdict no longer holds
    broken = provenance.broken_sentences(build.joined(documents), binder.sentences, tree, sentences.RULES)
    assert {"model.run_check_summary", "model.run_check"} <= set(broken)
    sources.model.run_check = {**check, "interleaved": None}
    assert "against the interleaved launch" not in render_all(sources)
    assert f"miss the measured ones by MAPE {check['speedup_mape_pct']:,.1f}%" in render_all(sources)
    assert "Against this run's sequential sweep" in render(sources)


def test_the_layer_mismatch_throughput_cost_renders_from_its_record_with_its_computed_verdict(sources):
    """The shifted drafter's rate against the aligned one's in the same interleaved rounds: every number from the
    sidecar's record, the verdict from the interval's ends; without the record, no such sentence."""
    from eagle3lab.sidecars import LayerMismatchRecord, VariantCost

    sources.patch.layer_mismatch = LayerMismatchRecord(
        aligned_arm="eagle3", shifted_arm="eagle3-shifted", aligned_layer_ids=[1, 6, 10], shifted_layer_ids=[0, 5, 9],
        target_layers=12, concurrency=[1], aligned_accept_length=[2.265], shifted_accept_length=[2.116],
        drop=[0.149], relative_drop=[0.0658])
    cost = VariantCost(variant_arm="eagle3-shifted-launch2-c1", headline_arm="eagle3-launch2-c1", launch=2,
                       concurrency=1, rounds=6, rate_ratio=0.9437, ratio_low=0.9012, ratio_high=0.9811,
                       interval_level_pct=95.0, headline_speedup=1.3053, variant_speedup=1.2318,
                       headline_accept_length=2.0078, variant_accept_length=1.8876, cost_pct=5.63)
    sources.patch.variant_costs = [cost]
    text = render_all(sources)
    line = " ".join(text[text.index("In throughput, measured in the same interleaved rounds"):].split("**[measured]**")[0]
                    .split())
    assert "ran at 0.944 times the aligned drafter's rate (95% bootstrap interval over the rounds 0.901 to 0.981)" in line
    assert "a cost of 5.6% of its throughput (the interval lies below 1: these rounds resolve a cost)" in line
    assert "1.31x aligned, 1.23x shifted, at acceptance 2.01 and 1.89" in line
    assert unsourced(text, sources) == [] and untagged(text, sources) == []
    sources.patch.variant_costs = [cost.model_copy(update={"ratio_high": 1.01})]
    assert "these rounds do not resolve a difference" in render_all(sources)
    gain = cost.model_copy(update={"rate_ratio": 1.066, "ratio_low": 0.98, "ratio_high": 1.172, "cost_pct": -6.6})
    sources.patch.variant_costs = [gain]
    text = render_all(sources)
    assert "6.6% more throughput than the aligned drafter" in " ".join(text.split()) and "a cost of" not in text
    assert unsourced(text, sources) == []
    sources.patch.variant_costs = []
    assert "In throughput, measured in the same interleaved rounds" not in render_all(sources)


# ------------------------------------------------------------------------------------------------ layer experiment
def layer_record() -> dict:
    """A layer-convention record in the shape ``notebook.layer_experiment.new_record`` writes."""
    from eagle3lab.bench import layer_cells

    values = {("output", "plus_one"): (2.4531, 2.31, 2.59), ("output", "as_given"): (1.9062, 1.8, 2.02),
              ("input", "plus_one"): (1.7344, 1.62, 1.85), ("input", "as_given"): (2.3906, 2.25, 2.53)}
    cells = [{"convention": c.convention, "capture": c.capture, "trained_outputs": list(c.trained_outputs),
              "fed_outputs": list(c.fed_outputs), "offset": c.offset, "status": "measured",
              "accept_length": values[c.convention, c.capture][0], "low": values[c.convention, c.capture][1],
              "high": values[c.convention, c.capture][2], "requests": 32, "completion_tokens": 1024,
              "verify_steps": 417,
              "per_request": [[32, round(32 / values[c.convention, c.capture][0]) + k % 3] for k in range(32)], "server_ready_s": 31.4,
              "served_config_ids": list(c.fed_outputs)} for c in layer_cells.cells([1, 6, 10], 12)]
    record = {"schema_version": 1, "kind": layer_cells.RECORD_KIND, "provenance": "measured here",
              "date": "2026-12-05T16:40:00+00:00", "machine": {"host_cpus": 2, "platform": "Linux"},
              "profile": "cpu", "sglang": "0.5.9", "target_layers": 12, "drafter_ids": [1, 6, 10],
              "workload": {"prompts": 32, "input_len": 32, "output_len": 32, "concurrency": 1, "draft_steps": 3,
                           "topk": 1, "draft_tokens": 4},
              "bootstrap": {"level": 0.95, "level_pct": 95, "resamples": 10000, "seed": 0, "over": "requests"},
              "conventions": layer_cells.CONVENTIONS, "captures": layer_cells.CAPTURES,
              "mixed": {"capture": "0.5.9 mixed (CUDA graphs as given, eager +1)", "served": False,
                        "why": layer_cells.MIXED_ON_CPU}, "cells": cells}
    record["costs"] = layer_cells.mismatch_costs(record)
    return record


def test_the_layer_experiment_table_renders_from_its_record_with_every_number_sourced(sources):
    sources.layer_experiment = layer_record()
    documents = build.render_documents(sources)[0]
    appendix = documents["docs/report/layer-experiment.md"]
    assert "| id i = output of layer i (SpecForge) ([1, 6, 10]) | 2.453 (2.310-2.590), matched | " \
           "1.906 (1.800-2.020), one layer early |" in appendix
    assert "| id i = input of layer i (sglang PR #25454) ([0, 5, 9]) | 1.734 (1.620-1.850), one layer late | " \
           "2.391 (2.250-2.530), matched |" in appendix
    assert "loses 0.547 tokens per verify step (2.453 to 1.906; paired 95% interval of the loss" in documents["REPORT.md"]
    text = build.joined(documents)
    assert unsourced(text, sources) == [] and untagged(text, sources) == []
    sources.layer_experiment["cells"][0]["accept_length"] = 2.4631  # a number the record no longer holds
    sources.layer_experiment["costs"] = []
    edited = build.joined(build.render_documents(sources)[0])
    sources.layer_experiment = layer_record()
    assert "2.463" in edited and "2.463" in unsourced(edited, sources)


def test_the_shipped_layer_experiment_record_renders_with_every_number_sourced(sources):
    from eagle3lab.bench import layer_cells

    record = layer_cells.load_record("cpu")
    if record is None:
        pytest.skip("no layer-experiment record shipped for cpu")
    assert {c["status"] for c in record["cells"]} == {"measured"} and record["sglang"] and record["date"]
    sources.layer_experiment = record
    text = build.joined(build.render_documents(sources)[0])
    assert "| id i = output of layer i (SpecForge)" in text
    assert unsourced(text, sources) == [] and untagged(text, sources) == []


def test_without_a_layer_record_the_appendix_says_how_to_record_it(sources):
    documents = build.render_documents(sources)[0]
    assert "has not been recorded for this profile" in documents["docs/report/layer-experiment.md"]
    assert "](docs/report/layer-experiment.md)" in documents["REPORT.md"]


def test_the_header_names_the_server_thread_count_the_run_used_and_sources_it(sources):
    """One OpenMP thread per server process is a condition of every CPU number (issue 43): said from the run's own
    profile values, and absent for a run that left torch's default."""
    assert "OpenMP" not in render_all(sources)  # the fixture's run records no thread count
    sources.patch.profile_values["server_omp_threads"] = 1
    text = render_all(sources)
    header = text.split("## Summary")[0]
    assert "accelerators: none, 1 OpenMP thread per server process, " in header
    assert unsourced(text, sources) == []
    sources.patch.profile_values["server_omp_threads"] = 2
    assert "2 OpenMP threads per server process" in render_all(sources).split("## Summary")[0]
