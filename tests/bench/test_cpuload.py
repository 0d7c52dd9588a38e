"""CPU shares: hand-checked arithmetic on snapshots, and a real listening process found by its port."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import namedtuple

import psutil
import pytest

from eagle3lab.bench.cpuload import CpuSnapshot, busy_fraction, server_processes, shares, snapshot

Times = namedtuple("Times", "user system idle iowait")


def test_busy_fraction_counts_iowait_as_idle():
    # 6 s of CPU time passed on all cores together, 3 of them idle (2 idle + 1 iowait): half busy.
    assert busy_fraction(Times(1, 1, 8, 0), Times(3, 2, 10, 1)) == 0.5
    assert busy_fraction(Times(1, 1, 8, 0), Times(1, 1, 8, 0)) is None


def test_shares_split_busy_time_into_server_client_and_other():
    # 10 s of all-core time: 8 busy; the server used 5, the client 1, so 2 went to something else.
    before = CpuSnapshot(Times(0, 0, 0, 0), server_s=10.0, client_s=3.0)
    after = CpuSnapshot(Times(6, 2, 2, 0), server_s=15.0, client_s=4.0)
    used = shares(before, after)
    assert (used.machine_busy, used.server, used.client, used.other) == (0.8, 0.5, 0.1, pytest.approx(0.2))
    remote = shares(CpuSnapshot(Times(0, 0, 0, 0), None, 0.0), CpuSnapshot(Times(6, 2, 2, 0), None, 1.0))
    assert remote.server is None and remote.other is None and remote.client == 0.1


def test_listening_process_and_its_children_are_found_by_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = ("import socket, subprocess, sys, time\n"
            f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen()\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('up', flush=True); time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "up"
        procs = server_processes(f"http://127.0.0.1:{port}")
        assert procs[0].pid == parent.pid and len(procs) == 2
        assert snapshot(procs).server_s is not None
        assert server_processes("http://example.org:80") == []  # not this host: nothing to measure
    finally:
        for proc in psutil.Process(parent.pid).children(recursive=True):
            proc.kill()
        parent.kill()
        parent.wait()
