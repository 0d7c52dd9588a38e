"""The lifecycle of a real sglang server: every exit path leaves no process behind and the port free."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from eagle3lab.runtime.deployment import server_spec
from eagle3lab.errors import ModelPathError, PortInUseError, ServerTimeoutError
from eagle3lab.runtime.server import ServerProcess, check_port_free, free_port, launch, running_server
from leftovers import gone
from timing import patience


def group_members(pgid: int, before: float | None = None) -> list[psutil.Process]:
    """Live processes of the server's process group (its own session: the launcher calls setsid), orphans
    included. Zombies are dead already: they only wait to be reaped by their parent (or by PID 1, which in some
    sandboxes never reaps), and hold no port, memory or CPU. ``before``: only processes started before this
    time (``time.time()``), so once the server is stopped, a newer session that reused its pid (another run's
    server, on a machine whose pids wrap) is not counted as the test's."""
    members = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != pgid and os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE \
                    and (before is None or proc.create_time() < before):
                members.append(proc)
        except (psutil.Error, ProcessLookupError):
            pass
    return members


def assert_gone(pid: int, port: int, stopped_at: float) -> None:
    """The test's server (started before ``stopped_at``, when the test knew it stopped) and its whole session
    are gone, and its port is free."""
    try:
        leader = psutil.Process(pid)
        assert leader.status() == psutil.STATUS_ZOMBIE or leader.create_time() >= stopped_at, "the launcher lives"
    except psutil.NoSuchProcess:
        pass
    assert group_members(pid, before=stopped_at) == []
    check_port_free("127.0.0.1", port)


def test_nonexistent_model_path_fails_before_starting(tmp_path, cpu_profile, tiny_models):
    spec = server_spec(cpu_profile, tiny_models, speculative=False, port=free_port())
    bad = type(spec)(**{**spec.__dict__, "model_path": str(tmp_path / "no-such-model")})
    server = ServerProcess(bad, tmp_path / "x.log")
    with pytest.raises(ModelPathError) as err:
        server.start()
    assert (err.value.problem, err.value.path, err.value.role) == ("missing", tmp_path / "no-such-model", "target model")
    assert server.proc is None


def test_port_in_use_is_one_line_naming_the_port(tmp_path, cpu_profile, tiny_models):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        spec = server_spec(cpu_profile, tiny_models, speculative=False, port=port)
        server = ServerProcess(spec, tmp_path / "x.log")
        with pytest.raises(PortInUseError) as err:
            server.start()
        assert (err.value.port, err.value.host) == (port, "127.0.0.1")
    assert "\n" not in str(err.value) and server.proc is None


@pytest.mark.server
def test_server_that_is_not_ready_in_time_is_killed(tmp_path, cpu_profile, tiny_models):
    port = free_port()
    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=("mla_torch_native",), port=port)
    with pytest.raises(ServerTimeoutError) as err:
        with running_server(spec, tmp_path / "slow.log", timeout_s=3):
            pass
    assert err.value.timeout_s == 3 and err.value.log == tmp_path / "slow.log"
    check_port_free("127.0.0.1", port)
    outcome = launch(spec, tmp_path / "slow2.log", timeout_s=3)
    assert outcome.status == "timeout"
    assert_gone(outcome.pid, port, time.time())


@pytest.mark.server
def test_ready_server_answers_and_its_whole_tree_is_stopped(tmp_path, cpu_profile, tiny_models):
    port = free_port()
    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=("mla_torch_native",), port=port)
    with running_server(spec, tmp_path / "ok.log", timeout_s=cpu_profile.ready_timeout_s) as server:
        assert server.is_ready()
        pid = server.pid
        children = psutil.Process(pid).children(recursive=True)
        assert children, "sglang runs its scheduler in subprocesses"
    assert_gone(pid, port, time.time())
    assert all(gone(child) for child in children)


@pytest.mark.server
def test_ctrl_c_while_the_server_starts_leaves_nothing_behind(tmp_path, cpu_profile, tiny_models):
    port = free_port()
    # A shell's background job inherits SIGINT ignored; restore Python's handler, as an interactive run has it.
    script = textwrap.dedent(f"""
        import json, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from eagle3lab.runtime.profiles import load_profile
        from eagle3lab.runtime.deployment import Models, server_spec
        from eagle3lab.runtime.server import running_server
        spec = server_spec(load_profile("cpu"), Models({tiny_models.target!r}, {tiny_models.draft!r}),
                           speculative=False, shims=("mla_torch_native",), port={port})
        import eagle3lab.runtime.server as s
        original = s.ServerProcess.start
        def start(self):
            original(self)
            print(json.dumps({{"pid": self.pid}}), flush=True)
        s.ServerProcess.start = start
        with running_server(spec, {str(tmp_path / 'int.log')!r}, timeout_s=600):
            pass
    """)
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    pid = json.loads(driver.stdout.readline())["pid"]
    # Ctrl-C once sglang has spawned part of its tree (its first subprocess), not after a fixed sleep
    deadline = time.monotonic() + patience(120)
    while not group_members(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert group_members(pid), "sglang spawned no subprocess: this test no longer covers a half-built tree"
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=patience(60)) != 0
    assert "KeyboardInterrupt" in driver.stderr.read(), "the driver stopped because of Ctrl-C, not otherwise"
    assert_gone(pid, port, time.time())
