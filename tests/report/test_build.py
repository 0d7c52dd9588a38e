"""REPORT.md from typed sidecars built here and the cost model's real evidence: every number it prints is one its
sources hold, every number says where it comes from, and the summary and section 6 follow the evidence."""

from __future__ import annotations

import copy
import json

import jinja2
import pytest

from eagle3lab.errors import PerfModelError
from eagle3lab.report import build, incident, model_evidence, provenance
from eagle3lab.report.build import (ReportSources, flip_sentence, matching_sentence, peak_verdict, render,
                                    sensitivity_rows)
from eagle3lab.sidecars import CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar


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
               "itl_p50_ms": 44.1, "accept_len": None},
              {"arm": "baseline", "concurrency": 4, "status": "ok", "out_tok_s": 52.9, "ttft_p50_ms": 612.7,
               "itl_p50_ms": 70.3, "accept_len": None},
              {"arm": "eagle3", "status": "not_runnable", "note": eagle3_note}],
        cross_check={"concurrency": 4, "ours_output_tok_per_s": 52.93, "theirs_output_tok_per_s": 50.11,
                     "ratio": 1.0563},
        diagnostics=[{"rule": "running-request limit under speculative decoding", "applies": False,
                      "evidence": "speculative limit 48 (log: Max running requests is reset to 48)"}])


@pytest.fixture(scope="module")
def evidence() -> model_evidence.ModelEvidence:
    """The cost model's real evidence (no benchmark report: the run check says why it is missing)."""
    return model_evidence.gather("cpu", None)


@pytest.fixture
def sources(evidence) -> ReportSources:
    return ReportSources(profile="cpu", generated="2026-11-30", environment=crash_sidecar().environment,
                         crash=crash_sidecar(), trace=trace_sidecar(), patch=patch_sidecar(),
                         model=copy.deepcopy(evidence), incident=incident.facts(),
                         figures=["report_speedup_rtx.png", "model_validation.png"])


def unsourced(text: str, sources: ReportSources) -> list[str]:
    return [t.text for t in provenance.unsourced_numbers(text, sources.evidence(), sources.structural())]


def untagged(text: str, sources: ReportSources) -> list[int]:
    return [b.first_line for b in provenance.untagged_blocks(text, sources.structural())]


# ------------------------------------------------------------------------------------------------ provenance
def test_every_number_of_the_rendered_report_is_sourced_and_tagged(sources):
    text = render(sources)
    assert unsourced(text, sources) == []
    assert untagged(text, sources) == []
    assert len(provenance.numeric_tokens(text)) > 100  # the check saw the report's numbers, not an empty page


def test_a_number_typed_into_a_sentence_in_code_is_caught(sources, monkeypatch):
    original = build._cycle_sentence
    monkeypatch.setattr(build, "_cycle_sentence",
                        lambda *a: original(*a) + " It costs close to 3.73 plain steps **[modelled]**.")
    assert unsourced(render(sources), sources) == ["3.73"]


def test_a_number_typed_into_the_template_is_caught(sources, monkeypatch, tmp_path):
    template = jinja2.Environment(loader=jinja2.PackageLoader("eagle3lab.report", "templates")).loader.get_source(
        jinja2.Environment(), build.TEMPLATE)[0]
    (tmp_path / build.TEMPLATE).write_text(template.replace(
        "### Where the verdict flips", "EAGLE-3 only pays above 2,048.5 tokens **[modelled]**.\n\n### Where the verdict flips"))
    monkeypatch.setattr(jinja2, "PackageLoader", lambda *a: jinja2.FileSystemLoader(str(tmp_path)))
    assert unsourced(render(sources), sources) == ["2,048.5"]


def test_a_number_without_a_provenance_tag_is_caught(sources, monkeypatch):
    original = build._model_context

    def with_untagged(*args):
        context = original(*args)
        context["why"].append(f"The cap is {context['spec_max_batch']} requests.")
        return context

    monkeypatch.setattr(build, "_model_context", with_untagged)
    text = render(sources)
    assert unsourced(text, sources) == []  # the number is the model's own ...
    lines = untagged(text, sources)  # ... but nothing says so
    assert len(lines) == 1 and "The cap is" in text.splitlines()[lines[0] - 1]


def test_a_changed_model_value_changes_the_report(sources):
    before = render(sources)
    rtx = sources.model.incident["predicted"]["rtx_pro_6000_x8"]
    rtx["break_even_at_peak"] = 4.4321
    after = render(sources)
    assert "4.43" in after and "4.43" not in before
    assert "cannot gain at any acceptance (needs 4.43" in after


# ------------------------------------------------------------------------------------------------ summary
def test_summary_follows_the_trace_verdict_and_the_story(sources):
    not_enough = render(sources)
    sources.trace = trace_sidecar(one_method_enough=True)
    enough = render(sources)
    assert "the one-method fix is not enough **[traced]**" in not_enough
    assert "the one-method fix is enough **[traced]**" in enough
    assert "- With the full patch every wrapper hook that ran passed; the server then stops at a CPU limitation " \
           "**[measured]**." in enough


