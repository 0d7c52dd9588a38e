"""doctor on partial, truncated, foreign and bad input: findings or "unknown", never a traceback; bad paths are one
line and exit 2. The launch parser is the installed sglang's own; the bench summary is printed with bench_serving's
own format strings; the CPU logs are the project's own (a real sglang 0.5.9 CPU server log, and sglang's own
argument resolution of the cpu profile's launch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.doctor.bench import parse_bench
from eagle3lab.doctor.launch import parse_command, parse_launch
from eagle3lab.doctor.run import DoctorInput, doctor, format_table
from eagle3lab.bench.diagnostics.evidence import CAUSES, NO, UNKNOWN, YES

CPU_CRASH_LOG = Path(__file__).parents[1] / "runtime" / "data" / "crashlogs" / "kimi_eagle3_wrapper_gap.log"

SPEC = ("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path Tengyunw/qwen3_8b_eagle3 --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --cuda-graph-max-bs 8 --tp 2")


def _by_cause(result):
    return {f.cause: f for f in result.findings}


def test_sglang_parser_reads_a_multi_line_file_and_picks_the_speculative_command():
    text = ("# baseline\npython3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp 2 \\\n  --cuda-graph-max-bs 8\n"
            "\n# speculative\n" + SPEC.replace(" --speculative", " \\\n    --speculative") + "\n")
    parsed = parse_launch(text)
    assert parsed.speculative.args["speculative_algorithm"] == "EAGLE3"
    assert parsed.speculative.args["tp_size"] == 2 and parsed.speculative.args["cuda_graph_max_bs"] == 8
    assert "sglang" in parsed.speculative.parser and "argument parser" in parsed.speculative.parser
    assert parsed.baseline is not None and not parsed.baseline.speculative


def test_unknown_flags_and_truncated_commands_degrade_to_the_tolerant_reader_and_say_so():
    unknown = parse_command(SPEC + " --flag-from-a-future-release 3")
    assert unknown.args["speculative_num_steps"] == 3 and unknown.args["flag_from_a_future_release"] == 3
    assert any("does not know" in note for note in unknown.notes)
    cut = parse_command("python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
                        "--speculative-num-steps")
    assert cut.parser == "tolerant fallback" and cut.args["speculative_algorithm"] == "EAGLE3"
    quote = parse_command("python -m sglang.launch_server --model-path 'unterminated --speculative-algo EAGLE")
    assert quote.notes and quote.args.get("speculative_algorithm") == "EAGLE"


@pytest.mark.parametrize("launch", ["", "# only a comment", "--speculative-num-steps", "--tp two --bogus",
                                    "python -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 "
                                    "--speculative-num-steps three --speculative-num-draft-tokens"])
def test_partial_launch_text_gives_findings_never_a_traceback(launch):
    result = doctor(DoctorInput(launch=launch, concurrency=[8]))
    assert [f.cause for f in result.findings] == list(CAUSES)
    assert all(f.applies in (YES, NO, UNKNOWN) for f in result.findings)


def test_logs_of_other_versions_and_garbage_give_unknown_not_crashes():
    v04 = ("[2025-01-13 12:42:03 TP0] Decode batch. #running-req: 1, #token: 35, token usage: 0.00, "
           "gen throughput (token/s): 5.80, #queue-req: 0\n")
    cut = "server_args=ServerArgs(model_path='m', tp_size=4, speculative_algorithm='EAGLE', cuda_graph_max_bs=8, mem"
    for log in (v04, cut, "\x00\x01 not a log \ufffd", "Decode batch #running-req: x"):
        result = doctor(DoctorInput(server_log=log))
        assert len(result.findings) == len(CAUSES)
    found = _by_cause(doctor(DoctorInput(server_log=cut, concurrency=[32])))
    assert found["cuda_graph_bs_below_concurrency"].applies == YES
    assert found["tp_communication_bound"].applies == UNKNOWN  # tp 4 but no cost model: no guess


def test_the_projects_own_cpu_server_log_is_read():
    result = doctor(DoctorInput(server_log=CPU_CRASH_LOG.read_text(encoding="utf-8")))
    found = _by_cause(result)
    assert found["overlap_scheduler_off"].applies == YES
    assert "Overlap scheduler is disabled" in found["overlap_scheduler_off"].evidence
    assert found["spec_algorithm_flag_mismatch"].applies in (NO, UNKNOWN)
    assert found["low_acceptance"].applies == UNKNOWN  # the server died before decoding: nothing to judge


def test_the_projects_own_cpu_launch_resolved_by_sglang(cpu_profile, tiny_models):
    from eagle3lab.bench.diagnostics.artifacts import resolve_server_args
    from eagle3lab.runtime.deployment import server_spec

    argv = server_spec(cpu_profile, tiny_models, speculative=True).argv()
    info, log = resolve_server_args(argv)
    result = doctor(DoctorInput(launch=" ".join(argv), server_log=log, concurrency=list(cpu_profile.bench_concurrency)))
    found = _by_cause(result)
    assert found["spec_request_cap"].applies == NO  # the profile passes --max-running-requests
    assert found["tp_communication_bound"].applies == NO
    assert found["overlap_scheduler_off"].applies == YES


def _summary(completed: int, concurrency: int, out_tok_s: float, accept: float | None) -> str:
    """bench_serving's result block, printed with its own format strings (sglang/bench_serving.py)."""
    lines = ["\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             "{:<40} {:<10}".format("Backend:", "sglang"),
             "{:<40} {:<10}".format("Max request concurrency:", concurrency),
             "{:<40} {:<10}".format("Successful requests:", completed),
             "{:<40} {:<10}".format("Total input tokens:", completed * 1000),
             "{:<40} {:<10}".format("Total generated tokens:", completed * 256),
             "{:<40} {:<10.2f}".format("Output token throughput (tok/s):", out_tok_s)]
    if accept:
        lines.append("{:<40} {:<10.2f}".format("Accept length:", accept))
    return "\n".join(lines) + "\n"


