"""A server log as the rules need it, read in one streaming pass that is bounded in time and memory whatever the
file's size: lines cut to a bounded length (``text.LineReader``), decode records that lost their line breaks on a
line each, and of a long log only what a rule reads (``bench.diagnostics.logs``).

Why: a 200 MB log held whole and scanned once per rule took minutes and a gigabyte; one 10 MB line never ended.
The rules read the ``Decode batch`` lines (and vLLM's acceptance lines), a few start-up messages and the
``server_args`` line. A log's start (``HEAD_CHARS`` of its other lines) is kept whole, so a short log reads
exactly as written; beyond it only lines a rule's pattern matches are kept. Of the decode and acceptance lines
at most ``MAX_RECORDS`` are kept, evenly spread over the log (every 2nd, then every 4th ...), and those that
raise the largest ``#running-req`` or ``#queue-req`` seen are always kept, so the batch, queue and graph rules see
the log's extremes. A decode line whose values are not numbers (``accept len: 1.2.3``) is skipped and counted."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterable, Optional

from eagle3lab.bench.diagnostics.logs import (LOG_ACCEPT_ANY, MIXED_OFF, OVERLAP_OFF, RADIX_OFF, RESET_CAP,
                                              SCHEDULER_LIMITS, SPEC_V2_ON, VLLM_TRUNCATED, decode_lines)
from eagle3lab.doctor.readers.text import MAX_LINE, LineReader, looks_binary

MARK = "Decode batch"
MAX_RECORDS = 10_000  # decode / acceptance lines kept, evenly spread
MAX_RECORD_LINE = 4_096  # a decode line is ~300 characters; the rest of a longer one is noise
MAX_EXTREMES = 1_000  # lines kept for a new largest #running-req / #queue-req
HEAD_CHARS = 4_000_000  # other lines kept whole up to this much text
MAX_OTHER = 1_000  # beyond the head, lines a start-up pattern matches
STARTUP = (RESET_CAP, OVERLAP_OFF, SPEC_V2_ON, MIXED_OFF, RADIX_OFF, SCHEDULER_LIMITS, VLLM_TRUNCATED)


@dataclass
class LogReading:
    """The log text the rules read (binary data: its first piece), and one note per thing cut, thinned or
    skipped."""

    text: str
    notes: list[str] = field(default_factory=list)


@dataclass
class _Kept:
    lines: list[tuple[int, str]] = field(default_factory=list)  # (record number, or -1: never thinned; line)
    stride: int = 1
    thinned: int = 0  # records kept, of those the stride lets through
    records: int = 0

    def record(self, line: str) -> None:
        n, self.records = self.records, self.records + 1
        if n % self.stride:
            return
        self.lines.append((n, line))
        self.thinned += 1
        if self.thinned > MAX_RECORDS:
            self.stride *= 2
            self.lines = [(k, text) for k, text in self.lines if k < 0 or k % self.stride == 0]
            self.thinned = sum(1 for k, _ in self.lines if k >= 0)


def read_log(chunks: Iterable[str], label: str) -> LogReading:
    """The log the rules read, from its text in pieces (``text.file_chunks`` or ``text.chunks_of``)."""
    pieces = iter(chunks)
    first = next(pieces, "")
    if looks_binary(first):  # its first piece, for the caller to say it is not text
        return LogReading(first)
    reader = LineReader(itertools.chain([first], pieces), MAX_LINE, MARK)
    kept = _Kept()
    top_running: dict[Optional[bool], int] = {}
    top_queued, extremes, head, other, dropped, total = 0, 0, 0, 0, 0, 0
    bad: list[str] = []
    for line in reader:
        total += 1
        if MARK in line:
            line = line[:MAX_RECORD_LINE]
            try:
                parsed = decode_lines(line)
            except ValueError:  # accept len: 1.2.3, gen throughput (token/s): ...
                bad.append(line)
                continue
            if parsed:
                d = parsed[0]
                if extremes < MAX_EXTREMES and (d.running > top_running.get(d.graph, -1) or (d.queued or 0) > top_queued):
                    top_running[d.graph] = max(d.running, top_running.get(d.graph, -1))
                    top_queued = max(top_queued, d.queued or 0)
                    extremes += 1
                    kept.lines.append((-1, line))
                else:
                    kept.record(line)
                continue
        if LOG_ACCEPT_ANY.search(line):
            kept.record(line[:MAX_RECORD_LINE])
        elif head + len(line) <= HEAD_CHARS:
            head += len(line) + 1
            kept.lines.append((-1, line))
        elif other < MAX_OTHER and ("server_args=" in line or any(p.search(line) for p in STARTUP)):
            other += 1
            kept.lines.append((-1, line))
        else:
            dropped += 1
    notes = []
    if reader.cut:
        notes.append(f"{label}: {reader.cut} line(s) longer than {MAX_LINE} characters were cut")
    if bad:
        notes.append(f"{label}: {len(bad)} decode line(s) with a value that is no number skipped (e.g. "
                     f"'{bad[0].strip()[:160]}')")
    if kept.stride > 1 or dropped:
        notes.append(f"{label}: a long log ({total} lines): kept {kept.thinned} of {kept.records} decode/acceptance "
                     f"lines{f' evenly spread (1 in {kept.stride})' if kept.stride > 1 else ''}, {extremes} with the largest #running-req or "
                     f"#queue-req, and the start-up lines the rules read; {dropped} other line(s) skipped")
    return LogReading("\n".join(line for _, line in kept.lines), notes)
