"""Each rule of the diagnostics engine on evidence that shows its cause, on evidence that does not, and on missing
evidence ("unknown", never a guess).

Server arguments and the start-up warnings come from sglang 0.5.9 itself: ``resolve_server_args`` runs sglang's
own argument resolution on the cpu profile's real command line (no server is started). Scheduler and decode log
lines, which only a running GPU server writes, follow the f-strings in sglang's ``managers/scheduler.py`` and
``managers/scheduler_metrics_mixin.py`` with the logger prefix of ``utils/common.py configure_logger``.
"""

from __future__ import annotations

import pytest

from eagle3lab.bench import launch_spread
from eagle3lab.errors import DiagnosticsError
from eagle3lab.sidecars import LaunchSample
from eagle3lab.bench.diagnostics.artifacts import accept_lengths_from_records, resolve_server_args
from eagle3lab.bench.diagnostics.drafter_rules import layer_table_verdict, rule_aux_layers, rule_low_acceptance
from eagle3lab.bench.diagnostics.engine import diagnose
from eagle3lab.bench.diagnostics.evidence import CAUSES, NO, UNKNOWN, YES, Evidence, ModelFigures, Threshold
from eagle3lab.bench.diagnostics.launch_rules import (rule_cuda_graph_bs, rule_no_cuda_graph, rule_overlap,
                                                      rule_spec_request_cap)
from eagle3lab.bench.diagnostics.logs import decode_lines, server_args_from_log
from eagle3lab.bench.diagnostics.workload_rules import rule_bench_method, rule_prompts


def scheduler_line(limit: int, device: str = "gpu") -> str:
    """scheduler.py: the rank-0 line printed once the memory pool is sized."""
    return (f"[2026-11-29 09:20:00 TP0] max_total_num_tokens=229376, chunked_prefill_size=8192, "
            f"max_prefill_tokens=16384, max_running_requests={limit}, context_len=262144, "
            f"available_{device}_mem=7.50 GB")


def decode_line(running: int, queued: int, graph: bool, accept: float | None = None) -> str:
    """scheduler_metrics_mixin.py log_decode_stats, with the speculative part when accept is given."""
    spec = f"accept len: {accept:.2f}, accept rate: {accept / 4:.2f}, " if accept is not None else ""
    return (f"[2026-11-29 09:21:00 TP0] Decode batch, #running-req: {running}, #token: 60000, token usage: 0.26, "
            f"{spec}cuda graph: {graph}, gen throughput (token/s): 1234.56, #queue-req: {queued}")


# ------------------------------------------------------------------------------------ real sglang resolution
def _argv(spec, *, speculative: bool, drop_limit: bool = False, extra: tuple[str, ...] = ()) -> list[str]:
    from eagle3lab.runtime.deployment import server_spec

    profile, models = spec
    argv = server_spec(profile, models, speculative=speculative).argv()
    if drop_limit:
        i = argv.index("--max-running-requests")
        argv = argv[:i] + argv[i + 2:]
    return argv + list(extra)


@pytest.fixture(scope="module")
def launch(cpu_profile, tiny_models):
    return cpu_profile, tiny_models


@pytest.fixture(scope="module")
def spec_default_limit(launch):
    """EAGLE-3 on the cpu profile without --max-running-requests, with --enable-mixed-chunk asked for."""
    return resolve_server_args(_argv(launch, speculative=True, drop_limit=True, extra=("--enable-mixed-chunk",)))


@pytest.fixture(scope="module")
def baseline_default_limit(launch):
    return resolve_server_args(_argv(launch, speculative=False, drop_limit=True, extra=("--enable-mixed-chunk",)))


def test_sglang_resolution_writes_the_lines_the_rules_read(spec_default_limit, baseline_default_limit):
    spec_info, spec_log = spec_default_limit
    base_info, base_log = baseline_default_limit
    assert spec_info["max_running_requests"] == 48 and base_info["max_running_requests"] is None
    assert "Max running requests is reset to 48" in spec_log and "reset to 48" not in base_log
    assert spec_info["disable_overlap_schedule"] and not base_info["disable_overlap_schedule"]


def test_request_cap_applies_against_baseline_scheduler_limit(spec_default_limit):
    spec_info, spec_log = spec_default_limit
    found = rule_spec_request_cap(Evidence(server_args=spec_info, spec_log=spec_log + scheduler_line(48),
                                           baseline_log=scheduler_line(2048), concurrency=[128]))
    assert found.applies == YES
    assert "48" in found.evidence and "2048" in found.evidence and "reset to 48" in found.evidence


