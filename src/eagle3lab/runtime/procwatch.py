"""Process trees: who a process started, whether any of them died, and how to end them all.

Why: an sglang server is a tree (launcher, scheduler, detokenizer). When the scheduler dies, sglang 0.5.9's
HTTP front stays up and requests simply hang, so watching sockets alone notices nothing until a timeout. A
``TreeWatch`` takes the tree once it is up and reports the first member that exits, with its exit status, within
a poll interval. A tree whose members all live but whose streams went silent is either stopped (a member in the
``stopped`` or ``tracing-stop`` state: SIGSTOP, Ctrl-Z, a debugger) or hung; ``TreeWatch.stopped()`` names the
stopped member, so a stall is not mistaken for a death. ``kill_tree`` is the last resort that guarantees nothing
outlives what started it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil


@dataclass(frozen=True)
class Death:
    """A member of a watched tree that is gone."""

    pid: int
    name: str
    status: str  # "exit code 1", "killed by SIGKILL", or "exit status unknown (reaped by its parent)"
    role: str  # "launcher" or "child"

    def describe(self) -> str:
        return f"{self.role} {self.name} (pid {self.pid}) {self.status}"


@dataclass(frozen=True)
class Stopped:
    """A member of a watched tree that is alive but stopped: it will not run until it is resumed."""

    pid: int
    name: str
    status: str  # psutil.STATUS_STOPPED or psutil.STATUS_TRACING_STOP

    def describe(self) -> str:
        if self.status == psutil.STATUS_TRACING_STOP:
            return (f"{self.name} (pid {self.pid}) is stopped under a tracer (a debugger?); detach it or stop the "
                    f"server")
        return (f"{self.name} (pid {self.pid}) is stopped (SIGSTOP?); resume it with kill -CONT {self.pid} or stop "
                f"the server")


STOPPED_STATES = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


def first_stopped(members: Sequence[psutil.Process], names: dict[int, str] | None = None) -> Stopped | None:
    """The first of ``members`` that is stopped (members gone meanwhile are skipped: that is the death watch's job)."""
    for proc in members:
        try:
            status = proc.status()
        except psutil.Error:
            continue
        if status in STOPPED_STATES:
            name = (names or {}).get(proc.pid)
            if name is None:
                try:
                    name = proc.name()
                except psutil.Error:
                    name = "?"
            return Stopped(proc.pid, name, status)
    return None


def describe_wait_status(code: int) -> str:
    """The Linux ``exit_code`` field (a waitpid status word) as words."""
    if code & 0x7F:
        sig = code & 0x7F
        try:
            return f"killed by {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}"
    return f"exit code {(code >> 8) & 0xFF}"


def describe_returncode(code: int | None) -> str:
    """A ``Popen.returncode`` (negative for a signal) as words."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def zombie_status(pid: int) -> str | None:
    """Exit status of a process that has exited but not been reaped yet (``/proc/<pid>/stat`` field 52)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    # fields[0] is field 3 (state); field 52 (exit_code) is fields[49] (Linux >= 3.5).
    if not fields or fields[0] not in ("Z", "X") or len(fields) < 50:
        return None
    return describe_wait_status(int(fields[49]))


def tree(pid: int) -> list[psutil.Process]:
    """The process and all its live descendants (empty if it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


@dataclass
class TreeMemory:
    """Memory of a process tree, counted two ways.

    ``rss`` sums each process's resident set, so pages several processes share (the mmapped safetensors weights
    every TP worker maps, CUDA/torch libraries) count once per process: with TP 8 the weights count eight times.
    ``pss`` sums the proportional set size (each shared page divided among the processes that map it), so the
    sum counts every page once: the tree's real footprint. ``per_process`` keeps both per pid."""

    rss: int = 0
    pss: int = 0
    per_process: dict[int, dict[str, int]] = field(default_factory=dict)


