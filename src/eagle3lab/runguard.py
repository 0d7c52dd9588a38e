"""Checks made before a run starts anything: one run per checkout, writable output folders, a usable path.

Why: two runs in one checkout renamed each other's notebooks and truncated each other's logs; a read-only
figures folder failed only after the whole benchmark; a checkout under a path with a space passed set-up and
died in torch's compiler minutes later. Each is now one line before any server starts.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import json
import os
import secrets
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

from eagle3lab.errors import CheckoutPathError, OutputWriteError, RunLockedError
from eagle3lab.paths import REPO_ROOT, repo_dir

RUN_LOCK_NAME = ".eagle3lab-run.lock"
# Set while a run holds the lock, to a token the lock file also names: the run's own children (the notebook kernels
# papermill starts) share its lock instead of being refused by it, and nobody else's process carries the token.
RUN_LOCK_ENV = "EAGLE3LAB_RUN_LOCK_TOKEN"
OUTPUT_FOLDERS = ("artifacts", "figures", "reports")
STOPPED = "stopped (SIGSTOP or a debugger): resume it with kill -CONT or end it"

_held: dict[str, int] = {}  # lock path -> open descriptor, for re-entry within this process (pipeline -> runbook)


def run_lock_path() -> Path:
    return repo_dir("artifacts") / RUN_LOCK_NAME


def flock_holder(path: Path) -> int | None:
    """The pid holding an ``flock`` on the file at ``path``, from the kernel's table (``/proc/locks``), or None.

    Why: a lock file names its holder, but not in the instant between taking the lock and writing the name (a
    holder stopped right there), nor when it is unreadable (another user's umask); the kernel always knows.
    """
    try:
        stat = os.stat(path)
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    exact = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    matches: list[tuple[bool, int]] = []
    for line in table.splitlines():
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 6805 fe:00:2146609 0 EOF"; a waiter's has "->" at [1]
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == str(stat.st_ino):
            try:
                matches.append((fields[5] == exact, int(fields[4])))
            except ValueError:
                continue
    if not matches:
        return None
    exact_pids = [pid for same, pid in matches if same]
    return exact_pids[0] if exact_pids else (matches[0][1] if len(matches) == 1 else None)


def describe_process(pid: int, command: str | None = None) -> str:
    """"pid N (command, state)": the command as recorded (else read from the process), the state when not plain
    running or sleeping (stopped, a zombie, gone), so a waiter knows whom to resume or end."""
    state = ""
    try:
        proc = psutil.Process(pid)
        if not command:
            with suppress(psutil.AccessDenied):
                command = " ".join(proc.cmdline()[:6])
        status = proc.status()
        if status in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP):
            state = f", {STOPPED}"
        elif status not in (psutil.STATUS_RUNNING, psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP):
            state = f", {status}"
    except psutil.NoSuchProcess:
        state = ", gone"
    except psutil.Error:
        pass
    shown = " ".join((command or "eagle3lab").split())[:200]  # one line: a ``python -c`` script has newlines
    return f"pid {pid} ({shown}{state})"


def read_holder(path: Path) -> dict:
    """What a lock file says about its holder ({} when it says nothing readable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe_lock_holder(path: Path, fallback: str = "another eagle3lab process") -> str:
    """Who holds the lock on ``path``: the kernel's lock table first, the file's own record for the command.

    The file may name a previous holder (not yet overwritten) or nobody; the pid in ``/proc/locks`` is the one
    holding it now. ``fallback`` only where neither says (no ``/proc``).
    """
    recorded = read_holder(path)
    try:
        pid: int | None = int(recorded["pid"])
    except (KeyError, ValueError, TypeError):
        pid = None
    live = flock_holder(path)
    if live is not None and live != pid:
        return describe_process(live)
    if pid is None:
        return fallback
    command = recorded.get("command")
    return describe_process(pid, command if isinstance(command, str) else None)


def _joined(path: Path) -> bool:
    """Is this process part of the run holding the lock (a notebook kernel it started)? Its token, inherited
    through the environment, is the one the lock file names, and the holder named there is its ancestor.
    Read, never probed (a probe could make a starting run see the lock as taken)."""
    token = os.environ.get(RUN_LOCK_ENV)
    if not token:
        return False
    recorded = read_holder(path)
    if recorded.get("token") != token:
        return False
    try:
        return int(recorded["pid"]) in {proc.pid for proc in psutil.Process().parents()}
    except (KeyError, ValueError, TypeError, psutil.Error):
        return False


def run_lock_holder() -> str | None:
    """The run holding this checkout's run lock ("pid N (command)"), or None (free, or held by this process or
    the run that started it).

    Read, never probed: the file exists only while held (removed on release) and names a live pid then, so a
    check cannot make a starting run see the lock as taken. A file left by a killed run names a dead pid.
    """
    path = run_lock_path()
    if str(path.resolve()) in _held or _joined(path):
        return None
    try:
        pid: int | None = int(read_holder(path)["pid"])
    except (KeyError, ValueError, TypeError):
        pid = flock_holder(path)  # held, its name not written (yet): the kernel's lock table knows
    if pid is None or pid == os.getpid() or not psutil.pid_exists(pid):
        return None
    return describe_lock_holder(path, "another eagle3lab run")


def _acquire(path: Path, what: str) -> int:
    """An open descriptor holding ``flock`` on the file now at ``path`` (retried if it was replaced meanwhile)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputWriteError(f"cannot create the run lock {path} ({exc.strerror}); make its folder writable "
                                   f"or set EAGLE3LAB_ARTIFACTS_DIR") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise RunLockedError(f"another eagle3lab run is using this checkout's outputs: "
                                 f"{describe_lock_holder(path, 'another eagle3lab run')} holds {path}; wait for "
                                 f"it to end (or stop it) before {what}", path=path) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder before us removed it on release: lock the file that is there now


def _record(fd: int) -> str:
    """Write this process's name and a fresh token into the held lock file; returns the token."""
    token = secrets.token_hex(16)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": " ".join(psutil.Process().cmdline()[:6])[:200],
                              "token": token}).encode(), 0)
    return token


