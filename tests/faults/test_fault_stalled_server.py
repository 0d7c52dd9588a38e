"""A stalled server is not a dead one: when the streams go silent, the benchmark looks at the server's process tree
and says which it is. A member gone: "server died" (test_fault_dead_server.py). Every member alive but one stopped
(SIGSTOP, a debugger): "server stalled", naming the process and how to resume it. Every member alive and running:
"server hung: alive but no token for N s". Stalled and hung points fail their arm (kind ``server_stalled``) and
notebook 03's benchmark cell, exactly as a dead server's do; nothing is left stopped or running afterwards."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from eagle3lab.bench.loadgen import is_stall
from eagle3lab.bench.sweep import (
    ARM_FAILED,
    ARM_KIND_BASELINE,
    FAILURE_DIED,
    FAILURE_STALLED,
    POINT_FAILED,
    BenchReport,
    classify_silence,
    load_requests,
    run_arm,
)
from eagle3lab.bench.workload import SweepConfig, model_vocab_size
from eagle3lab.runtime import procwatch

from leftovers import gone

from .faultkit import default_signals, patience, wait_for

URL = "http://127.0.0.1:31299"
STALL = "SocketTimeoutError: Timeout on reading data from socket"


class FakeProc:
    """A psutil.Process stand-in with a fixed status (or gone: psutil.NoSuchProcess)."""

    def __init__(self, pid: int, name: str, status: str | None):
        self.pid, self._name, self._status = pid, name, status

    def _check(self) -> None:
        if self._status is None:
            raise psutil.NoSuchProcess(self.pid)

    def is_running(self) -> bool:
        return self._status is not None

    def status(self) -> str:
        self._check()
        return self._status  # type: ignore[return-value]

    def name(self) -> str:
        self._check()
        return self._name


def fake_watch(*states: tuple[int, str, str | None]) -> procwatch.ServerWatch:
    """A server watch over a tree of fake members: (pid, name, psutil status or None for gone)."""
    tree = procwatch.TreeWatch.__new__(procwatch.TreeWatch)
    tree.root_pid, tree.popen = states[0][0], None
    tree.members = [FakeProc(*state) for state in states]  # type: ignore[misc]
    tree.names = {pid: name for pid, name, _ in states}
    return procwatch.ServerWatch(tree)


def server_tree(scheduler_status: str | None) -> procwatch.ServerWatch:
    return fake_watch((100, "python", psutil.STATUS_SLEEPING), (101, "sglang::scheduler", scheduler_status),
                      (102, "sglang::detokenizer", psutil.STATUS_SLEEPING))


def test_a_stopped_scheduler_is_named_with_its_pid_and_remedy():
    kind, reason = classify_silence(server_tree(psutil.STATUS_STOPPED), URL, "measurement", STALL, 3.0, True)
    assert kind == FAILURE_STALLED
    assert reason == ("server stalled during measurement: sglang::scheduler (pid 101) is stopped (SIGSTOP?); "
                      "resume it with kill -CONT 101 or stop the server")


def test_a_traced_scheduler_is_stopped_under_a_tracer():
    kind, reason = classify_silence(server_tree(psutil.STATUS_TRACING_STOP), URL, "warm-up", STALL, 3.0, True)
    assert kind == FAILURE_STALLED
    assert reason == ("server stalled during warm-up: sglang::scheduler (pid 101) is stopped under a tracer "
                      "(a debugger?); detach it or stop the server")


@pytest.mark.parametrize("status", [psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP])
def test_an_alive_running_server_that_stalled_is_hung(status):
    kind, reason = classify_silence(server_tree(status), URL, "measurement", STALL, 2.5, True)
    assert (kind, reason) == (FAILURE_STALLED, "server hung during measurement: alive but no token for 2.5 s")


def test_an_alive_server_that_failed_otherwise_is_hung_with_the_error():
    kind, reason = classify_silence(server_tree(psutil.STATUS_RUNNING), URL, "the server-info snapshot",
                                    "no answer", 3.0, False)
    assert (kind, reason) == (FAILURE_STALLED, "server hung during the server-info snapshot: alive but not "
                                               "answering (no answer)")


def test_a_gone_member_is_a_death_even_beside_a_stopped_one():
    watch = fake_watch((100, "python", psutil.STATUS_STOPPED), (101, "sglang::scheduler", None))
    kind, reason = classify_silence(watch, URL, "measurement", STALL, 3.0, True)
    assert kind == FAILURE_DIED
    assert reason.startswith("server died during measurement: child sglang::scheduler (pid 101) "), reason


def test_without_a_process_tree_the_old_words_and_kind_stay():
    """A remote server (or a plain death callable) shows no process states: it cannot be told dead from hung."""
    for watch in (None, lambda: None):
        kind, reason = classify_silence(watch, URL, "measurement", STALL, 3.0, True)
        assert (kind, reason) == (FAILURE_DIED, f"server at {URL} stopped answering during measurement: {STALL}")


def test_stall_errors_are_told_from_other_errors():
    assert is_stall(STALL)
    assert not is_stall("TimeoutError: no answer within the request timeout")
    assert not is_stall("server died: child sglang::scheduler (pid 1) killed by SIGKILL") and not is_stall(None)


def test_a_real_stopped_process_is_seen_stopped_and_resumed():
    """The watch reads the real kernel state of a SIGSTOPped child (psutil ``stopped``), not a guess."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=default_signals)
    try:
        watch = procwatch.TreeWatch(child.pid)
        assert watch.stopped() is None
        child.send_signal(signal.SIGSTOP)
        wait_for(lambda: watch.stopped() is not None, timeout=30, what="the child to be stopped")
        stopped = watch.stopped()
        assert stopped is not None and stopped.pid == child.pid and stopped.status == psutil.STATUS_STOPPED
        assert watch.death() is None  # stopped is alive
        child.send_signal(signal.SIGCONT)
        wait_for(lambda: watch.stopped() is None, timeout=30, what="the child to resume")
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait(timeout=patience(30))


