"""Progress for people and for logs.

Two shapes, chosen by ``progress_mode``: in a terminal a plain-text tqdm bar (no widget dependency); elsewhere
(a papermill kernel, CI, output piped to a file) one flushed line per measured point on stderr, saying which point,
its result and the time it took, because a bar's carriage-return redraws are unreadable in a log and a long cell
with no bar at all looked hung (a cross-check of 18 minutes showed only papermill's cell counter).

``EAGLE3LAB_PROGRESS``: ``0`` (also off/no/false) silences both; ``lines`` or ``bar`` forces one; unset, ``1`` or
anything else picks by the stream: ``bar`` on a tty, ``lines`` otherwise and always under ``CI``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import IO, Any

from tqdm.std import tqdm

OFF, LINES, BAR = "off", "lines", "bar"
_OFF_WORDS = {"0", "off", "no", "false"}

# Loops in LINES mode now open, across threads (a sweep runs in a worker thread under Jupyter): a loop opened
# inside another (a sweep inside an interleaved block) keeps quiet, so each block is one line, not two.
_open_lines = 0
_open_lock = threading.Lock()


def progress_mode(stream: IO[str] | None = None) -> str:
    """``off``, ``lines`` or ``bar`` for output going to ``stream`` (None: stderr)."""
    value = os.environ.get("EAGLE3LAB_PROGRESS", "").strip().lower()
    if value in _OFF_WORDS:
        return OFF
    if value in (LINES, BAR):
        return value
    if os.environ.get("CI"):
        return LINES
    stream = sys.stderr if stream is None else stream
    try:
        return BAR if stream is not None and stream.isatty() else LINES
    except (AttributeError, ValueError):  # a closed or odd stream
        return LINES


def kernel_setting() -> str:
    """The ``EAGLE3LAB_PROGRESS`` a notebook kernel run by papermill gets: lines (redrawn bars would fill the
    executed notebook), or off where the caller turned progress off."""
    return "0" if progress_mode() == OFF else LINES


def progress_enabled() -> bool:
    """Whether a bar is drawn (the per-item bars of training and downloads have no line form)."""
    return progress_mode() == BAR


def progress_bar(iterable: Any = None, **kwargs: Any) -> tqdm:
    """``tqdm`` with the project's on/off rule applied: drawn only in ``bar`` mode."""
    kwargs.setdefault("disable", not progress_enabled())
    return tqdm(iterable, **kwargs)


def _emit(line: str, stream: IO[str] | None) -> None:
    """Write one line and flush. By default to file descriptor 2, not ``sys.stderr``: inside a Jupyter kernel
    ``sys.stderr`` reaches only the notebook, while ipykernel forwards fd 2 both to the notebook and to the
    stderr the kernel was started with (``make run``'s terminal, a CI log); elsewhere fd 2 is stderr itself."""
    text = line if line.endswith("\n") else line + "\n"
    if stream is not None:
        stream.write(text)
        stream.flush()
        return
    try:
        sys.stderr.flush()  # keep order with anything already buffered
    except (AttributeError, ValueError, OSError):
        pass
    try:
        os.write(2, text.encode("utf-8", errors="replace"))
    except OSError:
        pass  # no stderr at all: progress is never worth failing a measurement for


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {seconds % 60:02.0f} s"


class PointProgress:
    """Progress over a loop of measured points (sweep concurrencies, interleaved blocks, cross-check runs).

    ``points``: how many points the loop has. ``total``: finer units the bar counts with ``tick`` (the sweep's
    requests); None makes the bar count points. ``point()`` marks one point done with its result: a line in
    ``lines`` mode, the bar's postfix in ``bar`` mode.
    """

    def __init__(self, desc: str, points: int | None, *, total: int | None = None, unit: str = "point",
                 stream: IO[str] | None = None, mode: str | None = None, leave: bool = True) -> None:
        global _open_lines
        self.desc, self.points, self.stream = desc, points, stream
        self.mode = mode or progress_mode(stream)
        self._counts_points = total is None
        self.done = 0
        self.quiet = False
        if self.mode == LINES:
            with _open_lock:
                self.quiet = _open_lines > 0
                _open_lines += 1
        self.bar = tqdm(total=points if total is None else total, desc=desc, unit=unit, file=stream, leave=leave,
                        disable=self.mode != BAR)
        self.started = self._last = time.perf_counter()
        self._closed = False

    def tick(self, n: int = 1) -> None:
        """Finer progress inside a point (drawn on the bar only)."""
        if not self._counts_points:
            self.bar.update(n)

    def point(self, what: str, result: str) -> None:
        """One point finished: ``what`` names it (``c=4``, ``eagle3 c=4 round 2``), ``result`` says how it went."""
        now = time.perf_counter()
        self.done += 1
        if self.mode == BAR:
            if self._counts_points:
                self.bar.update(1)
            self.bar.set_postfix_str(f"{what}: {result}"[:80])
        elif self.mode == LINES and not self.quiet:
            of = f"/{self.points}" if self.points else ""
            _emit(f"[{self.desc}] {self.done}{of} {what}: {result} ({_duration(now - self._last)}; "
                  f"{_duration(now - self.started)} elapsed)", self.stream)
        self._last = now

    def close(self) -> None:
        global _open_lines
        if self._closed:
            return
        self._closed = True
        self.bar.close()
        if self.mode == LINES:
            with _open_lock:
                _open_lines -= 1

    def __enter__(self) -> PointProgress:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
