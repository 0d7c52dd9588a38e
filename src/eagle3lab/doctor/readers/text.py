"""Guards every reader shares: numbers read strictly (``1.2.3``, ``...`` and ``2.10.`` are not numbers, a
sentence's full stop aside), text read in one streaming pass with its lines cut to a bounded length
(``LineReader``, ``read_text``: no pattern ever scans a 10 MB line, no file is held whole), and a test for text
that is not text at all.

Why: users paste logs and tables by hand, cut mid-number or mid-line; a reader must skip what it cannot read and
say so, never raise, and never take time beyond linear in what it was given."""

from __future__ import annotations

import itertools
import math
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from eagle3lab.bench.diagnostics.evidence import BenchFigures

# longest line kept: sglang 0.5.x's server_args=ServerArgs(...) line is about 10 KB; anything longer is cut
MAX_LINE = 32_768
CHUNK = 1 << 20  # characters read at a time: no file is ever held whole to be split
_FLOAT = re.compile(r"[+-]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][+-]?\d+)?")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


@dataclass
class Row:
    """One benchmark result a reader recognised, and the speculative flags it names (steps, topk, draft tokens,
    as sglang's field names), which the launch may lack."""

    figures: BenchFigures
    flags: dict[str, int] = field(default_factory=dict)
    speedup: Optional[float] = None  # a speedup the text states for this row (a table's "speedup" column)


@dataclass
class Reading:
    """What one reader found in a text: its rows, what the text is, and what it skipped (one line each)."""

    rows: list[Row]
    what: str
    skipped: list[str] = field(default_factory=list)


def chunks_of(text: str, size: int = CHUNK) -> Iterator[str]:
    """A text in pieces of ``size`` characters, for the readers that take a stream."""
    for start in range(0, len(text), size):
        yield text[start:start + size]


