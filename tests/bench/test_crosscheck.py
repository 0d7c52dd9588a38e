"""bench_serving cross-check: our flags exist in the installed sglang 0.5.9 source; its output file is read
strictly. (Running it against a real server is in test_bench.py.)"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest

from eagle3lab.bench.crosscheck import BenchServingRun, bench_serving_argv, compare, read_bench_serving_output, round_order
from eagle3lab.errors import BenchError
from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
from eagle3lab.bench.workload import SweepConfig

CONFIG = SweepConfig(concurrency=[1, 4], input_len=32, output_len=16, num_prompts=20)


def test_every_flag_we_pass_exists_in_the_installed_bench_serving(tmp_path):
    source = Path(find_spec("sglang.bench_serving").origin).read_text(encoding="utf-8")
    argv = bench_serving_argv("http://h:1", "/m", CONFIG, 4, tmp_path / "o.jsonl")
    flags = [a for a in argv if a.startswith("--")]
    assert flags and all(f'"{flag}"' in source for flag in flags), [f for f in flags if f'"{f}"' not in source]
    assert '"random-ids"' in source
    value = dict(zip(argv, argv[1:]))
    assert value["--max-concurrency"] == "4" and value["--random-range-ratio"] == "1"
    assert value["--warmup-requests"] == "4" and value["--num-prompts"] == "20"


def test_output_file_is_read_from_its_last_json_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"output_throughput": 1.0}) + "\n" + json.dumps({"output_throughput": 2.5}) + "\n")
    assert read_bench_serving_output(path)["output_throughput"] == 2.5


@pytest.mark.parametrize("content, problem", [(None, "missing"), ("", "empty"), ("not json", "not_json"),
                                              ('{"completed": 0}', "missing_key")])
def test_bad_output_files_fail_in_one_line(tmp_path, content, problem):
    path = tmp_path / "out.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BenchError) as info:
        read_bench_serving_output(path)
    assert (info.value.problem, info.value.path) == (problem, path)
    assert "\n" not in str(info.value)


def _rate(tokens: int, seconds: float, concurrency: int = 4):
    """One measured request of ``tokens`` over ``seconds``: a point of that rate."""
    return compute_point_metrics([RequestRecord("r", concurrency, "measure", True, 0.0, t_sent=0.0,
                                                token_times=[seconds / 2, seconds], t_end=seconds,
                                                completion_tokens=tokens)])


def _theirs(tokens: int, seconds: float, busy: float | None = None) -> BenchServingRun:
    return BenchServingRun({"output_throughput": tokens / seconds, "total_output_tokens": tokens, "duration": seconds,
                            "completed": 1, "server_info": {"big": 1}}, ["x"], seconds + 5.0, busy)


def test_each_client_is_pooled_over_its_rounds_and_every_round_kept():
    # ours: 12 tokens in 1 s, then 12 in 2 s -> pooled 24 / 3 = 8 tok/s (a mean of rates would say 9)
    # theirs: 20 in 2 s, then 10 in 1 s -> pooled 10 tok/s
    check = compare([_rate(12, 1.0), _rate(12, 2.0)], [_theirs(20, 2.0, 0.5), _theirs(10, 1.0, 0.7)], 1)
    assert check.ours_rounds == pytest.approx([12.0, 6.0]) and check.theirs_rounds == pytest.approx([10.0, 10.0])
    assert (check.ours_output_tok_per_s, check.theirs_output_tok_per_s) == pytest.approx((8.0, 10.0))
    assert check.ratio == pytest.approx(0.8)
    assert check.rounds == 2 and check.round_ratios == pytest.approx([1.2, 0.6])
    assert check.order == ["ours", "theirs"]
    assert "server_info" not in check.theirs and check.theirs["completed"] == 1
    saved = json.loads(json.dumps(check.to_dict()))
    assert saved["machine_cpu_busy"] == pytest.approx(0.6) and saved["round_ratios"] == pytest.approx([1.2, 0.6])
    assert saved["rounds"] == 2


def test_round_order_is_mirrored():
    assert round_order(1) == ["ours"]
    assert round_order(4) == ["ours", "theirs", "ours", "theirs"]


def test_compare_refuses_what_cannot_be_compared():
    with pytest.raises(BenchError) as err:
        compare([_rate(12, 1.0)], [BenchServingRun({"output_throughput": 0.0}, [], 0.0, None)], 1)
    assert err.value.problem == "zero_throughput"
    with pytest.raises(BenchError) as err:
        compare([_rate(12, 1.0), _rate(1, 1.0, concurrency=2)], [_theirs(10, 1.0), _theirs(10, 1.0)], 1)
    assert err.value.problem == "mixed_concurrency"
    with pytest.raises(BenchError) as err:
        compare([_rate(12, 1.0)], [_theirs(10, 1.0), _theirs(10, 1.0)], 1)
    assert err.value.problem == "unpaired_rounds"