def test_request_cap_from_log_alone_shows_queueing(spec_default_limit):
    _, spec_log = spec_default_limit
    found = rule_spec_request_cap(Evidence(spec_log=spec_log + "\n" + decode_line(48, 80, True, 1.9)))
    assert found.applies == YES and "#queue-req: 80" in found.evidence


def test_request_cap_clear_when_concurrency_fits_or_limits_match(launch, spec_default_limit):
    spec_info, spec_log = spec_default_limit
    assert rule_spec_request_cap(Evidence(server_args=spec_info, spec_log=spec_log, baseline_log=scheduler_line(2048),
                                          concurrency=[16])).applies == NO
    spec_info, spec_log = resolve_server_args(_argv(launch, speculative=True))
    base_info, base_log = resolve_server_args(_argv(launch, speculative=False))
    found = rule_spec_request_cap(Evidence(server_args=spec_info, spec_log=spec_log, baseline_server_args=base_info,
                                           baseline_log=base_log, concurrency=[4]))
    assert found.applies == NO and "reset" not in found.evidence


def test_request_cap_unknown_without_evidence():
    assert rule_spec_request_cap(Evidence()).applies == UNKNOWN
    assert rule_spec_request_cap(Evidence(spec_log="nothing relevant here")).applies == UNKNOWN
    found = rule_spec_request_cap(Evidence(launch={"speculative_algorithm": "EAGLE3"}))
    assert found.applies == UNKNOWN and "server log" in found.evidence


def test_overlap_off_applies_and_clears_with_spec_v2(launch, spec_default_limit, baseline_default_limit,
                                                     monkeypatch):
    found = rule_overlap(Evidence(server_args=spec_default_limit[0], spec_log=spec_default_limit[1],
                                  baseline_server_args=baseline_default_limit[0]))
    assert found.applies == YES and "Overlap scheduler is disabled" in found.evidence
    assert "Mixed chunked prefill is disabled" in found.evidence
    monkeypatch.setenv("SGLANG_ENABLE_SPEC_V2", "True")
    spec_info, spec_log = resolve_server_args(_argv(launch, speculative=True))
    found = rule_overlap(Evidence(server_args=spec_info, spec_log=spec_log))
    assert found.applies == NO and "Spec v2 is enabled" in found.evidence
    assert rule_overlap(Evidence()).applies == UNKNOWN


def test_server_args_read_back_from_the_logged_repr_whole_or_cut(spec_default_limit):
    spec_info, _ = spec_default_limit
    fields = ", ".join(f"{k}={v!r}" for k, v in spec_info.items())
    logged = f"[2026-11-29 09:13:31] server_args=ServerArgs({fields})\n"
    parsed = server_args_from_log(logged)
    assert parsed["max_running_requests"] == 48 and parsed["speculative_algorithm"] == "EAGLE3"
    cut = logged[: logged.index("speculative_algorithm") + 60]  # pasted into an issue, cut mid-field
    assert server_args_from_log(cut)["max_running_requests"] == 48
    assert server_args_from_log("no such line") is None


def test_bad_server_info_and_bad_argv_are_one_line_errors(launch):
    with pytest.raises(DiagnosticsError, match="mapping"):
        rule_spec_request_cap(Evidence(server_args=["not", "a", "dict"]))  # type: ignore[arg-type]
    with pytest.raises(DiagnosticsError, match="sglang rejected"):
        resolve_server_args(["--model-path", "/nonexistent/model", "--device", "cpu"])


# ------------------------------------------------------------------------------------------- layer table
def _row(where: str, rank: int | None, captured: list[int], uses: str, runs_when: list[str]) -> dict:
    return {"where": where, "startup_rank": rank, "runs_when": runs_when, "uses": uses,
            "result": {"self.capture_aux_hidden_states": True, "self.model.layers_to_capture": captured}}


GRAPH = "CUDA-graph capture (replayed decode forwards)"
EAGER = "eager forwards (prefill/extend, and decode without graphs)"


def test_layers_inconsistent_when_graphs_recorded_other_ids():
    table = {"profile": "gpu", "depth": 61, "aux_layer_ids": [2, 30, 58], "rows": [
        _row("cuda_graph_runner.py:365", 0, [2, 30, 58], GRAPH, ["graphs on"]),
        _row("model_runner.py:622", 1, [3, 31, 59], EAGER, [])]}
    found = rule_aux_layers(Evidence(layer_table=table))
    assert found.applies == YES and found.threshold_provenance == "traced"
    assert "[2, 30, 58]" in found.evidence and "[3, 31, 59]" in found.evidence


