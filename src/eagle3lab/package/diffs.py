"""Unified diffs in memory: a patch's header, its file paths, and its hunks applied with exact context.

Why not GNU ``patch``: it edits files in place, applies with fuzz, and cannot tell "already applied" from
"unexpected original" in one answer. Here the diff is parsed with ``unidiff`` and every hunk must match its
context exactly (line offsets allowed, so independent patches stack); applying forward and backward answers
"applicable", "already applied" or "neither" without touching a file. Writing is ``transaction``'s job.
"""

from __future__ import annotations

import email.parser
from dataclasses import dataclass
from pathlib import Path

import unidiff

from eagle3lab.errors import PatchError


@dataclass(frozen=True)
class PatchInfo:
    """The header every project patch carries (RFC 822 style lines before the first ``---``)."""

    name: str
    applies_to: str = ""
    what: str = ""
    why: str = ""
    fixed_upstream: str = ""


def parse(path: Path) -> tuple[PatchInfo, list[unidiff.PatchedFile]]:
    """A patch file's header and its file sections; one line if it is no unified diff or changes nothing."""
    text = path.read_text(encoding="utf-8")
    try:
        files = list(unidiff.PatchSet(text))
    except unidiff.UnidiffParseError as err:
        raise PatchError(f"{path.name} is not a valid unified diff ({err}); regenerate it with diff -u",
                         patch=path.stem, path=path, problem="invalid_diff") from err
    if not files:
        raise PatchError(f"{path.name} contains no file changes; it must be a unified diff", patch=path.stem, path=path,
                         problem="empty_diff")
    return read_header(text, default_name=path.stem), files


def read_header(text: str, default_name: str) -> PatchInfo:
    """Header lines before the diff, parsed as RFC 822 fields (folded lines joined)."""
    head = text.split("\n--- ", 1)[0].split("\n\n", 1)[0]
    fields = email.parser.HeaderParser().parsestr(head + "\n\n")

    def get(key: str) -> str:
        return " ".join(str(fields.get(key, "")).split())

    return PatchInfo(
        name=get("Patch-Name") or default_name,
        applies_to=get("Applies-To"),
        what=get("What"),
        why=get("Why"),
        fixed_upstream=get("Fixed-Upstream"),
    )


def diff_path(name: str) -> str:
    """A path as the diff names it, without its ``a/`` or ``b/`` prefix."""
    return name[2:] if name.startswith(("a/", "b/")) else name


def target_path(pfile: unidiff.PatchedFile) -> str:
    """The ``b/`` side of a file in the diff, without its prefix (not confined: for in-memory use only)."""
    return diff_path(pfile.target_file)


# Exact-context hunk application (in memory)


def _hunk_sides(hunk: unidiff.Hunk, reverse: bool) -> tuple[list[str], list[str]]:
    old = [line.value for line in hunk if line.is_context or (line.is_added if reverse else line.is_removed)]
    new = [line.value for line in hunk if line.is_context or (line.is_removed if reverse else line.is_added)]
    return old, new


def _find(lines: list[str], block: list[str], expected: int, start: int) -> int | None:
    """Index where ``block`` occurs exactly, at or after ``start``, nearest to ``expected``."""
    if not block:
        return max(start, min(expected, len(lines)))
    last = len(lines) - len(block)
    candidates = range(start, last + 1)
    for pos in sorted(candidates, key=lambda p: abs(p - expected)):
        if lines[pos : pos + len(block)] == block:
            return pos
    return None


def apply_hunks(text: str, pfile: unidiff.PatchedFile, reverse: bool) -> tuple[str | None, int]:
    """Patched text, or (None, number of the first hunk that does not match)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    cursor = 0
    offset = 0
    for number, hunk in enumerate(pfile, start=1):
        old, new = _hunk_sides(hunk, reverse)
        start_line = hunk.target_start if reverse else hunk.source_start
        expected = max(start_line - 1, 0) + offset
        pos = _find(lines, old, expected, cursor)
        if pos is None:
            return None, number
        offset = pos - max(start_line - 1, 0)
        out.extend(lines[cursor:pos])
        out.extend(new)
        cursor = pos + len(old)
    out.extend(lines[cursor:])
    return "".join(out), 0
