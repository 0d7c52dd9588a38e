"""What a benchmark file says, whichever tool printed it: every reader of ``doctor.readers`` is tried, the
specific ones first (serving summaries, sglang's scripts, SpecForge, ``eagle3lab bench``), a table of one's own
last. A benchmark command line given beside its output fills in what the output does not say (the chat template,
the dataset, the temperature); alone, it is read for those."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.doctor.readers import own, serving, sglang_scripts, specforge, tables
from eagle3lab.doctor.readers.text import Reading, Row, chunks_of, looks_binary, read_text

Reader = Callable[[str, str], Reading]
BENCH_HEAD, BENCH_TAIL = 1_000_000, 3_000_000  # characters of a benchmark text read: its command, its results
SPECIFIC: tuple[Reader, ...] = (*own.READERS, serving._text_blocks, serving._json_rows, *specforge.READERS,
                                *sglang_scripts.READERS)


@dataclass
class BenchReading:
    """Every result read from one benchmark text, and one note per thing read or skipped."""

    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    binary: bool = False

    @property
    def figures(self) -> list[BenchFigures]:
        return [r.figures for r in self.rows]


def _guarded(reader: Reader, text: str, label: str) -> Reading:
    """A reader that fails on input nobody foresaw costs its own result only, said in one line."""
    try:
        return reader(text, label)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        return Reading([], reader.__name__, [f"{label}: {reader.__name__} skipped the text ({type(exc).__name__})"])


def _sane(row: Row, notes: list[str]) -> bool:
    """A result's measured numbers are positive: a negative throughput, acceptance or count is left out (noted),
    and a result left with no measure at all is dropped."""
    fig = row.figures
    wrong = [name for name in ("output_tok_s", "accept_length", "concurrency", "completed", "failed", "num_prompts",
                               "mean_input_len", "mean_output_len", "temperature")
             if isinstance(getattr(fig, name, None), (int, float)) and getattr(fig, name) < 0]
    for name in wrong:
        setattr(fig, name, None)
    if wrong:
        notes.append(f"{fig.source}: negative {', '.join(wrong)} left out")
    return not wrong or fig.output_tok_s is not None or fig.accept_length is not None


def _fill_from_command(rows: list[Row], command: list[Row]) -> None:
    for row in rows:
        for name in ("chat_template", "dataset", "temperature"):
            given = next((getattr(c.figures, name) for c in command if getattr(c.figures, name) is not None), None)
            if getattr(row.figures, name) is None and given is not None:
                setattr(row.figures, name, given)


def read_bench(text: str, label: str = "bench") -> BenchReading:
    """Every arm a benchmark text reports, with notes on what was read and skipped (no rows: nothing read)."""
    text, notes = read_text(chunks_of(text), label, BENCH_HEAD, BENCH_TAIL)
    if looks_binary(text):
        return BenchReading([], notes + [f"{label}: binary data, not text: nothing read"], binary=True)
    rows: list[Row] = []
    for reader in SPECIFIC:
        reading = _guarded(reader, text, label)
        notes.extend(reading.skipped)
        if reading.rows:
            rows.extend(reading.rows)
            notes.append(f"{label}: read as {reading.what} ({len(reading.rows)} result(s))")
    if not rows:
        reading = _guarded(tables.read_tables, text, label)
        notes.extend(reading.skipped)
        if reading.rows:
            rows = reading.rows
            notes.append(f"{label}: read as {reading.what} ({len(reading.rows)} result(s))")
    command = _guarded(serving._command, text, label)
    if command.rows and rows:
        _fill_from_command(rows, command.rows)
        notes.append(f"{label}: the benchmark command beside the output read for its flags")
    elif command.rows:
        rows = command.rows
        notes.append(f"{label}: read as {command.what} ({len(rows)} result(s))")
    rows = [row for row in rows if _sane(row, notes)]
    if not rows:
        notes.append(f"{label}: no benchmark result recognised (bench_serving, vllm bench serve, send_one, "
                     "bench_speculative, sglang benchmark/ scripts, SpecForge, or a table with throughput and "
                     "acceptance columns)")
    return BenchReading(rows, notes)


def parse_bench(text: str, label: str = "bench") -> tuple[list[BenchFigures], str]:
    """Every arm a benchmark file reports, and a note on what was read (empty list: nothing recognised)."""
    reading = read_bench(text, label)
    return reading.figures, "; ".join(reading.notes)
