"""What sglang's own measuring scripts print, each in the format its source writes:

- ``python -m sglang.test.send_one`` (sglang 0.5.9 ``sglang/test/send_one.py``): a tabulate "pretty" table with
  the headers ``Latency (s) | Tokens | Acc Length | Speed (token/s)`` (one request: a single-stream rate);
- sglang's EAGLE tests around it (0.5.9 ``sglang/test/kits/spec_decoding_kit.py``: ``acc_length=2.45
  speed=150.32``, and ``speed=150.32 token/s`` in their CI summary), and the multi-turn variant
  (``Turn 1 - acc_length=2.45, speed=150.32 token/s``);
- ``scripts/playground/bench_speculative.py`` (sgl-project/sglang): ``Finish batch_size=1, steps=3, topk=1,
  num_draft_tokens=4, speed=123.45 token/s, step_time=8.10 ms`` and its JSON lines (``acc_length``, ``speed``);
- the MT-bench / GSM8K scripts of sglang's ``benchmark/`` (``benchmark/mtbench/bench_sglang_eagle.py``:
  ``#questions: 80, Throughput: 523.41 token/s, Acceptance length: 2.87``; ``benchmark/gsm8k/bench_sglang.py``:
  ``Output throughput: 812.360 token/s`` then ``Acceptance length: 3.120``).

send_one prints an acceptance of exactly 1 both without speculation and when nothing was accepted; such a row is
read as the baseline. send_one sends its prompt as raw text (``"Human: ... Assistant:"``, no chat template), so
its rows say the chat template was not applied: a drafter trained on chat-formatted data sees other prompts."""

from __future__ import annotations

import json
import re
from typing import Callable, Optional

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.doctor.readers.text import Reading, Row, as_float, as_int, number

_TOKEN = r"([^\s,|]+)"
SEND_ONE_HEADER = re.compile(r"\|\s*Latency \(s\)\s*\|\s*Tokens\s*\|\s*Acc Length\s*\|\s*Speed \(token/s\)\s*\|")
_TABLE_ROW = re.compile(r"^\|\s*([^|\s]+)\s*\|\s*([^|\s]+)\s*\|\s*([^|\s]+)\s*\|\s*([^|\s]+)\s*\|\s*$", re.MULTILINE)
ACC_SPEED = re.compile(rf"(?:Turn (\d+) - )?acc_length={_TOKEN},?\s+(?:[^\n]*\n)?\s*speed={_TOKEN}(\s*token/s)?")
FINISH = re.compile(rf"Finish (?:i=\d+: )?batch_size={_TOKEN}, steps={_TOKEN}, topk={_TOKEN}, "
                    rf"num_draft_tokens={_TOKEN}, speed={_TOKEN} token/s")
QUESTIONS = re.compile(rf"#questions: {_TOKEN},[^\n]*?Throughput: {_TOKEN} token/s, Acceptance length: {_TOKEN}")
# also SpecForge's older benchmarks/run_*.py, which print "Accept length:" (sgl-project/SpecForge#164 as posted)
GSM8K = re.compile(rf"^Output throughput: {_TOKEN} token/s[ \t]*\r?\n(?:[^\n]*\n)?Accept(?:ance)? length: {_TOKEN}",
                   re.MULTILINE)
SINGLE = "one request (single stream)"
ROW_WINDOW = 1_000  # the row follows its header within a separator line or two


def _arm(accept: Optional[float]) -> str:
    return "speculative" if accept is not None and accept > 1.0 else "baseline"


def _skip(label: str, what: str, raw: str) -> str:
    return f"{label}: {what}: unreadable number(s) in '{raw.strip()[:120]}'"


