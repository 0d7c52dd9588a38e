"""Nothing left behind, judged only on what the test itself started.

Why: pids are reused (``pid_max`` is 32768 on a small box, and a second eagle3lab run beside the suite starts
processes all the time), so "no process has this pid" can fail on someone else's process. A ``psutil.Process``
taken while the test's process lived remembers its start time; ``is_running()`` compares it, so a newer process
that got the pid is not mistaken for the test's.
"""

from __future__ import annotations

import psutil


def gone(proc: psutil.Process) -> bool:
    """Has the test's own process exited (a zombie has: it holds nothing and only waits to be reaped)?"""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
