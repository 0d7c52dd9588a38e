"""The benchmark harness against the REAL sglang 0.5.9 CPU server with the tiny Kimi-K2.5 model.

Server tests (marker ``server``) launch real servers: a short sweep, a cross-check with sglang's own
bench_serving, text prompts, and a server killed mid-sweep (finished requests survive, the point is marked
failed, the sweep ends without hanging). The rest checks bad input without a server.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from eagle3lab.bench.sweep import (ARM_FAILED, ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_MEASURED, ARM_NOT_RUNNABLE,
                                   POINT_FAILED, POINT_OK, BenchReport, load_requests, not_runnable_arm, run_arm)
from eagle3lab.bench.crosscheck import cross_check
from eagle3lab.bench.floor import measure_noise_floor
from eagle3lab.errors import BenchError
from eagle3lab.bench.metrics import compute_point_metrics
from eagle3lab.bench.workload import SweepConfig, model_vocab_size
from timing import patience


def sweep(tiny_models, **kw) -> SweepConfig:
    base = dict(concurrency=[1, 2], input_len=8, output_len=8, num_prompts=4,
                vocab_size=model_vocab_size(tiny_models.target), request_timeout_s=120)
    base.update(kw)
    return SweepConfig(**base)


def baseline_spec(cpu_profile, tiny_models):
    """The profile's no-speculation launch (the shims the control run uses) on a free port."""
    from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS
    from eagle3lab.runtime.deployment import server_spec
    from eagle3lab.runtime.server import free_port

    return server_spec(cpu_profile, tiny_models, speculative=False, shims=CONTROL_SHIMS, port=free_port())


@pytest.fixture(scope="module")
def baseline_server(tmp_path_factory, cpu_profile, tiny_models):
    """A real no-speculation CPU server, torn down (whole tree) after the module."""
    from eagle3lab.runtime.server import running_server

    spec = baseline_spec(cpu_profile, tiny_models)
    with running_server(spec, tmp_path_factory.mktemp("bench") / "server.log", cpu_profile.ready_timeout_s) as srv:
        yield srv


@pytest.mark.server
def test_short_sweep_measures_every_point_from_server_counts(baseline_server, tiny_models, tmp_path):
    config = sweep(tiny_models)
    arm = run_arm("baseline", baseline_server.spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE,
                  log=lambda line: None)
    assert arm.status == ARM_MEASURED and [p.concurrency for p in arm.points] == [1, 2]
    records = load_requests(tmp_path / arm.requests_file)
    assert len(records) == sum(config.warmup_count(c) + config.num_prompts for c in config.concurrency)
    for point in arm.points:
        m = point.metrics
        assert point.status == POINT_OK and point.flushed and m.completed == config.num_prompts
        assert m.output_tokens == config.num_prompts * config.output_len  # ignore_eos: exactly max_new_tokens
        assert m.input_tokens == config.num_prompts * config.input_len  # the server's own prompt count
        assert m.accept_length is None  # no speculation -> no acceptance, not zero
        assert m.ttft_s.p50 > 0 and m.itl_s.count > 0 and m.client_cpu_s_per_1k_tokens > 0
        assert "internal_states" in point.server_info
        assert point.server_cpu > 0 and point.other_cpu is not None  # the server was found and its tree measured
        measured = [r for r in records if r.concurrency == point.concurrency and r.phase == "measure"]
        assert all(r.spec_verify_ct is None and r.completion_tokens == config.output_len for r in measured)
        assert all(len(r.output_ids) == config.output_len and sum(r.chunk_tokens) == config.output_len
                   for r in measured)  # the generated ids (lossless check) and the tokens each chunk carried
        assert sorted(r.prompt_index for r in measured) == list(range(config.num_prompts))
        assert all(r.t_scheduled <= r.t_sent < r.token_times[0] <= r.t_end for r in measured)
        # Every number is recomputable from the JSONL alone.
        assert compute_point_metrics(measured, client_cpu_s=m.client_cpu_s) == m
    saved = json.loads((tmp_path / "baseline.arm.json").read_text())
    assert saved["points"][1]["metrics"]["output_tokens"] == arm.points[1].metrics.output_tokens


