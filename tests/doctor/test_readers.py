"""Each benchmark format doctor reads, on text printed with the format strings of the tool's own source (each
test names the file and release), and the numbers it must find there."""

from __future__ import annotations

import json

import pytest
import tabulate

from eagle3lab.doctor.bench import read_bench
from eagle3lab.doctor.run import DoctorInput, build_evidence


def _arms(text: str):
    reading = read_bench(text)
    return [(r.figures.arm, r.figures.concurrency, r.figures.output_tok_s, r.figures.accept_length)
            for r in reading.rows], reading


def vllm_summary(concurrency: int, out_tok_s: float, accept: float | None, failed: int = 0) -> str:
    """``vllm bench serve``'s result, printed with vllm/benchmarks/serve.py's own format strings (vLLM main,
    2026: the ``benchmark()`` summary and its ``Speculative Decoding`` section)."""
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             "{:<40} {:<10}".format("Successful requests:", 100), "{:<40} {:<10}".format("Failed requests:", failed),
             "{:<40} {:<10}".format("Maximum request concurrency:", concurrency),
             "{:<40} {:<10.2f}".format("Benchmark duration (s):", 40.0),
             "{:<40} {:<10}".format("Total input tokens:", 102400),
             "{:<40} {:<10}".format("Total generated tokens:", 25600),
             "{:<40} {:<10.2f}".format("Output token throughput (tok/s):", out_tok_s)]
    if accept is not None:
        lines += ["{s:{c}^{n}}".format(s="Speculative Decoding", n=50, c="-"),
                  "{:<40} {:<10.2f}".format("Acceptance rate (%):", 45.0),
                  "{:<40} {:<10.2f}".format("Acceptance length:", accept)]
    return "\n".join(lines + ["=" * 50]) + "\n"


def test_vllm_bench_serve_text_gives_both_arms_and_the_speedup():
    arms, reading = _arms(vllm_summary(16, 1000.0, None) + vllm_summary(16, 850.0, 2.1, failed=2))
    assert arms == [("baseline", 16, 1000.0, None), ("speculative", 16, 850.0, 2.1)]
    assert "vllm bench serve" in reading.rows[0].figures.source and reading.rows[1].figures.failed == 2
    assert reading.rows[0].figures.mean_input_len == 1024.0
    ev, _ = build_evidence(DoctorInput(bench=vllm_summary(16, 1000.0, None) + vllm_summary(16, 850.0, 2.1)))
    assert ev.speedups == {16: pytest.approx(0.85)}
    assert ev.temperature is None  # vLLM's client is not known to send greedy requests: no default assumed


def test_vllm_saved_result_json():
    """``--save-result``: the ``result`` dict of vllm/benchmarks/serve.py (its spec_decode_* keys), indented."""
    result = {"duration": 40.0, "completed": 100, "failed": 0, "total_input_tokens": 102400,
              "total_output_tokens": 25600, "output_throughput": 640.0, "max_concurrency": 8,
              "spec_decode_acceptance_length": 2.4, "max_concurrent_requests": 8}
    arms, _ = _arms(json.dumps(result, indent=4))
    assert arms == [("speculative", 8, 640.0, 2.4)]


def send_one_output(latency: float, tokens: int, acc_length: float, speed: float) -> str:
    """send_one's table, printed as sglang 0.5.9's sglang/test/send_one.py prints it (tabulate, "pretty")."""
    headers = ["Latency (s)", "Tokens", "Acc Length", "Speed (token/s)"]
    rows = [[f"{latency:.3f}", f"{tokens}", f"{acc_length:.3f}", f"{speed:.2f}"]]
    return "Here is a FastAPI server ...\n\n" + tabulate.tabulate(rows, headers=headers, tablefmt="pretty") + "\n"


def test_send_one_table_is_one_stream():
    arms, reading = _arms(send_one_output(4.386, 512, 2.645, 116.73))
    assert arms == [("speculative", 1, 116.73, 2.645)]
    assert "send_one table" in reading.rows[0].figures.source
    arms, _ = _arms(send_one_output(5.0, 512, 1.0, 102.4))  # no speculation (or nothing accepted)
    assert arms == [("baseline", 1, 102.4, None)]


