"""Start, watch and stop a real ``python -m sglang.launch_server`` process tree.

A launch has three outcomes: ready (``/health`` answers 200 once warm-up is done), died (the launcher exited,
typically because a scheduler subprocess raised), or timeout. Whatever happens -- success, crash, timeout, an
exception in the caller, Ctrl-C, SIGTERM or SIGHUP -- the whole process tree is killed and the port is free
again afterwards, because sglang spawns scheduler and detokenizer subprocesses that would otherwise outlive the
notebook. A host that cannot be bound and a full disk under the log are reported as such before the launch.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping

import psutil
import requests

from eagle3lab.errors import (HostBindError, ModelPathError, OutputWriteError, PortInUseError, ServerDiedError,
                              ServerTimeoutError)
from eagle3lab.runtime import procwatch
from eagle3lab import signals
from eagle3lab.runtime.speculative import SpeculativeSpec

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
PR_SET_PDEATHSIG = 1
MIN_LOG_SPACE_BYTES = 16 << 20  # free space the server's log needs before a launch


@dataclass(frozen=True)
class ServerSpec:
    """Everything needed to launch one sglang server; ``argv()`` is the exact command line."""

    model_path: str
    host: str = "127.0.0.1"
    port: int = 30000
    device: str = "cuda"
    tp_size: int = 1
    dtype: str = "auto"
    trust_remote_code: bool = False
    attention_backend: str | None = None
    disable_cuda_graph: bool = False
    context_length: int | None = None
    max_total_tokens: int | None = None
    max_running_requests: int | None = None
    mem_fraction_static: float | None = None
    speculative: SpeculativeSpec | None = None
    load_format: str | None = None  # --load-format; None: sglang's own (auto, the checkpoint's weights)
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    python: str = sys.executable

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def server_args(self) -> dict[str, Any]:
        """The launch as sglang ``ServerArgs`` fields; ``None`` leaves a setting to sglang's own default."""
        args: dict[str, Any] = {
            "model_path": self.model_path, "host": self.host, "port": self.port, "device": self.device,
            "tp_size": self.tp_size, "dtype": self.dtype, "trust_remote_code": self.trust_remote_code,
            "attention_backend": self.attention_backend, "disable_cuda_graph": self.disable_cuda_graph,
            "context_length": self.context_length, "max_total_tokens": self.max_total_tokens,
            "max_running_requests": self.max_running_requests, "mem_fraction_static": self.mem_fraction_static,
        }
        if self.load_format is not None:  # only when set: sglang's default is "auto", not None
            args["load_format"] = self.load_format
        if self.speculative is not None:
            args.update(self.speculative.server_args())
        return args

    def argv(self) -> list[str]:
        """The ``python -m sglang.launch_server`` command line, derived from ``server_args()`` for every profile."""
        argv = [self.python, "-m", "sglang.launch_server"]
        for name, value in self.server_args().items():
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool):
                argv += [flag] if value else []
            elif value is not None:
                argv += [flag, str(value)]
        return argv + list(self.extra_args)


@dataclass
class LaunchOutcome:
    """What a launch came to, and how long it took."""

    status: Literal["ready", "died", "timeout", "interrupted"]
    seconds: float
    returncode: int | None
    log_path: Path
    peak_rss_bytes: int  # sum of RSS over the tree: shared (mmapped) pages counted once per process
    pid: int
    peak_pss_bytes: int = 0  # sum of PSS over the tree: every page once (procwatch.TreeMemory)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""


def check_model_path(path: str, what: str = "model") -> None:
    """A local path must exist and hold a config.json; a hub id (``org/name``) is left to sglang."""
    local = Path(path).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            raise ModelPathError(f"{what} path {path} holds no config.json; point it at a model directory",
                                 path=local, role=what, problem="no_config")
        return
    if HUB_ID.match(path) and not path.startswith((".", "/", "~")):
        return
    raise ModelPathError(f"{what} path {path} does not exist; check the profile's {what} setting", path=local,
                         role=what, problem="missing")