def test_layers_consistent_without_graphs_or_with_matching_ids():
    no_graphs = {"profile": "cpu", "depth": 4, "aux_layer_ids": [0, 1, 2], "rows": [
        _row("model_runner.py:622", 0, [1, 2, 3], EAGER, []),
        _row("cuda_graph_runner.py:365", None, [2, 2, 1], GRAPH, ["graphs on"])]}  # never runs on cpu
    assert rule_aux_layers(Evidence(layer_table=no_graphs)).applies == NO
    same = {"profile": "gpu", "depth": 8, "rows": [_row("a", 0, [2, 4, 6], GRAPH, ["graphs on"]),
                                                   _row("b", 1, [2, 4, 6], EAGER, [])]}
    assert rule_aux_layers(Evidence(layer_table=same)).applies == NO


def test_aux_ids_outside_the_target_depth_apply_from_configs():
    drafter = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 60]}}
    assert rule_aux_layers(Evidence(drafter_config=drafter, target_config={"num_hidden_layers": 61})).applies == YES
    assert rule_aux_layers(Evidence(drafter_config=drafter,
                                    target_config={"text_config": {"num_hidden_layers": 94}})).applies == NO


def test_layer_table_missing_or_malformed():
    assert rule_aux_layers(Evidence()).applies == UNKNOWN
    with pytest.raises(DiagnosticsError, match="rows"):
        layer_table_verdict({"profile": "gpu"})


def test_layer_table_from_the_real_trace_of_sglang_0_5_9():
    from eagle3lab.trace import audit
    from eagle3lab.trace.sources import installed_source
    from eagle3lab.trace.startup import StartupProfile

    src = installed_source()
    gpu = audit.layer_table(src, "KimiK25ForConditionalGeneration", 61, [2, 30, 58], StartupProfile.gpu())
    cpu = audit.layer_table(src, "KimiK25ForConditionalGeneration", 4, [0, 1, 2], StartupProfile.cpu())
    assert rule_aux_layers(Evidence(layer_table=gpu)).applies == YES
    assert rule_aux_layers(Evidence(layer_table=cpu)).applies == NO


# -------------------------------------------------------------------------------------------- acceptance
def test_accept_lengths_use_completion_over_verify_and_skip_warmup():
    records = [
        {"phase": "measure", "ok": True, "completion_tokens": 32, "spec_verify_ct": 20, "spec_accept_length": 1.6},
        {"phase": "warmup", "ok": True, "completion_tokens": 32, "spec_verify_ct": 8},
        {"phase": "measure", "ok": True, "completion_tokens": 32, "spec_verify_ct": None},  # no speculation
        {"phase": "measure", "ok": False, "completion_tokens": 3, "spec_verify_ct": 3},
    ]
    assert accept_lengths_from_records(records) == [1.6]


def test_acceptance_against_a_measured_break_even_shows_the_modelled_one_beside_it():
    measured = Threshold(3.7, "measured", "control arm")
    modelled = Threshold(2.06, "modelled", "cost model")
    found = rule_low_acceptance(Evidence(accept_lengths=[2.3, 2.4, 2.45], break_even=measured,
                                         modelled_break_even=modelled, speedups={1: 0.61}))
    assert found.applies == YES and found.threshold_provenance == "measured"
    assert "3.70 [measured" in found.evidence and "2.06 [modelled" in found.evidence and "0.61x" in found.evidence
    clear = rule_low_acceptance(Evidence(accept_lengths=[3.1, 3.4], break_even=modelled))
    assert clear.applies == NO and clear.threshold_provenance == "modelled"
    assert rule_low_acceptance(Evidence(accept_lengths=[2.0])).applies == UNKNOWN
    assert rule_low_acceptance(Evidence(break_even=measured)).applies == UNKNOWN
    with pytest.raises(DiagnosticsError):
        rule_low_acceptance(Evidence(accept_lengths=[-1.0], break_even=measured))


def test_acceptance_read_from_decode_lines_when_no_records():
    log = "\n".join(decode_line(4, 0, True, a) for a in (1.0, 1.0, 1.0))
    found = rule_low_acceptance(Evidence(spec_log=log, break_even=Threshold(1.2, "modelled")))
    assert found.applies == YES and "1.00" in found.evidence


# ----------------------------------------------------------------------------------------------- prompts
def test_prompt_rule_compares_served_with_offline_acceptance_on_the_training_distribution():
    offline = Threshold(2.35, "measured", "offline simulation")
    near = rule_prompts(Evidence(accept_lengths=[2.2, 2.4, 2.5, 2.3, 2.45], offline_acceptance=offline))
    assert near.applies == NO  # random-id prompts are the drafter's own training distribution: no verdict from ids
    far = rule_prompts(Evidence(accept_lengths=[1.2, 1.3, 1.25, 1.1], offline_acceptance=offline))
    assert far.applies == YES and "2.35 [measured" in far.evidence