def test_bench_text_and_jsonl_give_arms_speedup_and_lengths():
    text = _summary(200, 32, 5000.0, None) + _summary(200, 32, 4200.0, 1.8)
    arms, note = parse_bench(text)
    assert [a.arm for a in arms] == ["baseline", "speculative"] and "text summary" in note
    assert arms[1].accept_length == 1.8 and arms[1].mean_input_len == 1000
    row = {"backend": "sglang", "dataset_name": "random", "max_concurrency": 16, "completed": 10,
           "total_input_tokens": 5000, "total_output_tokens": 1280, "output_throughput": 900.0, "accept_length": 2.5}
    arms, note = parse_bench(json.dumps(row) + "\n" + json.dumps({**row, "accept_length": None}) + "\n")
    assert [a.arm for a in arms] == ["speculative", "baseline"] and arms[0].mean_input_len == 500
    from eagle3lab.doctor.run import build_evidence

    ev, _ = build_evidence(DoctorInput(bench=text))
    assert ev.speedups == {32: pytest.approx(4200.0 / 5000.0)} and ev.concurrency == [32]
    found = _by_cause(doctor(DoctorInput(bench=text)))
    assert found["low_acceptance"].applies == UNKNOWN and "1.80" in found["low_acceptance"].evidence
    assert found["benchmark_method_error"].applies == NO
    assert found["draft_context_window_exceeded"].applies == UNKNOWN  # no drafter config
    assert parse_bench("nothing here")[0] == []


def test_modelled_break_even_judges_the_log_acceptance(tmp_path):
    log = ("Decode batch. #running-req: 8, #token: 900, token usage: 0.01, accept len: 1.05, accept rate: 0.26, "
           "cuda graph: True, gen throughput (token/s): 900.00, #queue-req: 0\n")
    result = doctor(DoctorInput(launch=SPEC, server_log=log, concurrency=[8], hardware="h100-sxm",
                                target_config={"architectures": ["Qwen3ForCausalLM"], **_qwen3()}, input_len=512))
    found = _by_cause(result)
    assert found["low_acceptance"].threshold_provenance == "modelled"
    assert found["low_acceptance"].applies == YES  # 1.05 accepted per cycle cannot pay for a cycle
    assert found["draft_tokens_too_many_for_batch"].applies == NO  # a chain


def _qwen3() -> dict:
    from eagle3lab.costmodel.presets import load_config

    return load_config("qwen3-8b")[0]