@pytest.mark.server
def test_the_noise_floor_is_measured_on_a_live_baseline_server(baseline_server, tiny_models, tmp_path):
    """bench.floor on the module's server (issue 41, item 2): concurrency 1 against the sweep's highest on the same
    prompts; the fp32 tiny model gives the floor whatever it is, recorded with how it was measured."""
    config = sweep(tiny_models, concurrency=[1, 2, 4], num_prompts=3, prompts_per_concurrency=2)
    floor = measure_noise_floor(baseline_server.spec.base_url, config, tmp_path, "test server")
    assert (floor.low, floor.high, floor.prompts) == (1, 4, 3), "the concurrency-1 prompts, compared at 4"
    assert floor.tokens_compared == 3 * config.output_len and 0.0 <= floor.bound <= floor.agreement <= 1.0
    assert floor.workload["prompts_at_concurrency_1"] == 3 and "concurrency 1 (3 prompts) and 4 (8 prompts" in floor.how


@pytest.mark.server
def test_cross_check_with_sglang_bench_serving(baseline_server, tiny_models, tmp_path):
    """Same server, same lengths and concurrency: both clients must count the same tokens (a client that counted
    stream chunks would not). Their speed ratio is recorded, not asserted: it is a wall-clock figure, and another
    job on this shared machine during either measurement moves it (the report shows it with the machine's load)."""
    # 8 prompts at concurrency 2, one round: enough to count tokens both ways (the assertions); the ratio itself
    # is the report's (notebook 03 measures it in the profile's rounds), not this test's
    config = sweep(tiny_models, concurrency=[2], num_prompts=8)
    check = cross_check(2, baseline_server.spec.base_url, tiny_models.target, config, tmp_path)
    assert check.concurrency == 2 and check.rounds == 1 and check.order == ["ours"]
    assert check.theirs["completed"] == config.num_prompts
    assert check.theirs["total_output_tokens"] == config.num_prompts * config.output_len
    ours = load_requests(tmp_path / "crosscheck_ours_round1.requests.jsonl")
    assert sum(r.completion_tokens for r in ours if r.phase == "measure") == check.theirs["total_output_tokens"]
    assert (tmp_path / "bench_serving.c2.round1.jsonl").is_file()
    assert check.ratio > 0 and check.machine_cpu_busy is not None  # measured and recorded, with the load beside it
    (tmp_path / "cross_check.json").write_text(json.dumps(check.to_dict()))  # kept for the record


@pytest.mark.server
def test_text_prompts_run_through_the_server_tokenizer(baseline_server, tiny_models, tmp_path):
    config = sweep(tiny_models, concurrency=[1], num_prompts=2, prompt_kind="text",
                   tokenizer_dir=tiny_models.target)
    arm = run_arm("text", baseline_server.spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE,
                  log=lambda line: None)
    m = arm.point(1).metrics
    assert arm.status == ARM_MEASURED and m.completed == 2
    assert m.output_tokens == 2 * config.output_len and m.input_tokens >= 2 * config.input_len


