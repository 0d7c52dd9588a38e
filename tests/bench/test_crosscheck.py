"""bench_serving cross-check: our flags exist in the installed sglang 0.5.9 source; its output file is read
strictly. (Running it against a real server is in test_bench.py.)"""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest

from eagle3lab.bench.crosscheck import BenchServingRun, bench_serving_argv, compare, read_bench_serving_output
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


def test_ratio_is_ours_over_theirs():
    rec = RequestRecord("r", 4, "measure", True, 0.0, t_sent=0.0, token_times=[0.5, 1.0], t_end=1.0,
                        completion_tokens=12)
    ours = compute_point_metrics([rec])  # 12 tokens in 1 s
    run = BenchServingRun({"output_throughput": 10.0, "completed": 1, "server_info": {"big": 1}}, ["x"], 2.0, 0.5)
    slower = compute_point_metrics([RequestRecord("r", 4, "measure", True, 0.0, t_sent=0.0, token_times=[1.0, 2.0],
                                                  t_end=2.0, completion_tokens=12)])  # 6 tok/s
    check = compare([ours, slower], run, 1)
    assert check.ours_before_after == pytest.approx([12.0, 6.0])
    assert check.ratio == pytest.approx(0.9)  # mean 9 tok/s over 10
    assert "server_info" not in check.theirs and check.theirs["completed"] == 1
    assert json.loads(json.dumps(check.to_dict()))["machine_cpu_busy"] == 0.5
    with pytest.raises(BenchError) as err:
        compare([ours], BenchServingRun({"output_throughput": 0.0}, [], 0.0, None), 1)
    assert err.value.problem == "zero_throughput"
    other = compute_point_metrics([RequestRecord("r", 2, "measure", True, 0.0, t_sent=0.0, token_times=[1.0],
                                                 t_end=1.0, completion_tokens=1)])
    with pytest.raises(BenchError) as err:
        compare([ours, other], run, 1)
    assert err.value.problem == "mixed_concurrency"
