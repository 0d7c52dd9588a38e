"""SIGTERM and SIGHUP take the same way out as Ctrl-C, and a restore is never cut in half by a signal.

Why: Python turns SIGINT into ``KeyboardInterrupt``, so every ``finally`` runs (patched sglang files put back,
server trees stopped). SIGTERM and SIGHUP kill the process at once by default and skip all of that, which is
how a ``kill -TERM`` used to leave sglang patched. So:

- code that holds something it must give back (a patch, a server) runs under ``trap_termination()``: while
  anything is held, SIGTERM and SIGHUP raise ``Interrupted`` (a ``KeyboardInterrupt``) like Ctrl-C does;
- code that gives it back runs under ``deferred()``: a signal that arrives meanwhile is handled right after;
- the CLI installs ``cli_handlers()`` for the whole command and prints one line from ``Interrupted``: what was
  running (``activity``) and what cleanup restored (``restored``).

Only the main thread can handle signals in Python, so every helper here is a no-op in other threads.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

TERMINATION_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
ALL_SIGNALS = (signal.SIGINT, *TERMINATION_SIGNALS)

_activities: list[str] = []
_restored: list[str] = []
_held = 0
_saved: dict[int, Any] = {}


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM or SIGHUP) stopped the work; carries what was running when it came."""

    def __init__(self, signum: int, during: str | None = None):
        self.signum = signum
        self.signame = signal.Signals(signum).name
        self.during = during if during is not None else current_activity()
        self.restored_mark = len(_restored)
        super().__init__(f"{self.signame} during {self.during}")

    @property
    def exit_status(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (130, 143, 129)."""
        return 128 + self.signum

    def restorations(self) -> list[str]:
        """What cleanup code reported restoring since this interruption began."""
        return list(dict.fromkeys(_restored[self.restored_mark:]))


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def _ours(handler: Any) -> bool:
    return handler is _raise_interrupted


# ---------------------------------------------------------------------------------------------------------
# What is running, what was restored (for the one line the CLI prints)


def current_activity() -> str:
    return _activities[-1] if _activities else "the command"


@contextmanager
def activity(description: str) -> Iterator[None]:
    """Name the work in progress, so an interruption can say what it stopped."""
    _activities.append(description)
    try:
        yield
    finally:
        _activities.pop()


def restored(what: str) -> None:
    """Cleanup code reports what it gave back ("patch X reverted", "sglang server pid N stopped")."""
    _restored.append(what)


# ---------------------------------------------------------------------------------------------------------
# Holding something: SIGTERM/SIGHUP become Interrupted while it is held


def hold_termination() -> None:
    """Start holding: SIGTERM and SIGHUP raise ``Interrupted`` until every hold is released (re-entrant).

    A signal that is ignored (``nohup``) stays ignored, and a handler someone else installed is left alone.
    """
    global _held
    if not _in_main_thread():
        return
    if _held == 0:
        for sig in TERMINATION_SIGNALS:
            current = signal.getsignal(sig)
            if current == signal.SIG_DFL:
                _saved[sig] = current
                signal.signal(sig, _raise_interrupted)
    _held += 1


def holding() -> bool:
    """Whether something that must be given back (a patch, a server) is held in this process right now."""
    return _held > 0


def release_termination() -> None:
    global _held
    if not _in_main_thread() or _held == 0:
        return
    _held -= 1
    if _held == 0:
        for sig, previous in _saved.items():
            if _ours(signal.getsignal(sig)):
                signal.signal(sig, previous)
        _saved.clear()


@contextmanager
def trap_termination() -> Iterator[None]:
    """``hold_termination()`` for the block: a SIGTERM or SIGHUP inside unwinds it like Ctrl-C would."""
    hold_termination()
    try:
        yield
    finally:
        release_termination()


# ---------------------------------------------------------------------------------------------------------
# Giving it back: signals wait until the restore is complete


@contextmanager
def deferred() -> Iterator[None]:
    """Signals that arrive inside the block are handled right after it, by the handler that was in place.

    Why: a second Ctrl-C (or the SIGTERM a supervisor sends after SIGINT) must not stop a revert half-way.
    """
    if not _in_main_thread():
        yield
        return
    caught: list[int] = []
    saved: dict[int, Any] = {}
    for sig in ALL_SIGNALS:
        current = signal.getsignal(sig)
        if current == signal.SIG_IGN or current is None:
            continue
        saved[sig] = current
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for restored, handler in saved.items():
            signal.signal(restored, handler)
        if caught:
            _deliver(caught[0], saved[caught[0]])


def _deliver(signum: int, handler: Any) -> None:
    """Run what the signal would have done had it not waited."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)  # the default action: the process ends by this signal


# ---------------------------------------------------------------------------------------------------------
# The CLI: every one of SIGINT, SIGTERM and SIGHUP raises Interrupted for the whole command


@contextmanager
def cli_handlers() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP all raise ``Interrupted`` in the main thread while the command runs.

    A signal ignored when the command started (``nohup``, a background job's SIGINT) stays ignored.
    """
    if not _in_main_thread():
        yield
        return
    saved: dict[int, Callable | int | None] = {}
    for sig in ALL_SIGNALS:
        current = signal.getsignal(sig)
        if current == signal.SIG_IGN:
            continue
        saved[sig] = current
        signal.signal(sig, _raise_interrupted)
    try:
        yield
    finally:
        for restored, handler in saved.items():
            signal.signal(restored, handler)
