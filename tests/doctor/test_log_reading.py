"""Issue 43, item 5: the server log read in one streaming pass bounded in time and memory (``readers.serverlog``,
``readers.text.LineReader``), and the rules guarded (``doctor.checked``): what each keeps and drops."""

from __future__ import annotations

from eagle3lab.bench.diagnostics.evidence import CAUSES, UNKNOWN, Evidence
from eagle3lab.doctor.checked import checked_args, guarded_diagnose
from eagle3lab.doctor.readers.serverlog import MAX_EXTREMES, MAX_RECORDS, read_log
from eagle3lab.doctor.readers.text import LineReader, chunks_of, read_text

DECODE = ("[2026-01-01 00:00:{s:02d} TP0] Decode batch, #running-req: {running}, #token: 4096, token usage: 0.05, "
          "accept len: 2.50, cuda graph: True, gen throughput (token/s): 812.3, #queue-req: {queued}")


def decode(running: int = 8, queued: int = 0, s: int = 0) -> str:
    return DECODE.format(running=running, queued=queued, s=s % 60)


def test_the_log_is_read_in_bounded_memory_keeping_its_extremes():
    """100 000 decode lines read from a stream: at most MAX_RECORDS kept, evenly spread, and the lines with the
    largest #running-req and #queue-req kept whatever the thinning."""
    lines = [decode(s=i) for i in range(100_000)]
    lines[77_777] = decode(running=99, s=1)
    lines[55_555] = decode(queued=5, s=2)
    text = "\n".join(["[2026] server_args=ServerArgs(tp_size=2)", *lines])
    reading = read_log(chunks_of(text, 65_536), "--server-log")
    kept = reading.text.splitlines()
    decode_kept = [line for line in kept if "Decode batch" in line]
    assert len(decode_kept) <= MAX_RECORDS + MAX_EXTREMES
    assert kept[0].startswith("[2026] server_args=") and lines[77_777] in kept and lines[55_555] in kept
    assert len(reading.text) < len(text) / 5
    short = "\n".join(lines[:100])
    assert read_log(chunks_of(short, 1000), "--server-log").text == short  # a short log reads as written


def test_lines_are_the_same_however_the_text_is_chunked():
    text = ("plain line\n" + "[t] Decode batch a [t] Decode batch b" + "y" * 50 + "\n" + "z" * 300 + "\nend")
    whole = list(LineReader([text], limit=100, mark="Decode batch"))
    for size in (1, 7, 64):
        reader = LineReader(chunks_of(text, size), limit=100, mark="Decode batch")
        assert list(reader) == whole and reader.cut == 1
    assert whole == ["plain line", "[t] Decode batch a ", "[t] Decode batch b" + "y" * 50, "z" * 100, "end"]


def test_a_text_keeps_its_first_and_last_lines_and_says_what_it_skipped():
    text = "\n".join(f"line {i}" for i in range(100_000))
    kept, notes = read_text(chunks_of(text, 4096), "--bench", 1_000, 2_000)
    lines = kept.splitlines()
    assert lines[0] == "line 0" and lines[-1] == "line 99999" and len(kept) <= 3_000
    assert notes and "skipped" in notes[0]
    assert read_text(chunks_of(kept, 7), "--bench", 1_000, 2_000) == (kept, [])  # a second read changes nothing


def test_a_rule_that_still_fails_answers_unknown_for_its_own_cause():
    """The last guard: a value no check foresaw costs its rule's answer (unknown, with a note), not the run."""
    def broken(ev: Evidence):
        return 1 / ev.concurrency[0]

    notes: list[str] = []
    findings = guarded_diagnose(Evidence(concurrency=[0]), notes, rules=[broken])
    assert [(f.cause, f.applies) for f in findings] == [(CAUSES[0], UNKNOWN)]
    assert "ZeroDivisionError" in notes[0] and "answered unknown" in notes[0]


def test_server_arguments_keep_numbers_as_sglang_holds_them():
    notes: list[str] = []
    args = checked_args({"tp_size": "2", "cuda_graph_max_bs": 8.0, "cuda_graph_bs": [1, "2"], "max_running_requests":
                         True, "speculative_algorithm": ["EAGLE3"]}, "--server-log server_args", notes)
    assert args == {"tp_size": 2, "cuda_graph_max_bs": 8, "cuda_graph_bs": [1, 2]}
    assert "max_running_requests=True" in notes[0] and "speculative_algorithm=['EAGLE3']" in notes[0]
