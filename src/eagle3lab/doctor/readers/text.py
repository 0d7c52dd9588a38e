"""Guards every reader shares: numbers read strictly (``1.2.3``, ``...`` and ``2.10.`` are not numbers, a
sentence's full stop aside), lines cut to a bounded length (so no pattern ever scans a 10 MB line), and a test for
text that is not text at all.

Why: users paste logs and tables by hand, cut mid-number or mid-line; a reader must skip what it cannot read and
say so, never raise, and never take time beyond linear in what it was given."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from eagle3lab.bench.diagnostics.evidence import BenchFigures

# longest line kept: sglang 0.5.x's server_args=ServerArgs(...) line is about 10 KB; anything longer is cut
MAX_LINE = 32_768
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


def bounded(text: str, limit: int = MAX_LINE) -> tuple[str, int]:
    """The text with every line cut to ``limit`` characters, and how many lines were cut."""
    cut = 0
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if len(line) > limit:
            lines[i] = line[:limit]
            cut += 1
    return ("\n".join(lines), cut) if cut else (text, 0)


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
