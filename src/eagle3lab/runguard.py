"""Checks made before a run starts anything: one run per checkout, writable output folders, a usable path.

Why: two runs in one checkout renamed each other's notebooks and truncated each other's logs; a read-only
figures folder failed only after the whole benchmark; a checkout under a path with a space passed set-up and
died in torch's compiler minutes later. Each is now one line before any server starts.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from eagle3lab.errors import CheckoutPathError, OutputWriteError, RunLockedError
from eagle3lab.paths import REPO_ROOT, repo_dir

RUN_LOCK_NAME = ".eagle3lab-run.lock"
OUTPUT_FOLDERS = ("artifacts", "figures", "reports")

_held: dict[str, int] = {}  # lock path -> open descriptor, for re-entry within this process (pipeline -> runbook)


def run_lock_path() -> Path:
    return repo_dir("artifacts") / RUN_LOCK_NAME


def _holder(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
        return f"pid {int(data['pid'])} ({data.get('command', 'eagle3lab')})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def run_lock_holder() -> str | None:
    """The run holding this checkout's run lock ("pid N (command)"), or None (free, or held by this process).

    Read, never probed: the file exists only while held (removed on release) and names a live pid then, so a
    check cannot make a starting run see the lock as taken. A file left by a killed run names a dead pid.
    """
    path = run_lock_path()
    if str(path.resolve()) in _held:
        return None
    try:
        pid = int(json.loads(path.read_text(encoding="utf-8") or "{}")["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or not psutil.pid_exists(pid):
        return None
    return _holder(path)


def _acquire(path: Path, what: str) -> int:
    """An open descriptor holding ``flock`` on the file now at ``path`` (retried if it was replaced meanwhile)."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise RunLockedError(f"another eagle3lab run is using this checkout's outputs: {_holder(path)} holds "
                                 f"{path}; wait for it to end (or stop it) before {what}") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder before us removed it on release: lock the file that is there now


@contextmanager
def run_lock(what: str) -> Iterator[None]:
    """Hold this checkout's run lock (``artifacts/.eagle3lab-run.lock``) for the block, or refuse at once.

    The lock is an ``flock``: the kernel releases it when its holder dies, so a killed run never blocks the next.
    The file names its holder while held and is removed on release (a run leaves no file of its own behind).
    """
    path = run_lock_path()
    key = str(path.resolve())
    if key in _held:
        yield
        return
    fd = _acquire(path, what)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "command": " ".join(psutil.Process().cmdline()[:6])[:200]})
                  .encode(), 0)
        _held[key] = fd
        try:
            yield
        finally:
            del _held[key]
            path.unlink(missing_ok=True)  # while still locked: a waiter that opened it re-checks the inode
    finally:
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
