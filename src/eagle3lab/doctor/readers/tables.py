"""Tables people write by hand or paste from a tool: markdown pipes (``| bs | steps | topk | num_draft |
throughput | acc len |``, as in SpecForge's and sglang's docs), tabulate's grid and "pretty" tables, and columns
aligned with spaces or tabs. A header is recognised by its column names (``HEADERS``: batch / bs / concurrency,
throughput / tok/s / speed, acc len / accept length, steps, topk, draft tokens, speedup, and a method or config
label); a table may also give each arm's throughput in its own column (``baseline tok/s | EAGLE-3 tok/s``).

Which arm a row is: a label that says baseline (``baseline``, ``no spec``, ``w/o``, ``vanilla``, ``off``) or 0
steps is the baseline; an acceptance above 1, steps above 0 or a label naming EAGLE or speculation is the
speculative arm; a row that says neither is skipped, and the note says so. No markdown library reads the
whitespace-aligned form or tells the arms apart, so the cells are split here; each line is split once (linear)."""

from __future__ import annotations

import functools
import re
from typing import Callable, Optional

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.doctor.readers.text import Reading, Row, as_int, number

HEADERS: dict[str, tuple[str, ...]] = {
    "concurrency": ("bs", "batch", "batch size", "batch_size", "bsz", "concurrency", "max concurrency",
                    "max_concurrency", "conc", "num_parallel", "parallel", "concurrent requests", "#concurrency",
                    "max request concurrency", "requests in flight"),
    "throughput": ("throughput", "output throughput", "output_throughput", "tok/s", "token/s", "tokens/s", "tps",
                   "speed", "output tok/s", "gen throughput", "decode throughput", "output token throughput",
                   "tokens per second", "tok/s/gpu"),
    "accept": ("acc len", "acc_len", "acc length", "acc_length", "accept len", "accept_len", "accept length",
               "accept_length", "acceptance length", "acceptance len", "avg accept length", "mean accept length",
               "avg acc len", "avg accept len", "al", "tau", "τ", "mean acceptance length"),
    "steps": ("steps", "num_steps", "num steps", "spec steps", "speculative_num_steps", "draft steps"),
    "topk": ("topk", "top-k", "top_k", "eagle_topk", "eagle topk", "speculative_eagle_topk"),
    "draft": ("num_draft", "num draft", "num_draft_tokens", "draft tokens", "num draft tokens", "ndt",
              "draft_tokens", "speculative_num_draft_tokens"),
    "speedup": ("speedup", "speed up", "speed-up", "speedup ratio"),
    "label": ("method", "config", "configuration", "mode", "setting", "algorithm", "variant", "engine", "arm",
              "setup", "name", "spec", "speculative", "decoding"),
}
_LOOKUP = {name: column for column, names in HEADERS.items() for name in names}
BASELINE_WORDS = re.compile(r"\b(?:baseline|no[ -]?spec\w*|w/o|vanilla|off|none|plain|autoregressive|normal|"
                            r"disabled|ar)\b|^-$", re.IGNORECASE)
SPEC_WORDS = re.compile(r"eagle|spec|mtp|draft|medusa|\bon\b|enabled|w/ ", re.IGNORECASE)
_SEPARATOR = re.compile(r"^[\s|:+\-=]+$")
_WIDE = re.compile(r"\t+|\s{2,}")


_SPACES = re.compile(r"\s+")
_UNIT = re.compile(r"\([^()]*\)")  # a unit in parentheses; [^()] keeps a cell of many "(" linear
# every header name a measure column has holds one of these: a line without any is no header (a cheap test first)
_MEASURE_HINT = re.compile(r"throughput|tok|tps|speed|acc|\bal\b|\btau\b|τ", re.IGNORECASE)
MAX_HEADER_CELL = 80  # no column name is longer


def _clean(cell: str) -> str:
    return _SPACES.sub(" ", cell.replace("*", "").replace("`", "").strip().lower())


@functools.lru_cache(maxsize=4096)
def column_of(cell: str) -> Optional[str]:
    """Which column a header cell names (``Throughput (tok/s)`` -> throughput), or None."""
    if len(cell) > MAX_HEADER_CELL:
        return None
    text = _clean(cell)
    for candidate in (text, _UNIT.sub("", text).strip(), text.strip("#: ")):
        if candidate in _LOOKUP:
            return _LOOKUP[candidate]
    if any(word in text for word in ("tok/s", "token/s", "tokens/s", "throughput")):
        if BASELINE_WORDS.search(text):
            return "throughput_baseline"
        if SPEC_WORDS.search(text):
            return "throughput_spec"
        return "throughput"
    return None


