"""Each diagnostic rule on evidence that shows its cause and on evidence that does not.

Server arguments and the start-up warnings come from sglang 0.5.9 itself: ``resolve_server_args`` runs sglang's
own argument resolution on the cpu profile's real command line (no server is started). Scheduler and decode log
lines, which only a running GPU server writes, follow the f-strings in sglang's ``managers/scheduler.py`` and
``managers/scheduler_metrics_mixin.py`` with the logger prefix of ``utils/common.py configure_logger``.
"""

from __future__ import annotations

import pytest

from eagle3lab.bench.diagnostics import (Finding, RunEvidence, accept_lengths_from_records, decode_lines, diagnose,
                                         resolve_server_args, rule_acceptance_below_break_even,
                                         rule_captured_layers_inconsistent, rule_decode_without_graphs,
                                         rule_prompts_defeat_drafter, rule_running_request_limit,
                                         rule_scheduler_features_off, server_args_from_log)
from eagle3lab.errors import DiagnosticsError


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
    assert not spec_info["enable_mixed_chunk"] and base_info["enable_mixed_chunk"]


def test_running_limit_applies_against_baseline_scheduler_limit(spec_default_limit):
    spec_info, spec_log = spec_default_limit
    found = rule_running_request_limit(spec_info, spec_log + scheduler_line(48),
                                       baseline_log=scheduler_line(2048), concurrency=128)
    assert found.applies
    assert "48" in found.evidence and "2048" in found.evidence and "reset to 48" in found.evidence


def test_running_limit_applies_from_log_alone_and_shows_queueing(spec_default_limit):
    _, spec_log = spec_default_limit
    log = spec_log + "\n" + decode_line(48, 80, True, 1.9)
    found = rule_running_request_limit(spec_log=log, concurrency=128)
    assert found.applies and "#queue-req: 80" in found.evidence


def test_running_limit_clear_when_concurrency_fits(spec_default_limit):
    spec_info, spec_log = spec_default_limit
    found = rule_running_request_limit(spec_info, spec_log, baseline_log=scheduler_line(2048), concurrency=16)
    assert not found.applies


def test_running_limit_clear_when_both_runs_set_the_same_limit(launch):
    spec_info, spec_log = resolve_server_args(_argv(launch, speculative=True))
    base_info, base_log = resolve_server_args(_argv(launch, speculative=False))
    found = rule_running_request_limit(spec_info, spec_log, base_info, base_log)
    assert not found.applies and "reset" not in found.evidence


def test_running_limit_needs_evidence():
    assert rule_running_request_limit() is None
    assert rule_running_request_limit(spec_log="nothing relevant here") is None


def test_scheduler_features_off_names_overlap_and_mixed_chunk(spec_default_limit, baseline_default_limit):
    found = rule_scheduler_features_off(spec_default_limit[0], spec_default_limit[1], baseline_default_limit[0])
    assert found.applies
    assert "Overlap scheduler is disabled" in found.evidence
    assert "Mixed chunked prefill is disabled" in found.evidence


def test_scheduler_features_clear_with_spec_v2(launch, monkeypatch):
    monkeypatch.setenv("SGLANG_ENABLE_SPEC_V2", "True")
    spec_info, spec_log = resolve_server_args(_argv(launch, speculative=True))
    base_info, _ = resolve_server_args(_argv(launch, speculative=False))
    found = rule_scheduler_features_off(spec_info, spec_log, base_info)
    assert not found.applies and "Spec v2 is enabled" in found.evidence


def test_scheduler_features_need_evidence():
    assert rule_scheduler_features_off() is None


def test_server_args_read_back_from_the_logged_repr(spec_default_limit):
    spec_info, _ = spec_default_limit
    fields = ", ".join(f"{k}={v!r}" for k, v in spec_info.items())
    logged = f"[2026-11-29 09:13:31] server_args=ServerArgs({fields})\n"
    parsed = server_args_from_log(logged)
    assert parsed["max_running_requests"] == 48 and parsed["speculative_algorithm"] == "EAGLE3"
    assert server_args_from_log("no such line") is None


def test_bad_server_info_and_bad_argv_are_one_line_errors(launch):
    with pytest.raises(DiagnosticsError) as err:
        rule_running_request_limit(spec_info=["not", "a", "dict"])
    assert err.value.problem == "not_a_mapping"
    with pytest.raises(DiagnosticsError) as err:
        resolve_server_args(["--model-path", "/nonexistent/model", "--device", "cpu"])
    assert (err.value.problem, err.value.what) == ("rejected", "server args")


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
    found = rule_captured_layers_inconsistent(table)
    assert found.applies
    assert "[2, 30, 58]" in found.evidence and "[3, 31, 59]" in found.evidence