def test_a_stalled_arm_fails_the_benchmark_like_a_dead_one(tmp_path):
    """Notebook 03's benchmark cell refuses a stalled arm as it refuses a dead one: the record goes aside."""
    from eagle3lab.errors import BenchmarkIncomplete
    from eagle3lab.notebook.patch_and_bench.bench_records import BENCH_REPORT, BENCH_REPORT_FAILED, save_complete_report

    from conftest import synthetic_arm

    baseline = synthetic_arm("baseline", [1, 2], 0.02)
    stalled = baseline.points[1]
    stalled.status, stalled.failure = POINT_FAILED, FAILURE_STALLED
    stalled.reason = "server hung during measurement: alive but no token for 3 s"
    with pytest.raises(BenchmarkIncomplete) as err:
        save_complete_report(BenchReport.create("cpu", [baseline]), tmp_path)
    assert "arm baseline at concurrency 2: server hung during measurement: alive but no token for 3 s" \
        in str(err.value)
    assert not (tmp_path / BENCH_REPORT).exists() and (tmp_path / BENCH_REPORT_FAILED).is_file()
    again = BenchReport.load(tmp_path / BENCH_REPORT_FAILED).arms[0].points[1]
    assert (again.status, again.failure) == (POINT_FAILED, FAILURE_STALLED)  # the kind survives the sidecar


@pytest.mark.server
def test_stopped_scheduler_ends_the_point_as_stalled_not_died(cpu_profile, tiny_models, tmp_path, probe_waits):
    from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS
    from eagle3lab.runtime.deployment import server_spec
    from eagle3lab.runtime.server import check_port_free, free_port, running_server

    # Long enough that a loaded machine's slowest first token is not taken for the stop: with 3 s, a run with the full
    # report beside it (two sglang test workers, 2026-12-02) stalled both measured requests before the stop.
    stall_s = patience(15.0)
    config = SweepConfig(concurrency=[2, 4], input_len=8, output_len=16, num_prompts=4,
                         vocab_size=model_vocab_size(tiny_models.target), request_timeout_s=600,
                         stall_timeout_s=stall_s)
    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=CONTROL_SHIMS, port=free_port())
    jsonl = tmp_path / "stalled.requests.jsonl"
    stop_after = config.warmup_count(2) + 1  # warmed up, one measured request done, the next in flight
    stopped: dict[str, float | int] = {}
    with running_server(spec, tmp_path / "server.log", cpu_profile.ready_timeout_s) as server:
        scheduler = next(p for p in psutil.Process(server.pid).children(recursive=True)
                         if p.name() == "sglang::scheduler")
        give_up = time.monotonic() + patience(300)

        def stop_scheduler_mid_point() -> None:
            while not jsonl.exists() or len(jsonl.read_text().splitlines()) < stop_after:
                if time.monotonic() > give_up:
                    return
                time.sleep(0.01)
            stopped["at"] = time.perf_counter()
            stopped["pid"] = scheduler.pid
            scheduler.send_signal(signal.SIGSTOP)  # alive, every process; it just never runs

        stopper = threading.Thread(target=stop_scheduler_mid_point, daemon=True)
        stopper.start()
        try:
            arm = run_arm("stalled", spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE, log=lambda line: None)
            ended = time.perf_counter()
            stopper.join(timeout=patience(5))
            still_stopped = scheduler.status() == psutil.STATUS_STOPPED
        finally:
            give_up = 0.0
            try:
                scheduler.send_signal(signal.SIGCONT)  # so the server stops as usual, not on SIGKILL alone
            except psutil.NoSuchProcess:
                pass
        launcher = psutil.Process(server.pid)
    check_port_free("127.0.0.1", spec.port)
    assert gone(launcher) and gone(scheduler)

    assert "pid" in stopped, "the measurement ended before the scheduler could be stopped"
    assert still_stopped, "the scheduler resumed by itself: this test no longer covers a stopped server"
    assert arm.status == ARM_FAILED and [p.status for p in arm.points] == [POINT_FAILED]  # no point after it
    failed = arm.points[0]
    words = (f"sglang::scheduler (pid {stopped['pid']}) is stopped (SIGSTOP?); resume it with "
             f"kill -CONT {stopped['pid']} or stop the server")
    assert failed.reason == f"server stalled during measurement: {words}", failed.reason
    assert failed.failure == FAILURE_STALLED
    assert arm.reason == {"kind": FAILURE_STALLED, "concurrency": 2, "message": failed.reason}
    records = load_requests(jsonl)
    cut = [r for r in records if not r.ok]
    assert cut and all(is_stall(r.error) for r in cut)  # ended by the stall timeout, not a death
    assert sum(r.ok for r in records) >= stop_after  # every finished request is on disk
    assert probe_waits == []  # the watch saw the stopped scheduler: no liveness probe waited out its timeout
    # Measured, not asserted: how long after the stop the point ended (the stall timeout; no liveness probe, since
    # the watch already sees the stopped scheduler).
    print(f"point ended {ended - stopped['at']:.2f} s after the scheduler was stopped (stall timeout {stall_s} s)")