def _pipe_cells(line: str) -> list[str]:
    cells = [c.strip() for c in line.strip().split("|")]
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return cells


def _header(cells: list[str]) -> Optional[list[Optional[str]]]:
    columns = [column_of(c) for c in cells]
    named = {c for c in columns if c}
    measures = named & {"throughput", "throughput_baseline", "throughput_spec", "accept", "speedup"}
    return columns if len(named) >= 2 and measures else None


def _arm(label: Optional[str], steps: Optional[float], accept: Optional[float]) -> Optional[str]:
    if label and BASELINE_WORDS.search(label):
        return "baseline"
    if steps is not None and steps == 0:
        return "baseline"
    if (accept is not None and accept > 1.0) or (steps is not None and steps > 0):
        return "speculative"
    if label and SPEC_WORDS.search(label):
        return "speculative"
    if accept is not None and accept <= 1.0:
        return "baseline"
    return None


def _rows(columns: list[Optional[str]], cells: list[str], where: str, skipped: list[str]) -> list[Row]:
    values = {col: cell for col, cell in zip(columns, cells) if col}
    nums = {col: number(cell) for col, cell in values.items() if col != "label"}
    bad = [col for col, cell in values.items() if col != "label" and nums.get(col) is None
           and cell.strip() not in ("", "-", "—", "n/a", "N/A")]
    if bad:
        skipped.append(f"{where}: unreadable {', '.join(bad)} ({', '.join(repr(values[c]) for c in bad)})")
        if any(c in bad for c in ("throughput", "throughput_spec", "accept")):
            return []
    flags = {k: int(v) for k, v in (("speculative_num_steps", nums.get("steps")),
                                    ("speculative_eagle_topk", nums.get("topk")),
                                    ("speculative_num_draft_tokens", nums.get("draft"))) if v}
    concurrency = as_int(nums.get("concurrency")) or None
    accept = nums.get("accept")
    out = []
    if "throughput_baseline" in columns or "throughput_spec" in columns:
        if nums.get("throughput_baseline") is not None:
            out.append(Row(BenchFigures(arm="baseline", concurrency=concurrency,
                                        output_tok_s=nums["throughput_baseline"], source=f"{where}, baseline column")))
        if nums.get("throughput_spec") is not None:
            out.append(Row(BenchFigures(arm="speculative", concurrency=concurrency, output_tok_s=nums["throughput_spec"],
                                        accept_length=accept, source=f"{where}, speculative column"), flags,
                           nums.get("speedup")))
        return out
    arm = _arm(values.get("label"), nums.get("steps"), accept)
    if arm is None:
        skipped.append(f"{where}: neither a baseline nor a speculative row (no label, steps or acceptance)")
        return []
    fig = BenchFigures(arm=arm, concurrency=concurrency, output_tok_s=nums.get("throughput"),
                       accept_length=accept if arm == "speculative" else None, source=where)
    return [Row(fig, flags if arm == "speculative" else {}, nums.get("speedup") if arm == "speculative" else None)]


def read_tables(text: str, label: str) -> Reading:
    rows: list[Row] = []
    skipped: list[str] = []
    columns: Optional[list[Optional[str]]] = None
    pipe = False
    table = 0
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            columns = None
            continue
        if "|" in line:
            if _SEPARATOR.match(line):
                continue
            cells = _pipe_cells(line.replace("+", "|") if line.strip().startswith("+") else line)
            line_pipe = True
        else:
            cells = [c for c in _WIDE.split(line.strip()) if c]
            line_pipe = False
        hinted = _MEASURE_HINT.search(line.replace("*", "").replace("`", "")) is not None
        header = _header(cells) if hinted else None
        if header is None and hinted and not line_pipe and columns is None:
            header = _header(line.split())
            cells = line.split() if header else cells
        if header is not None:
            columns, pipe, table = header, line_pipe, table + 1
            continue
        if columns is None:
            continue
        if line_pipe != pipe:
            columns = None
            continue
        if len(cells) != len(columns) and not pipe:
            cells = line.split()
        if len(cells) != len(columns):
            skipped.append(f"{label}: table {table}, line {n}: {len(cells)} cells under {len(columns)} headers")
            continue
        rows.extend(_rows(columns, cells, f"{label}: table {table}, line {n}", skipped))
    return Reading(rows, "table", skipped)


READERS: tuple[Callable[[str, str], Reading], ...] = (read_tables,)