def test_layers_consistent_without_graphs_or_with_matching_ids():
    no_graphs = {"profile": "cpu", "depth": 4, "aux_layer_ids": [0, 1, 2], "rows": [
        _row("model_runner.py:622", 0, [1, 2, 3], EAGER, []),
        _row("cuda_graph_runner.py:365", None, [2, 2, 1], GRAPH, ["graphs on"])]}  # never runs on cpu
    assert not rule_captured_layers_inconsistent(no_graphs).applies
    same = {"profile": "gpu", "depth": 8, "rows": [_row("a", 0, [2, 4, 6], GRAPH, ["graphs on"]),
                                                   _row("b", 1, [2, 4, 6], EAGER, [])]}
    assert not rule_captured_layers_inconsistent(same).applies


def test_layer_table_missing_or_malformed():
    assert rule_captured_layers_inconsistent(None) is None
    with pytest.raises(DiagnosticsError) as err:
        rule_captured_layers_inconsistent({"profile": "gpu"})
    assert (err.value.problem, err.value.what) == ("no_rows", "layer table")


def test_layer_table_from_the_real_trace_of_sglang_0_5_9():
    from eagle3lab.trace import audit
    from eagle3lab.trace.sources import installed_source
    from eagle3lab.trace.startup import StartupProfile

    src = installed_source()
    gpu = audit.layer_table(src, "KimiK25ForConditionalGeneration", 61, [2, 30, 58], StartupProfile.gpu())
    cpu = audit.layer_table(src, "KimiK25ForConditionalGeneration", 4, [0, 1, 2], StartupProfile.cpu())
    assert rule_captured_layers_inconsistent(gpu).applies
    assert not rule_captured_layers_inconsistent(cpu).applies


# -------------------------------------------------------------------------------------------- acceptance
def test_accept_lengths_use_completion_over_verify_and_skip_warmup():
    records = [
        {"phase": "measure", "ok": True, "completion_tokens": 32, "spec_verify_ct": 20, "spec_accept_length": 1.6},
        {"phase": "warmup", "ok": True, "completion_tokens": 32, "spec_verify_ct": 8},
        {"phase": "measure", "ok": True, "completion_tokens": 32, "spec_verify_ct": None},  # no speculation
        {"phase": "measure", "ok": False, "completion_tokens": 3, "spec_verify_ct": 3},
    ]
    assert accept_lengths_from_records(records) == [1.6]


def test_acceptance_below_and_above_break_even():
    low = rule_acceptance_below_break_even([1.2, 1.4, 1.5], 1.77, "at batch 48")
    assert low.applies and "1.37" in low.evidence and "1.77" in low.evidence
    assert not rule_acceptance_below_break_even([3.1, 3.4], 1.77).applies
    assert rule_acceptance_below_break_even([], 1.77) is None
    assert rule_acceptance_below_break_even([2.0], None) is None
    with pytest.raises(DiagnosticsError):
        rule_acceptance_below_break_even([-1.0], 1.5)


# ----------------------------------------------------------------------------------------------- prompts
NATURAL = ("the engineer started the server with the drafter and the server crashed because the wrapper did not "
           "pass the call to the model it wraps so the engineer patched the wrapper and the server started and "
           "the throughput of the server did not change with the drafter on or off in the benchmark of the team "
           "and the team asked why the drafter did not help the server when the benchmark sent many requests")


def _word_ids(text: str) -> list[int]:
    vocab: dict[str, int] = {}
    return [vocab.setdefault(word, 100 + len(vocab)) for word in text.split()]


def test_prompts_random_ids_and_synthetic_runs_apply():
    assert rule_prompts_defeat_drafter(dataset_name="random-ids").applies
    assert rule_prompts_defeat_drafter(prompt_kind="ids").applies
    runs = [[(500 + i + j) % 1024 for j in range(32)] for i in range(4)]  # bench_serving random-ids shape
    found = rule_prompts_defeat_drafter(prompts=runs)
    assert found.applies and "consecutive" in found.evidence
    import random

    rng = random.Random(0)
    uniform = [[rng.randrange(163840) for _ in range(128)] for _ in range(3)]
    assert rule_prompts_defeat_drafter(prompts=uniform).applies


def test_prompts_natural_text_is_clear():
    ids = _word_ids(NATURAL)
    assert len(ids) >= 64
    found = rule_prompts_defeat_drafter(dataset_name="sharegpt", prompts=[ids, ids[5:]])
    assert not found.applies
    assert rule_prompts_defeat_drafter() is None


# -------------------------------------------------------------------------------------------- decode lines
def test_decode_lines_parse_sglang_format():
    lines = decode_lines(decode_line(48, 3, False, 2.25) + "\n" + decode_line(1, 0, True))
    assert [(d.running, d.queued, d.graph, d.accept_len) for d in lines] == [(48, 3, False, 2.25), (1, 0, True, None)]
    assert lines[0].gen_tok_s == 1234.56


