"""A child Python process that answers with one JSON line: the one way eagle3lab asks something in isolation.

Why children: some questions must not be asked in the caller's process (torch's CUDA state, sglang's import-time
side effects, a patched package that must be imported fresh, a server-side model build). The child prints its
answer as one line behind ``RESULT_PREFIX`` (anything else it prints, warnings and logs included, is ignored);
the parent gets the payload back, or why there was none.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

RESULT_PREFIX = "EAGLE3LAB_RESULT "


def emit(payload: Any) -> None:
    """In the child: print the answer (the last such line wins)."""
    print(RESULT_PREFIX + json.dumps(payload), flush=True)


@dataclass
class ChildAnswer:
    """What came back: the payload, or (payload None) the exit status, a timeout, and the end of stderr."""

    payload: Any
    returncode: Optional[int]
    timed_out: bool
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return self.payload is not None

    def failure(self) -> str:
        """One line for an error message: why no answer came."""
        if self.timed_out:
            return "no answer before the time limit"
        return f"exited {self.returncode} without a result: {self.stderr_tail or 'nothing on stderr'}"


def read_answer(stdout: str) -> Any:
    """The payload of the last ``RESULT_PREFIX`` line of a child's output, or None."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    return json.loads(lines[-1][len(RESULT_PREFIX):]) if lines else None


def module_argv(module: str, args: Sequence[str] = (), python: str = sys.executable) -> list[str]:
    """``python -m module args...``"""
    return [python, "-m", module, *args]


def ask_child(module: str, args: Sequence[str] = (), *, stdin: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
              python: str = sys.executable, tail_lines: int = 3) -> ChildAnswer:
    """Run ``python -m module args...`` in its own session and read its ``RESULT_PREFIX`` line."""
    return ask(module_argv(module, args, python), stdin=stdin, env=env, timeout_s=timeout_s, tail_lines=tail_lines)


def ask(argv: Sequence[str], *, stdin: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None, tail_lines: int = 3) -> ChildAnswer:
    """Run ``argv`` in its own session and read its ``RESULT_PREFIX`` line.

    On a timeout, or whatever happens, the child's whole process group is killed: nothing it started outlives it.
    """
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin is not None else None,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=None if env is None else dict(env), start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    tail = " | ".join(stderr.strip().splitlines()[-tail_lines:])
    return ChildAnswer(None if timed_out else read_answer(stdout), proc.returncode, timed_out, tail)
