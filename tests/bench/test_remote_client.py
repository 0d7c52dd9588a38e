"""``eagle3lab bench``'s parts that need no server: its one-line refusals, the seeded arrivals of a request rate,
ShareGPT-format prompts, and its JSON read back by doctor."""

from __future__ import annotations

import json

import pytest

from eagle3lab.bench import remote
from eagle3lab.bench.loadgen import arrival_times
from eagle3lab.bench.workload import SweepConfig, make_prompts
from eagle3lab.commands.cli import main
from eagle3lab.doctor.bench import read_bench
from eagle3lab.errors import BenchError


def test_no_server_at_the_url_is_one_line(capsys):
    assert main(["bench", "--base-url", "http://127.0.0.1:9", "--vocab-size", "1000"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no sglang server answers" in err and "Traceback" not in err


def test_arrivals_are_a_seeded_poisson_process():
    first, again = arrival_times(200, 10.0, "0:measure:4"), arrival_times(200, 10.0, "0:measure:4")
    assert first == again and first[0] == 0.0 and first == sorted(first)
    assert 15.0 < first[-1] < 25.0  # 199 gaps of mean 0.1 s (a loose band: the draw is fixed by the seed)
    assert arrival_times(5, None, "x") is None
    with pytest.raises(BenchError):
        SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=2, request_rate=0)


def test_sharegpt_prompts_are_the_first_human_turns(tmp_path):
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([{"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "q1"}]},
                                {"conversations": []}, "junk", {"conversations": [{"from": "human", "value": "q2"}]}]))
    config = SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=5, prompt_kind="sharegpt",
                         dataset_path=str(path))
    prompts = make_prompts(config)
    assert len(prompts) == 5 and set(prompts) == {"q1", "q2"}
    assert make_prompts(config) == prompts  # same seed, same order
    bad = tmp_path / "bad.json"
    bad.write_text("[{]")
    with pytest.raises(BenchError):
        make_prompts(SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=1, prompt_kind="sharegpt",
                                 dataset_path=str(bad)))


def test_its_json_is_what_doctor_reads():
    result = remote.Result({"speculative": "u1", "baseline": "u2"},
                           {"dataset": "random-ids", "chat_template": False, "temperature": 0.0},
                           points=[remote.Point("baseline", 4, 100.0, None, 8, 0, 8, 32.0, 32.0, "u2"),
                                   remote.Point("speculative", 4, 150.0, 2.4, 8, 0, 8, 32.0, 32.0, "u1")],
                           interleaved=[{"concurrency": 4, "speedup": 1.5, "speedup_low": 1.2, "speedup_high": 1.7}])
    reading = read_bench(json.dumps(result.to_dict()))
    assert [(r.figures.arm, r.figures.concurrency, r.figures.accept_length) for r in reading.rows] == [
        ("baseline", 4, None), ("speculative", 4, 2.4)]
    assert reading.rows[0].figures.chat_template is False and reading.rows[1].figures.temperature == 0.0
    assert any("[1.20, 1.70]" in n for n in reading.notes)