def tree_memory(pid: int) -> TreeMemory:
    """RSS and PSS of ``pid`` and its descendants (PSS from /proc/<pid>/smaps_rollup via psutil; RSS where the
    kernel does not give PSS)."""
    out = TreeMemory()
    for proc in tree(pid):
        try:
            info = proc.memory_full_info()
            rss, pss = int(info.rss), int(getattr(info, "pss", info.rss))
        except psutil.AccessDenied:
            try:
                rss = pss = int(proc.memory_info().rss)
            except psutil.Error:
                continue
        except psutil.Error:
            continue
        out.rss += rss
        out.pss += pss
        out.per_process[proc.pid] = {"rss": rss, "pss": pss}
    return out


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class TreeWatch:
    """Watch the members a tree had when the watch began; ``death()`` names the first one gone."""

    def __init__(self, root_pid: int, popen: object | None = None):
        self.root_pid = root_pid
        self.popen = popen  # the launcher's Popen, when we started it: its exact return code
        self.members = tree(root_pid)
        self.names = {}
        for proc in self.members:
            try:
                self.names[proc.pid] = proc.name()
            except psutil.Error:
                self.names[proc.pid] = "?"

    def death(self) -> Death | None:
        for proc in self.members:
            if alive(proc):
                continue
            role = "launcher" if proc.pid == self.root_pid else "child"
            status = None
            if role == "launcher" and self.popen is not None:
                code = self.popen.poll()  # type: ignore[attr-defined]
                status = describe_returncode(code) if code is not None else None
            status = status or zombie_status(proc.pid) or "exit status unknown (reaped by its parent)"
            return Death(proc.pid, self.names.get(proc.pid, "?"), status, role)
        return None

    def stopped(self) -> Stopped | None:
        """The first member that is alive but stopped (SIGSTOP, a debugger), or None."""
        return first_stopped(self.members, self.names)


def kill_tree(pid: int, timeout_s: float = 5.0) -> list[int]:
    """SIGKILL a process and every descendant; returns the pids that were alive and got the signal."""
    procs = [p for p in tree(pid) if alive(p)]
    for proc in procs:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)
    return [p.pid for p in procs]


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Live descendants of ``pid`` (default: this process)."""
    return [p for p in tree(pid or os.getpid())[1:] if alive(p)]


def children_of(pid: int) -> list[psutil.Process]:
    """Direct live children of ``pid`` (none if it is gone)."""
    try:
        return [p for p in psutil.Process(pid).children() if alive(p)]
    except psutil.Error:
        return []


def is_sglang_server(proc: psutil.Process) -> bool:
    try:
        return any("sglang" in part for part in proc.cmdline()[:4])
    except psutil.Error:
        return False


LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")


def listening_pid(port: int) -> int | None:
    """The process listening on a local TCP port, if this host has one we may see."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return conn.pid
    except (psutil.Error, OSError):
        pass
    return None


class ServerWatch:
    """A local server's tree, as the benchmark asks about it: calling it returns None while every member lives,
    else the first member gone and how (``"child sglang::scheduler (pid 12) killed by SIGKILL"``); ``stopped()``
    names a member that lives but is stopped. Why both: a silent stream means a dead, a stopped or a hung server,
    and each needs its own words (and remedy)."""

    def __init__(self, tree_watch: TreeWatch):
        self.tree = tree_watch

    def __call__(self) -> str | None:
        found = self.tree.death()
        return found.describe() if found else None

    def stopped(self) -> str | None:
        found = self.tree.stopped()
        return found.describe() if found else None


def death_watch_for_url(base_url: str) -> ServerWatch | None:
    """For a server on this host: its ``ServerWatch`` (taken from the process listening on the URL's port).
    None for a remote server, or when nothing listens there."""
    parts = urlsplit(base_url)
    if parts.hostname not in LOCAL_HOSTS or parts.port is None:
        return None
    pid = listening_pid(parts.port)
    if pid is None:
        return None
    return ServerWatch(TreeWatch(pid))