def test_decode_without_graphs_applies_only_when_baseline_had_them():
    spec = "\n".join(decode_line(48, 0, False, 2.0) for _ in range(3))
    base = "\n".join(decode_line(200, 0, True) for _ in range(3))
    assert rule_decode_without_graphs(spec, base).applies
    assert not rule_decode_without_graphs(spec, spec.replace("accept len: 2.00, accept rate: 0.50, ", "")).applies
    assert not rule_decode_without_graphs(decode_line(4, 0, True, 2.0), base).applies
    assert rule_decode_without_graphs("no decode lines") is None


# ---------------------------------------------------------------------------------------------- together
def test_diagnose_reports_only_rules_with_evidence(spec_default_limit):
    info, log = spec_default_limit
    found = diagnose(RunEvidence(spec_log=log, spec_server_info=info, accept_lengths=[1.3, 1.5], break_even=1.8,
                                 concurrency=64, prompt_kind="ids"))
    names = {f.rule for f in found}
    assert all(isinstance(f, Finding) and f.applies for f in found)
    assert names == {"running-request limit under speculative decoding",
                     "scheduler features turned off by speculative decoding",
                     "acceptance length below break-even", "prompts that defeat the drafter"}
    assert diagnose(RunEvidence()) == []


# ------------------------------------------------------------------------------------------ from artifacts
def _arm(name: str, concurrency: int, server_info: dict, records: list, out_dir, kind: str):
    import json

    from eagle3lab.bench.sweep import ARM_MEASURED, ArmResult, PointResult
    from eagle3lab.bench.metrics import compute_point_metrics

    jsonl = out_dir / f"{name}.requests.jsonl"
    jsonl.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records), encoding="utf-8")
    metrics = compute_point_metrics(records)
    point = PointResult(concurrency, "ok", None, metrics, server_info, concurrency, 0, 0, True, "t")
    return ArmResult(name=name, status=ARM_MEASURED, kind=kind, sweep={"prompt_kind": "ids"}, points=[point],
                     requests_file=jsonl.name)


def _records(concurrency: int, verify_ct: int | None):
    from eagle3lab.bench.metrics import RequestRecord

    return [RequestRecord(request_id=str(i), concurrency=concurrency, phase="measure", ok=True, t_scheduled=0.0,
                          t_sent=0.0, token_times=[0.1 * (k + 1) for k in range(8)], t_end=0.8, prompt_len=32,
                          prompt_tokens=32, completion_tokens=8, spec_verify_ct=verify_ct)
            for i in range(concurrency)]


def test_evidence_from_artifacts_reads_every_source(tmp_path, spec_default_limit, baseline_default_limit):

    from eagle3lab.bench.sweep import BenchReport
    from eagle3lab.bench.diagnostics import evidence_from_artifacts

    spec_info, spec_log = spec_default_limit
    base_info, base_log = baseline_default_limit
    report = BenchReport.create("gpu", [_arm("baseline", 64, base_info, _records(64, None), tmp_path, "baseline"),
                                        _arm("eagle3", 64, spec_info, _records(64, 5), tmp_path, "eagle3")])
    (tmp_path / "spec.log").write_text(spec_log, encoding="utf-8")
    table = {"profile": "gpu", "depth": 61, "aux_layer_ids": [2, 30, 58], "rows": [
        _row("cuda_graph_runner.py:365", 0, [2, 30, 58], GRAPH, ["graphs on"]),
        _row("model_runner.py:622", 1, [3, 31, 59], EAGER, [])]}
    cpu_table = {**table, "profile": "cpu", "rows": table["rows"][1:]}
    ev = evidence_from_artifacts(report, tmp_path, spec_log=tmp_path / "spec.log", layer_tables=[table, cpu_table],
                                 layer_profile="cpu", break_even=1.8)
    assert ev.accept_lengths == [8 / 5] * 64 and ev.concurrency == 64 and ev.prompt_kind == "ids"
    assert ev.layer_table == [cpu_table]
    found = {f.rule: f for f in diagnose(ev)}
    assert found["running-request limit under speculative decoding"].applies
    assert found["acceptance length below break-even"].applies
    assert not found["captured layers differ between CUDA-graph and eager forwards"].applies
    with pytest.raises(DiagnosticsError) as err:
        evidence_from_artifacts(spec_log=tmp_path / "missing.log")
    assert (err.value.problem, err.value.path) == ("missing", tmp_path / "missing.log")
    assert evidence_from_artifacts(layer_tables=[table], layer_profile="cpu").layer_table is None