def send_one_table(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for header in SEND_ONE_HEADER.finditer(text):
        row = _TABLE_ROW.search(text, header.end(), header.end() + ROW_WINDOW)  # its row, not the rest of the text
        if row is None:
            continue
        latency, tokens, accept, speed = (number(v) for v in row.groups())
        if None in (latency, tokens, accept, speed):
            skipped.append(_skip(label, "send_one table", row.group(0)))
            continue
        fig = BenchFigures(arm=_arm(accept), concurrency=1, completed=1, output_tok_s=speed,
                           accept_length=accept if _arm(accept) == "speculative" else None, chat_template=False,
                           mean_output_len=tokens, source=f"{label}: send_one table ({SINGLE}, raw-text prompt)")
        rows.append(Row(fig))
    return Reading(rows, "sglang.test.send_one table", skipped)


def acc_speed(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for m in ACC_SPEED.finditer(text):
        accept, speed = number(m.group(2)), number(m.group(3))
        if accept is None or speed is None:
            skipped.append(_skip(label, "acc_length/speed line", m.group(0)))
            continue
        turn = f" turn {m.group(1)}" if m.group(1) else ""
        fig = BenchFigures(arm=_arm(accept), concurrency=1, output_tok_s=speed,
                           accept_length=accept if accept > 1.0 else None, chat_template=False if not turn else None,
                           source=f"{label}: send_one acc_length/speed{turn} ({SINGLE}, raw-text prompt)")
        rows.append(Row(fig))
    return Reading(rows, "send_one acc_length/speed lines", skipped)


def bench_speculative(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for m in FINISH.finditer(text):
        batch, steps, topk, tokens, speed = (number(v) for v in m.groups())
        if None in (batch, steps, speed):
            skipped.append(_skip(label, "bench_speculative line", m.group(0)))
            continue
        flags = {k: int(v) for k, v in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk),
                                         ("speculative_num_draft_tokens", tokens)) if v is not None and v > 0}
        fig = BenchFigures(arm="speculative" if steps else "baseline", concurrency=as_int(batch) or None,
                           output_tok_s=speed, source=f"{label}: bench_speculative 'Finish' line")
        rows.append(Row(fig, flags))
    for n, line in enumerate(text.splitlines(), 1):
        if '"acc_length"' not in line or not line.strip().startswith("{"):
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            skipped.append(f"{label}: line {n}: a bench_speculative record that is not JSON")
            continue
        if not isinstance(record, dict):
            continue
        accept, speed = as_float(record.get("acc_length")), as_float(record.get("speed"))
        steps = as_int(record.get("steps"))
        if speed is None:
            skipped.append(f"{label}: line {n}: bench_speculative record without a numeric speed")
            continue
        flags = {k: v for k, v in (("speculative_num_steps", steps),
                                   ("speculative_eagle_topk", as_int(record.get("topk"))),
                                   ("speculative_num_draft_tokens", as_int(record.get("num_draft_tokens"))))
                 if v}
        spec = bool(steps) or (accept is not None and accept > 1.0)
        fig = BenchFigures(arm="speculative" if spec else "baseline",
                           concurrency=as_int(record.get("batch_size")) or None, output_tok_s=speed,
                           accept_length=accept if spec else None, source=f"{label}: bench_speculative record {n}")
        rows.append(Row(fig, flags))
    # a record repeats its 'Finish' line with the acceptance added: keep the record where both were pasted
    records = {(r.figures.concurrency, tuple(sorted(r.flags.items()))) for r in rows if "record" in r.figures.source}
    rows = [r for r in rows if "record" in r.figures.source or
            (r.figures.concurrency, tuple(sorted(r.flags.items()))) not in records]
    return Reading(rows, "bench_speculative output", skipped)


def benchmark_scripts(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for m in QUESTIONS.finditer(text):
        questions, speed, accept = (number(v) for v in m.groups())
        if speed is None or accept is None:
            skipped.append(_skip(label, "benchmark script summary", m.group(0)))
            continue
        rows.append(Row(BenchFigures(arm=_arm(accept), num_prompts=as_int(questions), output_tok_s=speed,
                                     accept_length=accept if accept > 1.0 else None,
                                     source=f"{label}: sglang benchmark/ script (#questions line)")))
    for m in GSM8K.finditer(text):
        speed, accept = number(m.group(1)), number(m.group(2))
        if speed is None or accept is None:
            skipped.append(_skip(label, "gsm8k summary", m.group(0)))
            continue
        rows.append(Row(BenchFigures(arm=_arm(accept), output_tok_s=speed,
                                     accept_length=accept if accept > 1.0 else None,
                                     source=f"{label}: sglang benchmark/gsm8k summary")))
    return Reading(rows, "sglang benchmark/ script summary", skipped)


READERS: tuple[Callable[[str, str], Reading], ...] = (send_one_table, acc_speed, bench_speculative,
                                                      benchmark_scripts)