def kill_after_lines(jsonl, lines: int, kill) -> threading.Thread:
    """Call ``kill()`` once ``lines`` requests have finished (the JSONL is written request by request)."""

    def watch() -> None:
        deadline = time.monotonic() + patience(300)
        while time.monotonic() < deadline:
            if jsonl.exists() and len(jsonl.read_text().splitlines()) >= lines:
                kill()
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.mark.server
def test_server_killed_mid_sweep_keeps_finished_requests_and_stops(cpu_profile, tiny_models, tmp_path):
    from eagle3lab.runtime.server import running_server

    # 4 requests at concurrency 1, 8 at 2 (killed a few in), none at 4 (never reached)
    config = sweep(tiny_models, concurrency=[1, 2, 4], output_len=16, num_prompts=4, prompts_per_concurrency=4,
                   request_timeout_s=60)
    jsonl = tmp_path / "victim.requests.jsonl"
    first_point = config.warmup_count(1) + config.prompts_for(1)
    kill_after = first_point + config.warmup_count(2) + 3  # a few measured requests into the second point
    spec = baseline_spec(cpu_profile, tiny_models)
    with running_server(spec, tmp_path / "server.log", cpu_profile.ready_timeout_s) as server:
        # The whole server at once, as an OOM kill would.
        killer = kill_after_lines(jsonl, kill_after, lambda: os.killpg(server.pid, signal.SIGKILL))
        arm = run_arm("victim", spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE,
                      log=lambda line: None)
        killer.join(timeout=1)

    assert arm.status == ARM_FAILED and arm.reason["concurrency"] == 2
    assert [p.status for p in arm.points] == [POINT_OK, POINT_FAILED]  # stopped: no point at concurrency 4
    failed = arm.points[1]
    # whichever notices first: the refused connections, or the watch of the server's process tree
    assert ("stopped answering" in failed.reason or "server died during measurement" in failed.reason), failed.reason
    assert failed.server_info is None
    records = load_requests(jsonl)
    assert sum(r.ok for r in records) >= kill_after
    assert arm.points[0].metrics.completed == config.prompts_for(1)
    survived = [r for r in records if r.concurrency == 2 and r.phase == "measure" and r.ok]
    assert failed.metrics.completed == len(survived) >= 3
    assert failed.metrics.failed >= 1 and failed.metrics.errors
    assert not any("TimeoutError" in e for e in failed.metrics.errors)  # noticed at once, not waited out
    assert not failed.measured  # drawn nowhere
    saved = BenchReport.create("cpu", [arm])
    assert BenchReport.from_dict(json.loads(json.dumps(saved.to_dict()))).arms[0].points[1].status == POINT_FAILED


@pytest.mark.server
def test_server_whose_scheduler_died_is_detected_without_hanging(cpu_profile, tiny_models, tmp_path, probe_waits):
    """sglang 0.5.9's HTTP front stays up when its scheduler is SIGKILLed, and streams just go silent. Without a
    process tree to watch (a remote server), the stall timeout ends those requests, the liveness probe finds the
    server hung, and no further request is sent. (The local watch is covered in tests/faults.) Short waits: the
    probe gets 2 s (it only runs after the kill); the first point 4 requests, the second 8, so it has requests left
    to not send however many finish together."""
    import psutil

    from eagle3lab.runtime.server import running_server

    config = sweep(tiny_models, concurrency=[1, 2], output_len=16, num_prompts=4, prompts_per_concurrency=4,
                   stall_timeout_s=patience(15), probe_timeout_s=2)
    jsonl = tmp_path / "hung.requests.jsonl"
    kill_after = config.warmup_count(1) + config.prompts_for(1) + config.warmup_count(2) + 1
    spec = baseline_spec(cpu_profile, tiny_models)
    with running_server(spec, tmp_path / "server.log", cpu_profile.ready_timeout_s) as server:

        def kill_scheduler() -> None:
            for child in psutil.Process(server.pid).children(recursive=True):
                if "scheduler" in child.name():
                    child.kill()

        killer = kill_after_lines(jsonl, kill_after, kill_scheduler)
        # as for a remote server: no process tree to watch, so only the stall timeout can end the point
        arm = run_arm("hung", spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE, log=lambda line: None,
                      watch=lambda: None)
        killer.join(timeout=1)
        front_still_up = server.proc.poll() is None

    assert front_still_up, "the launcher exited: this test no longer covers a hung (not dead) server"
    assert [p.status for p in arm.points] == [POINT_OK, POINT_FAILED]
    failed = arm.points[1]
    assert failed.not_sent > 0  # the rest of the point was never sent
    assert any("Timeout on reading data" in e for e in failed.metrics.errors)  # ended by the stall timeout
    assert probe_waits and set(probe_waits) == {config.probe_wait_s}  # the probe waited the sweep's time, not 15 s
    records = load_requests(jsonl)
    assert sum(r.ok for r in records) >= kill_after and sum(not r.ok for r in records) == failed.metrics.failed


