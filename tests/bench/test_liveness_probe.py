"""The liveness probe after a failed request: its wait comes from the sweep (``probe_timeout_s``, never longer than
the stall timeout), and it is not sent at all when the server's process-tree watch already sees a member dead or
stopped (the probe could not change the verdict, only wait out its timeout).

The server here is a real listening socket that never answers (what a stopped scheduler behind a live HTTP front
looks like to a client); the watch is a stand-in, since the real-server cases are in tests/faults."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading

import pytest

from eagle3lab.bench import loadgen
from eagle3lab.bench.loadgen import JsonlSink, is_stall, run_phase, server_lost
from eagle3lab.bench.workload import PROBE_TIMEOUT_S, SweepConfig
from eagle3lab.errors import BenchError
from timing import patience


def config(**kw) -> SweepConfig:
    base = dict(concurrency=[1], input_len=4, output_len=4, num_prompts=1, vocab_size=1024)
    base.update(kw)
    return SweepConfig(**base)


class FakeWatch:
    """A ``ServerWatch`` stand-in: what it says about deaths and stopped members, and how often it was asked."""

    def __init__(self, death: str | None = None, stopped: str | None = None):
        self.death, self.stopped_words = death, stopped

    def __call__(self) -> str | None:
        return self.death

    def stopped(self) -> str | None:
        return self.stopped_words


@pytest.fixture
def probes(monkeypatch) -> list[float]:
    """Every liveness probe sent, as its timeout; each one answers "not alive" at once."""
    sent: list[float] = []

    async def fake_alive(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        sent.append(timeout_s)
        return False

    monkeypatch.setattr(loadgen, "server_alive", fake_alive)
    return sent


def test_probe_waits_15_s_by_default_or_the_stall_timeout_when_shorter():
    assert config().probe_wait_s == PROBE_TIMEOUT_S == 15.0
    assert config(stall_timeout_s=3).probe_wait_s == 3
    assert config(stall_timeout_s=5, probe_timeout_s=1.5).probe_wait_s == 1.5
    # the default follows the stall timeout, also through dataclasses.replace (how the notebooks derive configs)
    assert dataclasses.replace(config(), stall_timeout_s=2).probe_wait_s == 2
    assert SweepConfig.from_dict(config(probe_timeout_s=4).to_dict()).probe_wait_s == 4
    old = config().to_dict()
    del old["probe_timeout_s"]  # a sidecar written before the field existed
    assert SweepConfig.from_dict(old).probe_wait_s == PROBE_TIMEOUT_S


@pytest.mark.parametrize("value", [0, -1.0, 6.0, "3", True])
def test_bad_probe_timeout_fails_in_one_line(value):
    with pytest.raises(BenchError) as err:
        config(stall_timeout_s=5, probe_timeout_s=value)
    assert (err.value.key, err.value.value) == ("probe_timeout_s", value)
    assert "\n" not in str(err.value) and "stall_timeout_s (5)" in str(err.value)


@pytest.mark.parametrize("watch", [None, lambda: None, FakeWatch()])
def test_probe_is_sent_with_the_sweeps_timeout_when_the_watch_knows_nothing(probes, watch):
    assert asyncio.run(server_lost("http://127.0.0.1:9", config(stall_timeout_s=5, probe_timeout_s=2), watch))
    assert probes == [2]


@pytest.mark.parametrize("watch", [FakeWatch(stopped="sglang::scheduler (pid 7) is stopped"),
                                   FakeWatch(death="child sglang::scheduler (pid 7) killed by SIGKILL"),
                                   lambda: "child sglang::scheduler (pid 7) killed by SIGKILL"])
def test_no_probe_when_the_watch_already_sees_a_dead_or_stopped_member(probes, watch):
    assert asyncio.run(server_lost("http://127.0.0.1:9", config(), watch))
    assert probes == []


@pytest.fixture
def silent_server():
    """A server that starts every stream (status 200, headers) and then never sends a token: what a client sees
    of a scheduler stopped behind sglang's live HTTP front."""
    held: list[socket.socket] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # nobody came within the poll (socket.timeout is an OSError)
                continue
            conn.settimeout(None)
            held.append(conn)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(timeout=patience(5))
        listener.close()
        for conn in held:
            conn.close()


def test_a_phase_on_a_stopped_server_ends_at_the_stall_timeout_without_a_probe(probes, silent_server, tmp_path):
    sweep = config(concurrency=[2], num_prompts=4, stall_timeout_s=0.5)
    sink = JsonlSink(tmp_path / "r.jsonl")
    try:
        outcome = asyncio.run(run_phase(silent_server, [[20, 21, 22, 23]] * 4, concurrency=2, phase="measure",
                                        config=sweep, sink=sink, watch=FakeWatch(stopped="scheduler is stopped")))
    finally:
        sink.close()
    assert outcome.server_lost and outcome.server_died is None
    assert len(outcome.records) == 2 and outcome.not_sent == 2  # the stalled pair only: nothing more was sent
    assert all(is_stall(r.error) for r in outcome.records)
    assert probes == []


def test_a_phase_without_a_process_tree_probes_with_the_sweeps_timeout(probes, silent_server, tmp_path):
    sweep = config(concurrency=[1], num_prompts=3, stall_timeout_s=0.5, probe_timeout_s=0.25)
    sink = JsonlSink(tmp_path / "r.jsonl")
    try:
        outcome = asyncio.run(run_phase(silent_server, [[20, 21, 22, 23]] * 3, concurrency=1, phase="measure",
                                        config=sweep, sink=sink, watch=lambda: None))
    finally:
        sink.close()
    assert outcome.server_lost and outcome.not_sent == 2 and probes == [0.25]