@contextmanager
def run_lock(what: str) -> Iterator[None]:
    """Hold this checkout's run lock (``artifacts/.eagle3lab-run.lock``) for the block, or refuse at once.

    The lock is an ``flock``: the kernel releases it when its holder dies, so a killed run never blocks the next.
    The file names its holder while held and is removed on release (a run leaves no file of its own behind).
    While held, ``RUN_LOCK_ENV`` carries the file's token to this run's children (its notebook kernels).
    """
    path = run_lock_path()
    key = str(path.resolve())
    if key in _held or _joined(path):
        yield
        return
    fd = _acquire(path, what)
    previous = os.environ.get(RUN_LOCK_ENV)
    try:
        os.environ[RUN_LOCK_ENV] = _record(fd)
        _held[key] = fd
        try:
            yield
        finally:
            del _held[key]
            path.unlink(missing_ok=True)  # while still locked: a waiter that opened it re-checks the inode
    finally:
        if previous is None:
            os.environ.pop(RUN_LOCK_ENV, None)
        else:
            os.environ[RUN_LOCK_ENV] = previous
        os.close(fd)


def hold_until_exit(what: str) -> None:
    """Hold this checkout's run lock until this process ends, or refuse at once naming the run that holds it.

    For a notebook kernel run directly (papermill, Jupyter): it writes the same outputs as ``eagle3lab run``, so
    it must not run beside one. A no-op in a process that holds the lock already, or in a kernel that run itself
    started (its token, see ``RUN_LOCK_ENV``). The kernel drops the lock when it dies; the file goes at exit.
    """
    path = run_lock_path()
    key = str(path.resolve())
    if key in _held or _joined(path):
        return
    fd = _acquire(path, what)
    os.environ[RUN_LOCK_ENV] = _record(fd)
    _held[key] = fd
    atexit.register(_release_at_exit, path, fd)


def _release_at_exit(path: Path, fd: int) -> None:
    """Remove the lock file if it is still the one this process locked, then drop the lock."""
    with suppress(OSError):
        if os.stat(path).st_ino == os.fstat(fd).st_ino:
            path.unlink()
    _held.pop(str(path.resolve()), None)
    with suppress(OSError):
        os.close(fd)


def output_folders(report_md: Path | None = None) -> list[Path]:
    """The folders a run writes: artifacts/, figures/, reports/ (moved by ``EAGLE3LAB_<NAME>_DIR``), REPORT.md's."""
    folders = []
    for name in OUTPUT_FOLDERS:
        try:
            folders.append(repo_dir(name))
        except OSError as exc:
            raise OutputWriteError(f"cannot create the output folder {name}/ ({exc.strerror}); make its parent "
                                   f"writable or set EAGLE3LAB_{name.upper()}_DIR") from None
    if report_md is not None:
        folders.append(Path(report_md).parent)
    return folders


def check_writable(folders: list[Path]) -> None:
    """Create and remove a file in each folder: a read-only or full one fails now, not after the benchmark."""
    for folder in folders:
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".eagle3lab-write-check-"):
                pass
        except OSError as exc:
            raise OutputWriteError(f"the output folder {folder} is not writable ({exc.strerror}); fix its "
                                   f"permissions or free space before running (nothing was started)") from None


def check_checkout_path(paths: tuple[Path, ...] | None = None) -> None:
    """Refuse a checkout or environment path with whitespace or non-ASCII characters, naming it and why.

    Why: torch's inductor (used by sglang on CPU) passes include and library paths to the C++ compiler unquoted,
    so ``ld`` reads ``/home/me/my lab/...`` as two arguments and the first launch dies minutes in.
    """
    for path in paths if paths is not None else (REPO_ROOT, Path(sys.prefix)):
        text = str(path)
        bad = sorted({c for c in text if c.isspace() or not c.isascii()})
        if bad:
            shown = ", ".join(repr(c) for c in bad)
            raise CheckoutPathError(f"the path {text!r} contains {shown}: torch's C++ compiler, which sglang uses "
                                    f"on CPU, cannot link under it; move the checkout (and its .venv) to a path of "
                                    f"plain ASCII characters without spaces")