def test_not_runnable_arm_keeps_its_reason_and_has_no_numbers():
    arm = not_runnable_arm("eagle3", {"kind": "cpu_limitation", "message": "EAGLE is not supported ..."},
                           kind=ARM_KIND_EAGLE3)
    assert arm.status == ARM_NOT_RUNNABLE and arm.points == [] and arm.measured_points() == []
    assert arm.reason["kind"] == "cpu_limitation"
    for bad in ({}, None, "EAGLE failed"):
        with pytest.raises(BenchError) as err:
            not_runnable_arm("eagle3", bad, kind=ARM_KIND_EAGLE3)
        assert (err.value.key, err.value.value) == ("reason", bad)


def test_bad_arm_name_and_unreachable_server_fail_cleanly(tmp_path, tiny_models):
    with pytest.raises(BenchError) as err:
        not_runnable_arm("two words", {"kind": "x"}, kind=ARM_KIND_EAGLE3)
    assert (err.value.key, err.value.value) == ("name", "two words")
    from eagle3lab.runtime.server import free_port

    arm = run_arm("nobody", f"http://127.0.0.1:{free_port()}", sweep(tiny_models, concurrency=[1, 2]), tmp_path,
                  kind=ARM_KIND_BASELINE, log=lambda line: None)
    assert arm.status == ARM_FAILED and len(arm.points) == 1 and arm.points[0].status == POINT_FAILED
    assert arm.points[0].metrics is None and "stopped answering" in arm.points[0].reason


def test_damaged_files_fail_in_one_line(tmp_path):
    (tmp_path / "r.jsonl").write_text('{"request_id": "a"\n')
    with pytest.raises(BenchError) as err:
        load_requests(tmp_path / "r.jsonl")
    assert (err.value.path, err.value.line) == (tmp_path / "r.jsonl", 1)
    with pytest.raises(BenchError) as err:
        BenchReport.load(tmp_path / "missing.json")
    assert (err.value.problem, err.value.path) == ("missing", tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"profile": "cpu"}')
    with pytest.raises(BenchError) as err:
        BenchReport.load(tmp_path / "bad.json")
    assert (err.value.problem, err.value.path) == ("unreadable", tmp_path / "bad.json")


def test_point_rows_show_numbers_for_points_and_reasons_for_arms_without():
    from eagle3lab.bench.sweep import ArmResult, PointResult, point_rows
    from eagle3lab.bench.metrics import RequestRecord

    rec = RequestRecord("r", 1, "measure", True, 0.0, t_sent=0.0, token_times=[0.1, 0.2], t_end=0.2,
                        completion_tokens=2)
    point = PointResult(1, POINT_OK, None, compute_point_metrics([rec], client_cpu_s=0.001), {}, 1, 0, 0, True, "t")
    rows = point_rows([ArmResult("baseline", ARM_MEASURED, ARM_KIND_BASELINE, points=[point]),
                       not_runnable_arm("eagle3", {"message": "EAGLE is not supported on CPU"}, kind=ARM_KIND_EAGLE3)])
    assert rows[0]["out_tok_s"] == 10.0 and rows[0]["ttft_p50_ms"] == 100.0 and rows[0]["accept_len"] is None
    assert rows[0]["client_cpu_s_per_1k_tok"] == 0.5
    assert rows[1] == {"arm": "eagle3", "kind": ARM_KIND_EAGLE3, "status": ARM_NOT_RUNNABLE,
                       "note": "EAGLE is not supported on CPU"}