def test_prompt_rule_unknown_without_offline_acceptance_or_bench_settings():
    assert rule_prompts(Evidence(accept_lengths=[2.0])).applies == UNKNOWN


# -------------------------------------------------------------------------------------------- decode lines
def test_decode_lines_parse_sglang_format():
    lines = decode_lines(decode_line(48, 3, False, 2.25) + "\n" + decode_line(1, 0, True))
    assert [(d.running, d.queued, d.graph, d.accept_len) for d in lines] == [(48, 3, False, 2.25), (1, 0, True, None)]
    assert lines[0].gen_tok_s == 1234.56


def test_no_cuda_graph_applies_only_when_baseline_had_them():
    spec = "\n".join(decode_line(48, 0, False, 2.0) for _ in range(3))
    base = "\n".join(decode_line(200, 0, True) for _ in range(3))
    assert rule_no_cuda_graph(Evidence(spec_log=spec, baseline_log=base)).applies == YES
    assert rule_no_cuda_graph(Evidence(spec_log=spec, baseline_log=spec)).applies == NO
    assert rule_no_cuda_graph(Evidence(spec_log=decode_line(4, 0, True, 2.0), baseline_log=base)).applies == NO
    assert rule_no_cuda_graph(Evidence(spec_log="no decode lines")).applies == UNKNOWN


def test_graph_batch_below_concurrency_from_flag_and_from_decode_lines():
    assert rule_cuda_graph_bs(Evidence(launch={"cuda_graph_max_bs": 2}, concurrency=[8])).applies == YES
    assert rule_cuda_graph_bs(Evidence(launch={"cuda_graph_max_bs": 16}, concurrency=[8])).applies == NO
    log = decode_line(8, 0, True, 2.0) + "\n" + decode_line(64, 0, False, 2.0)
    assert rule_cuda_graph_bs(Evidence(spec_log=log)).applies == YES
    assert rule_cuda_graph_bs(Evidence(concurrency=[8])).applies == UNKNOWN


# ---------------------------------------------------------------------------------------------- together
def test_diagnose_gives_one_finding_per_cause_and_unknown_on_nothing():
    found = diagnose(Evidence())
    assert [f.cause for f in found] == list(CAUSES) and len(CAUSES) == 16
    assert {f.applies for f in found} == {UNKNOWN}


def test_modelled_rules_read_the_figures_they_are_given():
    model = ModelFigures(batch=8, hardware="8x GPU", cycle_parts={"all_reduce": 3.0, "weights": 1.0},
                         plain_parts={"weights": 1.0}, verify_parts={"gemm_compute": 2.0, "weights": 1.0},
                         break_even=2.5, chain_break_even=1.9, verify_distinct_experts=200.0,
                         plain_distinct_experts=60.0)
    ev = Evidence(launch={"tp_size": 8, "speculative_num_steps": 6, "speculative_eagle_topk": 10,
                          "speculative_num_draft_tokens": 32}, concurrency=[8], model=model,
                  target_config={"n_routed_experts": 384})
    found = {f.cause: f for f in diagnose(ev)}
    for cause in ("tp_communication_bound", "compute_bound_large_batch", "moe_sparsity_verify_cost",
                  "draft_tokens_too_many_for_batch"):
        assert found[cause].applies == YES and found[cause].threshold_provenance == "modelled", cause


# ------------------------------------------------------------------------------------------- launch to launch
def spread_record(agrees: bool) -> dict:
    def sample(launch: int, base: float, spec: float) -> LaunchSample:
        return LaunchSample(launch=launch, baseline_arm="b", eagle3_arm="e", baseline_tok_s=base, eagle3_tok_s=spec,
                            speedup=spec / base)

    second = 115.8 if agrees else 160.0
    record = launch_spread.spread_record([sample(1, 71.1, 110.0), sample(2, 71.1, second)], 1, "e, b | b, e")
    assert record is not None and record.agrees is agrees
    return record.model_dump()


def test_launches_that_disagree_make_the_benchmark_method_the_finding_even_for_one_sweep():
    shaky = rule_bench_method(Evidence(same_sweep=True, launch_spread=spread_record(agrees=False)))
    assert shaky.applies == YES and shaky.threshold_provenance == "measured"
    assert "over 2 measured pairs" in shaky.evidence and "one draw" in shaky.evidence
    assert "bench_launch_repeats" in shaky.fix

    steady = rule_bench_method(Evidence(same_sweep=True, launch_spread=spread_record(agrees=True)))
    assert steady.applies == NO and "2 measured pairs agree within 10%" in steady.evidence
    alone = rule_bench_method(Evidence(same_sweep=True))
    assert alone.applies == NO and "measured pairs" not in alone.evidence