def file_chunks(path: Path, size: int = CHUNK) -> Iterator[str]:
    """A file's text in pieces of ``size`` characters (undecodable bytes replaced), never the whole file at once."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        while chunk := handle.read(size):
            yield chunk


def _record_start(line: str, at: int, after: int) -> int:
    """Where the record whose mark is at ``at`` starts: at the ``[`` of its timestamp when one is just before."""
    bracket = line.rfind("[", max(after, at - 80), at)
    return bracket if bracket >= 0 else at


class LineReader:
    """The lines of a text read piece by piece, each at most ``limit`` characters: the rest of a longer line is
    skipped (counted in ``cut``) without ever being held whole, so a 10 MB line costs one pass and ``limit``
    characters of memory. With a ``mark`` (a log's ``Decode batch``), every record the mark starts mid-line is a
    line of its own: a log pasted with its line breaks lost reads as the server wrote it, and no pattern scans a
    line once per record in it (which would be quadratic)."""

    def __init__(self, chunks: Iterable[str], limit: int = MAX_LINE, mark: Optional[str] = None) -> None:
        self.chunks, self.limit, self.mark, self.cut = chunks, limit, mark, 0

    def _cap(self, line: str) -> str:
        if len(line) > self.limit:
            self.cut += 1
            return line[:self.limit]
        return line

    def _pieces(self, line: str) -> Iterator[str]:
        """A line split before every mark after its first (at the ``[`` of a timestamp just before the mark)."""
        mark = self.mark
        first = line.find(mark) if mark else -1
        at = line.find(mark, first + len(mark)) if mark and first >= 0 else -1
        if at < 0:
            yield self._cap(line)
            return
        assert mark is not None
        start, prev_end = 0, first + len(mark)
        while at >= 0:
            split = _record_start(line, at, prev_end)
            yield self._cap(line[start:split])
            start, prev_end = split, at + len(mark)
            at = line.find(mark, prev_end)
        yield self._cap(line[start:])

    def __iter__(self) -> Iterator[str]:
        keep = len(self.mark) - 1 if self.mark else 0  # a mark may straddle two pieces of a skipped line
        carry, skipping = "", False
        for chunk in self.chunks:
            buf, carry = carry + chunk, ""
            if skipping:  # inside a line already cut: drop up to its end, or up to the next record's mark
                newline = buf.find("\n")
                end = newline if newline >= 0 else len(buf)
                at = buf.find(self.mark, 0, end) if self.mark else -1
                if at >= 0:
                    buf, skipping = buf[at:], False
                elif newline >= 0:
                    buf, skipping = buf[newline + 1:], False
                else:
                    carry = buf[-keep:] if keep else ""
                    continue
            lines = buf.split("\n")
            carry = lines.pop()
            for line in lines:
                yield from self._pieces(line)
            if len(carry) > self.limit:
                mark = self.mark or ""
                at = carry.rfind(mark) if mark else -1
                if at > 0:  # whole records before the last mark are lines already
                    before = carry.rfind(mark, 0, at)
                    at = _record_start(carry, at, before + len(mark) if before >= 0 else 0)
                    yield from self._pieces(carry[:at])
                    carry = carry[at:]
                if len(carry) > self.limit:
                    yield self._cap(carry)
                    carry, skipping = (carry[-keep:] if keep else ""), True
        if carry and not skipping:
            yield from self._pieces(carry)


def read_text(chunks: Iterable[str], label: str, head: int, tail: int) -> tuple[str, list[str]]:
    """A text read in one streaming pass with every line bounded: its first ``head`` and last ``tail`` characters
    of lines, and notes on what was cut or skipped. A benchmark's command comes first and its results last, so a
    CI log around them costs only the middle. Binary data is returned as its first piece, for the readers to say
    so."""
    pieces = iter(chunks)
    first = next(pieces, "")
    if looks_binary(first):
        return first, []
    reader = LineReader(itertools.chain([first], pieces))
    kept: list[str] = []
    last: deque[str] = deque()
    size = last_size = skipped = 0
    for line in reader:
        if size + len(line) <= head:
            kept.append(line)
            size += len(line) + 1
            continue
        last.append(line)
        last_size += len(line) + 1
        while last_size > tail:
            last_size -= len(last.popleft()) + 1
            skipped += 1
    notes = [f"{label}: {reader.cut} line(s) longer than {MAX_LINE} characters were cut"] if reader.cut else []
    if skipped:
        notes.append(f"{label}: a long text: its first {head // 1000} KB and last {tail // 1000} KB read, "
                     f"{skipped} line(s) between them skipped")
    return "\n".join(itertools.chain(kept, last)), notes


def looks_binary(text: str) -> bool:
    """NUL bytes, or more than a tenth of the characters control characters or undecodable bytes: not text."""
    if not text:
        return False
    if "\x00" in text:
        return True
    sample = text[:65_536]
    odd = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\n\r\f\x1b") or ch == "\ufffd")
    return odd > len(sample) / 10


def number(text: Optional[str]) -> Optional[float]:
    """A finite number written as people write them (``1,234.5``, ``2.10.`` at a sentence's end, ``1.8x``), or
    None (``1.2.3``, ``...``, ``nan``, words)."""
    if text is None:
        return None
    token = str(text).strip().rstrip("x×%")
    if token.endswith(".") and token.count(".") == 2:
        token = token[:-1]
    if _THOUSANDS.fullmatch(token):
        token = token.replace(",", "")
    if not _FLOAT.fullmatch(token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def as_float(value: Any) -> Optional[float]:
    """A JSON value as a finite float: numbers and numeric strings; None for lists, dicts, booleans, words."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return number(value)
    return None


def as_int(value: Any) -> Optional[int]:
    """A JSON value as a non-negative whole number (``8``, ``8.0``, ``"8"``), else None."""
    number_value = as_float(value)
    if number_value is None or number_value < 0 or number_value != int(number_value):
        return None
    return int(number_value)