def test_cli_json_and_table(capsys, tmp_path):
    launch = tmp_path / "launch.txt"
    launch.write_text(SPEC + "\n", encoding="utf-8")
    assert main(["doctor", "--launch", str(launch), "--concurrency", "16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [f["cause"] for f in data["findings"]] == list(CAUSES)
    assert {"cause", "applies", "evidence", "fix", "threshold_provenance"} <= set(data["findings"][0])
    cuda = next(f for f in data["findings"] if f["cause"] == "cuda_graph_bs_below_concurrency")
    assert cuda["applies"] == "yes" and "16" in cuda["evidence"]
    assert main(["doctor", "--launch", SPEC, "--concurrency", "4"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("measured speedup: unknown")  # the speedup leads, even when unknown
    assert any(line.startswith("cause ") for line in table.splitlines()) and "cuda_graph_bs_below_concurrency" in table


def test_dcp_above_1_is_said_once_in_doctor_notes_and_dcp_0_is_one_line(capsys):
    """The cost model does not model decode context parallelism: doctor --dcp 8 says so in one note (JSON and table),
    --dcp 1 says nothing, --dcp 0 is one line and exit 2."""
    assert main(["doctor", "--launch", SPEC, "--concurrency", "4", "--dcp", "8", "--json"]) == 0
    notes = [n for n in json.loads(capsys.readouterr().out)["notes"] if "DCP 8" in n]
    assert len(notes) == 1 and "not modelled" in notes[0]
    assert main(["doctor", "--launch", SPEC, "--concurrency", "4", "--dcp", "8"]) == 0
    assert sum("DCP 8" in line and line.startswith("note: ") for line in capsys.readouterr().out.splitlines()) == 1
    assert main(["doctor", "--launch", SPEC, "--concurrency", "4", "--json"]) == 0
    assert not [n for n in json.loads(capsys.readouterr().out)["notes"] if "DCP" in n]
    assert main(["doctor", "--launch", SPEC, "--dcp", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--dcp" in err and "Traceback" not in err


def test_bad_paths_are_one_line_and_exit_2(capsys, tmp_path):
    assert main(["doctor", "--server-log", str(tmp_path / "missing.log")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.log" in err
    assert main(["doctor", "--launch", "launch.txt"]) == 2
    assert main(["doctor", "--concurrency", "eight", "--launch", SPEC]) == 2
    assert main(["doctor"]) == 2
    assert main(["doctor", "--target-config", str(tmp_path / "nope" / "config.json")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_table_lists_applying_causes_first_with_their_fix():
    result = doctor(DoctorInput(launch=SPEC.replace("--cuda-graph-max-bs 8", "--cuda-graph-max-bs 2"),
                                concurrency=[16]))
    lines = format_table(result).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("cause "))
    assert lines[header + 2].startswith("cuda_graph_bs_below_concurrency") and " yes " in lines[header + 2]
    assert "  1. cuda_graph_bs_below_concurrency (not modelled)" in lines
    assert any("fix:" in line for line in lines)


def test_a_kubernetes_args_list_cut_mid_flag_is_one_command():
    """sglang#22986's launch, as posted: a YAML args list, cut after an ambiguous '--spec'."""
    text = (Path(__file__).parent / "inputs" / "sglang-22986-k8s-args.yaml").read_text(encoding="utf-8")
    parsed = parse_launch(text)
    args = parsed.speculative.args
    assert args["speculative_algorithm"] == "EAGLE3" and args["max_running_requests"] == 96
    assert args["speculative_num_draft_tokens"] == 4 and args["mem_fraction_static"] == 0.95
    found = _by_cause(doctor(DoctorInput(launch=text, concurrency=[128])))
    assert found["spec_request_cap"].applies == YES and "96" in found["spec_request_cap"].evidence
    assert found["draft_tokens_too_many_for_batch"].applies == UNKNOWN  # --speculative-num-steps was cut off
    assert parsed.speculative.parser == "tolerant fallback" and parsed.speculative.notes  # '--spec' is ambiguous


@pytest.mark.parametrize("ids, applies", [([2, 30, 58], YES), ([1, 29, 57], NO)])
def test_capture_order_is_traced_on_the_installed_sglang(ids, applies):
    """Kimi-K2.5 (the stored config): graphs are recorded with sglang's default ids, eager forwards with the
    drafter's ids + 1; they differ unless the drafter's ids are the default shifted one layer down."""
    from eagle3lab.costmodel.presets import load_config

    result = doctor(DoctorInput(launch="--speculative-algorithm EAGLE3 --speculative-draft-model-path d",
                                target_config=load_config("kimi-k2.5")[0],
                                drafter_config={"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}))
    found = _by_cause(result)["aux_layer_ids_mismatch"]
    assert found.applies == applies and found.threshold_provenance == "traced", found.evidence
    assert any("capture order traced on the installed sglang" in n for n in result.notes)


DATA = Path(__file__).parent / "data"


def test_the_projects_own_cpu_run_logs_eagle3_and_baseline():
    """Logs of a real sglang 0.5.9 CPU run (``data/capture_cpu_logs.py``): EAGLE-3 with the trained drafter and the
    baseline, four concurrent requests, decode statistics every step."""
    spec = (DATA / "cpu_eagle3.log").read_text(encoding="utf-8")
    base = (DATA / "cpu_baseline.log").read_text(encoding="utf-8")
    assert "/work/" not in spec + base and "/root" not in spec + base
    result = doctor(DoctorInput(server_log=spec, baseline_log=base, concurrency=[4]))
    found = _by_cause(result)
    assert found["overlap_scheduler_off"].applies == YES and found["overlap_scheduler_off"].threshold_provenance == \
        "server log"
    cap = found["spec_request_cap"]
    assert cap.applies == NO and "speculative limit 4" in cap.evidence and "baseline limit 4" in cap.evidence
    assert found["no_cuda_graph"].applies == NO and "CPU" in found["no_cuda_graph"].evidence
    assert found["draft_tokens_too_many_for_batch"].applies == NO  # topk 1: a chain
    assert found["draft_tokens_too_many_for_batch"].threshold_provenance == "server log"
    low = found["low_acceptance"]
    assert low.applies == UNKNOWN and "accept-length figure(s) in the server log" in low.evidence
    from eagle3lab.bench.diagnostics.logs import log_accept_lengths

    served = log_accept_lengths(spec)
    assert len(served) > 10 and 1.0 <= min(served) and max(served) <= 4.0  # 3 steps: at most 4 per verify
    judged = _by_cause(doctor(DoctorInput(server_log=spec, concurrency=[4])))  # no threshold: never a guess
    assert judged["low_acceptance"].applies == UNKNOWN


def test_without_sglang_the_tolerant_reader_carries_the_same_flags():
    parsed = parse_launch(SPEC, use_sglang=False)
    assert parsed.speculative.parser == "tolerant fallback"
    assert parsed.speculative.args["tp_size"] == 2 and parsed.speculative.args["speculative_num_draft_tokens"] == 4
    with_sglang = parse_launch(SPEC).speculative.args
    for key in ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "cuda_graph_max_bs"):
        assert parsed.speculative.args[key] == with_sglang[key], key


def test_each_arm_benchmarked_twice_gives_the_spread_and_a_shaky_pair_is_the_method_finding():
    from eagle3lab.doctor.run import build_evidence

    # baseline, speculative, speculative, baseline: the second speculative run came out a third faster
    shaky = (_summary(200, 32, 5000.0, None) + _summary(200, 32, 4200.0, 1.8) + _summary(200, 32, 5600.0, 1.8)
             + _summary(200, 32, 5100.0, None))
    ev, notes = build_evidence(DoctorInput(bench=shaky))
    assert ev.speedups == {32: pytest.approx(4200.0 / 5000.0)}  # the first pair, as before
    spread = ev.launch_spread
    assert [s["speedup"] for s in spread["launches"]] == [pytest.approx(4200 / 5000), pytest.approx(5600 / 5100)]
    assert not spread["agrees"] and any("2 runs of each arm at concurrency 32" in n for n in notes)
    found = _by_cause(doctor(DoctorInput(bench=shaky)))
    assert found["benchmark_method_error"].applies == YES and "one draw" in found["benchmark_method_error"].evidence

    steady = (_summary(200, 32, 5000.0, None) + _summary(200, 32, 4200.0, 1.8) + _summary(200, 32, 4250.0, 1.8)
              + _summary(200, 32, 5050.0, None))
    found = _by_cause(doctor(DoctorInput(bench=steady)))
    assert found["benchmark_method_error"].applies == NO
    assert "2 measured pairs agree within 10%" in found["benchmark_method_error"].evidence