def test_acc_length_speed_lines_of_sglangs_eagle_tests():
    """sglang 0.5.9 sglang/test/kits/spec_decoding_kit.py: f"{acc_length=:.2f} {speed=:.2f}" after send_one, and
    its CI summary f"{acc_length=:.2f}\\n" f"{speed=:.2f} token/s\\n"; the multi-turn form "Turn 1 - ..."."""
    acc_length, speed = 2.4567, 150.321
    printed = f"{acc_length=:.2f} {speed=:.2f}\n"
    summary = "### test_bs_1_speed (meta-llama/Llama-3.1-8B-Instruct)\n" f"{acc_length=:.2f}\n" f"{speed=:.2f} token/s\n"
    turn = f"Turn 1 - {acc_length=:.2f}, {speed=:.2f} token/s\n"
    for text in (printed, summary, turn):
        arms, _ = _arms(text)
        assert arms == [("speculative", 1, 150.32, 2.46)], text


def test_bench_speculative_finish_lines_and_records():
    """sgl-project/sglang scripts/playground/bench_speculative.py: the 'Finish' line and the JSON record it appends
    to --output (batch_size, steps, topk, num_draft_tokens, acc_length, step_time, speed, completion_tokens)."""
    batch_size, steps, topk, num_draft_tokens, speed, step_time = 4, 3, 1, 4, 612.5, 0.0183
    finish = (f"Finish {batch_size=}, {steps=}, {topk=}, {num_draft_tokens=}, {speed=:.2f} token/s, "
              f"step_time={step_time * 1000:.2f} ms\n")
    arms, reading = _arms(finish)
    assert arms == [("speculative", 4, 612.5, None)]
    assert reading.rows[0].flags == {"speculative_num_steps": 3, "speculative_eagle_topk": 1,
                                     "speculative_num_draft_tokens": 4}
    record = {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.71,
              "step_time": step_time, "speed": speed, "completion_tokens": 2048}
    arms, _ = _arms(finish + json.dumps(record) + "\n")
    assert arms == [("speculative", 4, 612.5, 2.71)]  # the record repeats the line, with the acceptance


def test_sglang_benchmark_scripts():
    """benchmark/mtbench/bench_sglang_eagle.py's summary line; benchmark/gsm8k/bench_sglang.py's two lines
    (sgl-project/sglang main)."""
    questions, output_throughput, accept_length = list(range(80)), 523.4123, 2.8712
    mtbench = (f"#questions: {len(questions)}, Throughput: {output_throughput:.2f} token/s, "
               f"Acceptance length: {accept_length:.2f}\n")
    arms, reading = _arms(mtbench)
    assert arms == [("speculative", None, 523.41, 2.87)] and reading.rows[0].figures.num_prompts == 80
    gsm8k = (f"Accuracy: 0.812\nInvalid: 0.000\nLatency: 41.200 s\nOutput throughput: {output_throughput:.3f} token/s\n"
             f"Acceptance length: {accept_length:.3f}\n")
    arms, _ = _arms(gsm8k)
    assert arms == [("speculative", None, 523.412, 2.871)]


def specforge_block(name: str, throughput: float, accept: float) -> str:
    """SpecForge benchmarks/benchmarker/utils.py print_results, its f-strings."""
    return (f"\n{'=' * 50}\n{name} Evaluation Results\n{'=' * 50}\nNumber of questions: 80\n"
            f"Average Latency: {12.3456:.3f} s\nAverage Output throughput: {throughput:.3f} token/s\n"
            f"Average Accept length: {accept:.3f}\n{'=' * 50}\n\n")


def test_specforge_printed_results_and_results_file():
    arms, reading = _arms(specforge_block("mtbench", 523.456, 2.87))
    assert arms == [("speculative", None, 523.456, 2.87)] and reading.rows[0].figures.dataset == "mtbench"
    results = {"model": "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B", "mtbench": [
        {"batch_size": 1, "steps": 0, "topk": 0, "num_draft_tokens": 0, "num_samples": 80,
         "metrics": [{"latency": 60.0, "output_throughput": 160.0, "accept_length": 1.0, "accuracy": None}]},
        {"batch_size": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "num_samples": 80,
         "metrics": [{"latency": 30.0, "output_throughput": 320.0, "accept_length": 3.1, "accuracy": None}]}]}
    arms, reading = _arms(json.dumps(results, indent=4))
    assert arms == [("baseline", 1, 160.0, None), ("speculative", 1, 320.0, 3.1)]
    assert reading.rows[1].flags["speculative_num_draft_tokens"] == 4
    ev, _ = build_evidence(DoctorInput(bench=json.dumps(results)))
    assert ev.speedups == {1: pytest.approx(2.0)}