def check_port_free(host: str, port: int) -> None:
    """Fail early, with the owner if we can see it, instead of letting sglang die on bind.

    Only a taken port is "in use": a host that is not an address of this machine, or does not resolve, is
    reported as a host problem, since choosing another port would not help.
    """
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise HostBindError(f"host '{host}' does not resolve ({exc.strerror}); set 'host' to an address of this "
                            f"machine, e.g. 127.0.0.1", host=host, problem="unresolvable") from None
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"port {port} on {host} is already in use{_port_owner(port)}; "
                    f"stop that process or choose another port (parameter 'port')", port=port, host=host) from None
            if exc.errno == errno.EACCES:
                raise HostBindError(f"binding {host}:{port} is not permitted ({exc.strerror}); ports below 1024 "
                                    f"need privileges, choose another port (parameter 'port')", host=host,
                                    problem="not_permitted") from None
            raise HostBindError(f"host '{host}' cannot be bound on this machine ({exc.strerror}); set 'host' to "
                                f"one of its addresses, e.g. 127.0.0.1 (parameter 'host')", host=host,
                                problem="not_bindable") from None


def check_log_space(folder: Path, need_bytes: int = MIN_LOG_SPACE_BYTES) -> None:
    """The server writes everything it says to its log: a full disk there must be named, not guessed at."""
    folder.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(folder).free
    if free < need_bytes:
        raise OutputWriteError(f"no space left on the device holding {folder} ({free >> 10} KiB free, the server "
                               f"log needs {need_bytes >> 20} MiB); free some space and rerun", path=folder,
                               errno=errno.ENOSPC)


def _port_owner(port: int) -> str:
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
                return f" by pid {conn.pid} ({psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (for tests and ad-hoc runs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Runs in the child before exec: its own session, and SIGKILL if the notebook kernel dies."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


_LIVE: set["ServerProcess"] = set()


@atexit.register
def _stop_all_live() -> None:
    for server in list(_LIVE):
        server.stop()


