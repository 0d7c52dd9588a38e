"""The notebook kernel gives back what it holds when its parent (papermill, Jupyter) goes away.

Why: run with papermill directly, a SIGTERM to papermill (alone, or to its process group, as a CI cancel sends)
ends papermill; ipykernel's parent poller then sees the kernel orphaned and calls ``os._exit(1)`` within a
second ("Parent appears to have exited, shutting down"), which skips every ``finally``: sglang stayed patched.
Here the poller's exit first turns into a SIGTERM to the kernel itself -- which ``signals.trap_termination``
turns into ``Interrupted`` in the cell holding the patch, so its restore runs -- and waits (at most
``EXIT_GRACE_S``) until nothing is held any more.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from eagle3lab import signals

EXIT_GRACE_S = 60.0  # as long as the CLI gives a kernel to stop its servers and revert its patches


class _ExitAfterRestore:
    """Stands in for the ``os`` module inside ipykernel's parent poller: everything but ``_exit`` is ``os``'s."""

    eagle3lab_guard = True

    def __init__(self, real: Any, grace_s: float):
        self._real = real
        self._grace_s = grace_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _exit(self, status: int) -> None:
        if signals.holding():
            os.kill(os.getpid(), signal.SIGTERM)  # the main thread unwinds the cell like Ctrl-C, restoring
            deadline = time.monotonic() + self._grace_s
            while signals.holding() and time.monotonic() < deadline:
                time.sleep(0.1)
        self._real._exit(status)


def install(grace_s: float = EXIT_GRACE_S) -> bool:
    """Guard this kernel's parent poller (a no-op outside an ipykernel); returns whether it is guarded."""
    try:
        from ipykernel import parentpoller  # only a kernel has one; delayed so plain imports stay light
    except ImportError:
        return False
    if not getattr(parentpoller.os, "eagle3lab_guard", False):
        # the poller's own view of the os module, replaced on purpose (its os._exit is what the guard wraps)
        parentpoller.os = _ExitAfterRestore(os, grace_s)  # type: ignore[assignment]
    return True
