"""Dead servers are noticed in seconds: the bench watches the server's process tree as well as its sockets, so a
killed scheduler (whose HTTP front stays up and lets requests hang) ends the point at once, recorded as "server
died" with the process and its exit status; finished requests survive, nothing is left running."""

from __future__ import annotations

import signal
import threading
import time

import psutil
import pytest

from eagle3lab.bench.sweep import (
    ARM_FAILED,
    ARM_KIND_BASELINE,
    POINT_FAILED,
    load_requests,
    run_arm,
)
from eagle3lab.bench.workload import SweepConfig, model_vocab_size
from eagle3lab.runtime import procwatch

from leftovers import gone

from .faultkit import patience


def test_a_zombie_reports_its_exit_status():
    """The watch reads the status of a child its parent has not reaped yet (Linux /proc exit_code)."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    watch = procwatch.TreeWatch(psutil.Process().pid)
    watch.members = [psutil.Process(child.pid)]
    deadline = time.monotonic() + patience(30)
    while procwatch.zombie_status(child.pid) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    death = watch.death()
    assert death is not None and death.status == "killed by SIGKILL" and death.pid == child.pid
    child.wait()


def test_exit_statuses_in_words():
    assert procwatch.describe_wait_status(9) == "killed by SIGKILL"
    assert procwatch.describe_wait_status(3 << 8) == "exit code 3"
    assert procwatch.describe_returncode(-15) == "killed by SIGTERM"
    assert procwatch.describe_returncode(1) == "exit code 1"


@pytest.mark.server
def test_killed_scheduler_ends_the_point_as_server_died(cpu_profile, tiny_models, tmp_path):
    from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS
    from eagle3lab.runtime.deployment import server_spec
    from eagle3lab.runtime.server import check_port_free, free_port, running_server

    config = SweepConfig(concurrency=[2, 4], input_len=8, output_len=16, num_prompts=4,
                         vocab_size=model_vocab_size(tiny_models.target), request_timeout_s=600, stall_timeout_s=120)
    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=CONTROL_SHIMS, port=free_port())
    jsonl = tmp_path / "victim.requests.jsonl"
    killed: dict[str, float | int] = {}
    with running_server(spec, tmp_path / "server.log", cpu_profile.ready_timeout_s) as server:
        scheduler = next(p for p in psutil.Process(server.pid).children(recursive=True)
                         if p.name() == "sglang::scheduler")
        kill_after = config.warmup_count(2) + 1  # warmed up, one measured request done, the next in flight

        def kill_scheduler_mid_point() -> None:
            while not jsonl.exists() or len(jsonl.read_text().splitlines()) < kill_after:
                time.sleep(0.01)
            killed["at"] = time.perf_counter()
            killed["pid"] = scheduler.pid
            scheduler.send_signal(signal.SIGKILL)  # the scheduler only: the HTTP front stays up

        killer = threading.Thread(target=kill_scheduler_mid_point, daemon=True)
        killer.start()
        arm = run_arm("victim", spec.base_url, config, tmp_path, kind=ARM_KIND_BASELINE, log=lambda line: None)
        ended = time.perf_counter()
        killer.join(timeout=patience(5))
        launcher = psutil.Process(server.pid)
    check_port_free("127.0.0.1", spec.port)
    assert gone(launcher) and gone(scheduler)

    assert arm.status == ARM_FAILED and [p.status for p in arm.points] == [POINT_FAILED]  # no point after it
    failed = arm.points[0]
    death = f"child sglang::scheduler (pid {killed['pid']}) killed by SIGKILL"
    assert failed.reason == f"server died during measurement: {death}", failed.reason
    assert arm.reason["kind"] == "server_died"
    records = load_requests(jsonl)
    cut = [r for r in records if not r.ok]
    assert cut and all(r.error == f"server died: {death}" for r in cut)  # not a timeout, not a socket error
    assert sum(r.ok for r in records) >= kill_after  # every finished request is on disk
    assert failed.metrics.completed >= 1 and failed.metrics.failed == len([r for r in cut if r.phase == "measure"])
    # Measured, not asserted: how long after the kill the point ended (the bound is 5 s).
    print(f"point ended {ended - killed['at']:.2f} s after the scheduler was killed")