class ServerProcess:
    """One launched server: its process group, its log file, its lifecycle."""

    def __init__(self, spec: ServerSpec, log_path: Path):
        self.spec = spec
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0
        self.peak_rss_bytes = 0
        self.peak_pss_bytes = 0

    def start(self) -> None:
        check_model_path(self.spec.model_path, "target model")
        if self.spec.speculative is not None:
            check_model_path(self.spec.speculative.draft_model_path, "draft model")
        check_port_free(self.spec.host, self.spec.port)
        check_log_space(self.log_path.parent)
        env = {**os.environ, **self.spec.env, "PYTHONUNBUFFERED": "1"}
        signals.hold_termination()  # from here until stop(), SIGTERM/SIGHUP unwind like Ctrl-C
        try:
            with open(self.log_path, "wb") as log:
                log.write(("$ " + " ".join(self.spec.argv()) + "\n").encode())
                log.flush()
                self.proc = subprocess.Popen(self.spec.argv(), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent)
        except OSError as exc:
            signals.release_termination()
            if exc.errno == errno.ENOSPC:
                raise OutputWriteError(f"no space left on the device while writing {self.log_path}; "
                                       f"free some space and rerun", path=self.log_path,
                                       errno=errno.ENOSPC) from None
            raise
        except BaseException:
            signals.release_termination()
            raise
        self.started_at = time.monotonic()
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started_at

    def sample_memory(self) -> procwatch.TreeMemory:
        """RSS and PSS of the tree now, and the peaks of both so far."""
        memory = procwatch.tree_memory(self.proc.pid) if self.proc is not None else procwatch.TreeMemory()
        self.peak_rss_bytes = max(self.peak_rss_bytes, memory.rss)
        self.peak_pss_bytes = max(self.peak_pss_bytes, memory.pss)
        return memory

    def tree_rss_bytes(self) -> int:
        """Resident memory of the launcher and every descendant (scheduler, detokenizer, ...), summed per process
        (shared pages counted once per process; ``sample_memory`` also gives PSS, which counts them once)."""
        if self.proc is None:
            return 0
        try:
            root = psutil.Process(self.proc.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        return total

    def watch(self) -> procwatch.TreeWatch:
        """Its process tree as it is now; ``.death()`` later names the first member gone, with its status."""
        assert self.proc is not None, "start() first"
        return procwatch.TreeWatch(self.proc.pid, self.proc)

    def is_ready(self) -> bool:
        try:
            return requests.get(f"{self.spec.base_url}/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def wait(self, timeout_s: float, poll_s: float = 0.5) -> LaunchOutcome:
        """Block until ready, dead or timed out; never raises for those (the caller decides)."""
        assert self.proc is not None, "start() first"
        deadline = self.started_at + timeout_s
        status: Literal["ready", "died", "timeout", "interrupted"] = "timeout"
        try:
            while time.monotonic() < deadline:
                self.sample_memory()
                if self.proc.poll() is not None:
                    status = "died"
                    break
                if self.is_ready():
                    status = "ready"
                    break
                time.sleep(poll_s)
        except KeyboardInterrupt:
            self.stop()
            raise
        if status != "ready":
            self._check_log_space_after(status)
        return LaunchOutcome(status, round(self.elapsed(), 2), self.proc.poll(), self.log_path,
                             self.peak_rss_bytes, self.proc.pid, self.peak_pss_bytes)

    def _check_log_space_after(self, status: str) -> None:
        """A server that died or hung while the disk under its log is full: say that, not what the log lacks."""
        try:
            free = shutil.disk_usage(self.log_path.parent).free
        except OSError:
            return
        if free < (1 << 20):
            raise OutputWriteError(f"the server {status} while the device holding its log {self.log_path} is full "
                                   f"({free >> 10} KiB free), so its log is cut short; free some space and rerun",
                                   path=self.log_path, errno=errno.ENOSPC)

    def stop(self, grace_s: float = 10.0) -> None:
        """Kill the whole process tree (SIGTERM, then SIGKILL) and wait until the port is free.

        Signals arriving meanwhile wait until the tree is gone, so a second Ctrl-C cannot leave half of it.
        """
        if self.proc is None or self not in _LIVE:
            return
        with signals.deferred():
            self._stop_tree(grace_s)
        signals.release_termination()
        signals.restored(f"sglang server pid {self.proc.pid} stopped")

    def _stop_tree(self, grace_s: float) -> None:
        assert self.proc is not None
        try:
            procs = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            procs = []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for proc in procs:
                try:
                    proc.send_signal(sig)
                except psutil.Error:
                    pass
            _, alive = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 5)
            try:
                self.proc.wait(timeout=grace_s if sig == signal.SIGTERM else 5)
            except subprocess.TimeoutExpired:
                continue
            if not alive:
                break
        _LIVE.discard(self)
        _wait_port_free(self.spec.host, self.spec.port)


def _wait_port_free(host: str, port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            check_port_free(host, port)
            return
        except PortInUseError:
            time.sleep(0.2)


def launch(spec: ServerSpec, log_path: Path, timeout_s: float) -> LaunchOutcome:
    """Launch, wait for an outcome, and stop the tree whatever it was (used for crash reproductions)."""
    server = ServerProcess(spec, log_path)
    server.start()
    try:
        return server.wait(timeout_s)
    finally:
        server.stop()


@contextmanager
def running_server(spec: ServerSpec, log_path: Path, timeout_s: float) -> Iterator[ServerProcess]:
    """A ready server for the body of the ``with``; raises one clear error if it dies or hangs instead."""
    server = ServerProcess(spec, log_path)
    server.start()
    try:
        outcome = server.wait(timeout_s)
        if outcome.status == "died":
            raise ServerDiedError(f"the server exited with code {outcome.returncode} after {outcome.seconds} s "
                                  f"before becoming ready; see {log_path}", returncode=outcome.returncode,
                                  log=log_path)
        if outcome.status == "timeout":
            raise ServerTimeoutError(f"the server was not ready after {timeout_s:g} s; see {log_path} "
                                     f"(raise 'ready_timeout_s' if it is just slow)", timeout_s=timeout_s,
                                     log=log_path)
        yield server
    finally:
        server.stop()