MARKDOWN = """Results on 1x H20:

| bs | steps | topk | num_draft | throughput | acc len |
|----|-------|------|-----------|------------|---------|
| 1  | 0     | 0    | 0         | 95.2       | -       |
| 1  | 3     | 1    | 4         | 201.7      | 2.91    |
| 32 | 0     | 0    | 0         | 2,410.0    | -       |
| 32 | 3     | 1    | 4         | 2,190.5    | 2.88    |
"""


def test_markdown_table_with_steps_gives_arms_per_batch():
    arms, reading = _arms(MARKDOWN)
    assert arms == [("baseline", 1, 95.2, None), ("speculative", 1, 201.7, 2.91), ("baseline", 32, 2410.0, None),
                    ("speculative", 32, 2190.5, 2.88)]
    ev, _ = build_evidence(DoctorInput(bench=MARKDOWN))
    assert ev.speedups == {1: pytest.approx(201.7 / 95.2), 32: pytest.approx(2190.5 / 2410.0)}


def test_whitespace_and_split_column_tables():
    spaces = ("method        batch   tok/s    accept length\n"
              "baseline      8       812.4    -\n"
              "EAGLE-3       8       790.1    1.93\n")
    arms, _ = _arms(spaces)
    assert arms == [("baseline", 8, 812.4, None), ("speculative", 8, 790.1, 1.93)]
    split = ("| concurrency | baseline tok/s | EAGLE-3 tok/s | speedup | acc len |\n"
             "|---|---|---|---|---|\n| 4 | 300 | 450 | 1.5x | 2.2 |\n")
    arms, reading = _arms(split)
    assert arms == [("baseline", 4, 300.0, None), ("speculative", 4, 450.0, 2.2)]
    assert reading.rows[1].speedup == 1.5


@pytest.mark.parametrize("bad", ["1.2.3", "2.10..", "...", "abc", "nan", "1e999"])
def test_half_read_numbers_are_skipped_with_a_note(bad):
    text = f"#questions: 80, Throughput: {bad} token/s, Acceptance length: 2.1\n"
    reading = read_bench(text)
    assert reading.rows == [] and any("unreadable" in n for n in reading.notes)
    table = f"| bs | throughput | acc len |\n|---|---|---|\n| 1 | {bad} | 2.0 |\n| 2 | 300 | 2.2 |\n"
    reading = read_bench(table)
    assert [(r.figures.concurrency, r.figures.output_tok_s) for r in reading.rows] == [(2, 300.0)]


def test_a_sentence_final_full_stop_still_reads():
    arms, _ = _arms("acc_length=2.10. speed=99.5 token/s\n")
    assert arms == [("speculative", 1, 99.5, 2.1)]


@pytest.mark.parametrize("row", [
    {"completed": [1, 2], "output_throughput": "fast", "max_concurrency": {"a": 1}},
    {"completed": "10", "output_throughput": [100.0], "accept_length": "2.x", "total_input_tokens": []},
    {"completed": True, "output_throughput": None, "max_concurrency": -3, "extra_request_body": "{[[["},
])
def test_jsonl_fields_of_the_wrong_type_never_raise(row):
    reading = read_bench(json.dumps(row) + "\n")
    for r in reading.rows:
        assert r.figures.concurrency is None or isinstance(r.figures.concurrency, int)
        assert r.figures.output_tok_s is None or isinstance(r.figures.output_tok_s, float)
    ev, notes = build_evidence(DoctorInput(bench=json.dumps(row)))
    assert notes


def test_deeply_nested_json_is_skipped():
    deep = "{" + '"a":[' * 50_000 + "]" * 50_000 + "}"
    reading = read_bench(deep + "\n" + deep)
    assert reading.rows == [] and any("no benchmark result recognised" in n for n in reading.notes)