def test_summary_states_the_model_thresholds_and_what_was_not_reported(sources):
    model = build._model_context(sources.model, [], None)
    crash, _ = build._crash_context(sources.crash)
    lines = build._summary(crash, None, None, model, build._incident_context(sources.incident), sources.model)
    rows = sources.model.incident["sensitivity"]
    rtx = sources.model.incident["predicted"]["rtx_pro_6000_x8"]
    verdict = next(line for line in lines if "gave no throughput gain" in line)
    assert f"only above acceptance {rtx['break_even_at_peak']:.2f}" in verdict
    assert f"between {min(r['break_even_at_peak'] for r in rows):.2f} and " \
           f"{max(r['break_even_at_peak'] for r in rows):.2f}" in verdict
    assert f"gains above {rtx['break_even_single_stream']:.2f}" in verdict
    match = sources.model.incident["context_matching_reported_peak"]
    assert f"reproduces the reported peak ({match['context_len']:,.0f} tokens) it {peak_verdict(match['predicted'])}" \
        in verdict
    assert all(item in verdict for item in incident.NOT_REPORTED)
    trust = next(line for line in lines if line.startswith("Out of sample"))
    for row in sources.model.validation:
        assert f"{row['source']} MAPE {row['mape_pct']:.1f}% with {row['trends_right']} trends right (goal " \
               f"{'met' if row['goal_met'] else 'not met'})" in trust
    assert all(("[measured]" in line or "[modelled]" in line or "[traced]" in line) for line in lines)
    assert not any("this run" in line for line in lines)  # no run check, so no claim about one


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
    ctx = build._model_context(evidence, ["a.png"], None)
    rtx = evidence.incident["predicted"]["rtx_pro_6000_x8"]
    assert ctx["break_even_peak"] == f"{rtx['break_even_at_peak']:.2f}"
    assert ctx["spec_max_batch"] == rtx["spec_max_batch"] and ctx["peak_batch"] == rtx["baseline_peak_batch"]
    assert ctx["peak_error"] == f"{abs(evidence.incident['side_by_side']['peak_tok_s']['error_pct']):.1f}"
    cycle = ctx["why"][0]
    for row in evidence.incident["cycle_breakdown"]:
        assert f"{row['cycle_over_plain_step']:.2f} at {row['batch']} request" in cycle
    assert [r["variation"] for r in ctx["sensitivity"]] == [r["variation"] for r in evidence.incident["sensitivity"]]
    assert [r["goal"] for r in ctx["validation"]] == ["yes" if r["goal_met"] else "no" for r in evidence.validation]
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
    ctx = build._run_check_context(check, None, "EAGLE is not supported on CPU")
    assert [r["error"] for r in ctx["rows"]] == ["calibration", "20.0"] and not ctx["has_speedup"]
    assert any("MAPE 20.0%" in line and "rises as measured and rises as predicted" in line for line in ctx["lines"])
    assert any("(EAGLE is not supported on CPU)" in line and "not checked" in line for line in ctx["lines"])
    assert any("80.0% kernel launches (fixed), 15.0% GEMM compute beyond weights, 5.0% weights read" in line
               for line in ctx["lines"])
    with_speedup = {**check, "speedup_mape_pct": 12.5, "speedup_trend": {"measured": "falls", "predicted": "flat"},
                    "rows": [{**base_rows[1], "measured_eagle3_tok_s": 55.0, "accept_length": 1.5,
                              "measured_speedup": 1.1, "predicted_speedup": 1.2, "speedup_error_pct": 9.09}]}
    ctx = build._run_check_context(with_speedup, None, None)
    assert ctx["has_speedup"] and ctx["rows"][0]["predicted_speedup"] == "1.20"
    assert any("MAPE 12.5%; with concurrency it falls as measured and flat as predicted" in line
               for line in ctx["lines"])
    assert build._run_check_context(None, "no benchmark", None) == {"rows": [], "missing": "no benchmark"}


def test_eagle3_note_comes_from_the_arm_that_did_not_run():
    assert build._eagle3_note(patch_sidecar("EAGLE is not supported on CPU\nmore")) == "EAGLE is not supported on CPU"
    assert build._eagle3_note(None) is None


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
    capped = build._capacity_sentence(rtx, {**rtx, "spec_max_batch": 115})
    assert "at most 48 requests unless `--max-running-requests` is set" in capped and "would hold 115" in capped
    kv_bound = build._capacity_sentence(rtx, {**rtx, "spec_max_batch": 48})
    assert "KV cache of target and drafter holds 48 requests" in kv_bound and "--max-running" not in kv_bound
    assert "fits the KV cache of 126 requests" in kv_bound
