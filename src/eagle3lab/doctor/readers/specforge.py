"""SpecForge's benchmark output (sgl-project/SpecForge ``benchmarks/bench_eagle3.py`` and its ``benchmarker``):
the printed block of ``benchmarker/utils.py print_results``::

    ==================================================
    mtbench Evaluation Results
    ==================================================
    Number of questions: 80
    Average Latency: 12.345 s
    Average Output throughput: 523.456 token/s
    Average Accept length: 2.870

and the results file ``bench_eagle3.py`` writes (``{"model": ..., "<benchmark>": [{"batch_size", "steps", "topk",
"num_draft_tokens", "metrics": [{"latency", "output_throughput", "accept_length", ...}], "num_samples"}]}``); a
config with 0 steps (``--config-list 1,0,0,0``) is its baseline. Each benchmark batch runs ``batch_size``
prompts at once, so its batch size is the concurrency."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.doctor.readers.text import Reading, Row, as_float, as_int, number

_TOKEN = r"([^\s,|]+)"
BLOCK = re.compile(rf"^Number of questions: {_TOKEN}[^\n]*\n(?:[^\n]*\n){{0,3}}?(?:Average )?Output throughput: "
                   rf"{_TOKEN} token/s[ \t]*\r?\n(?:Average )?Accept length: {_TOKEN}", re.MULTILINE)
NAME = re.compile(r"^(\S+) Evaluation Results", re.MULTILINE)


def printed_block(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for m in BLOCK.finditer(text):
        names = list(NAME.finditer(text, max(0, m.start() - 300), m.start()))
        name = names[-1].group(1) if names else "benchmark"
        questions, speed, accept = number(m.group(1)), number(m.group(2)), number(m.group(3))
        if speed is None or accept is None:
            skipped.append(f"{label}: SpecForge {name} results: unreadable number(s)")
            continue
        spec = accept > 1.0
        rows.append(Row(BenchFigures(arm="speculative" if spec else "baseline", num_prompts=as_int(questions),
                                     output_tok_s=speed, accept_length=accept if spec else None, dataset=name,
                                     source=f"{label}: SpecForge {name} Evaluation Results")))
    return Reading(rows, "SpecForge evaluation results", skipped)


def _runs(name: str, entry: Any, label: str, skipped: list[str]) -> list[Row]:
    if not isinstance(entry, dict):
        return []
    metrics = entry.get("metrics")
    metrics = [m for m in metrics if isinstance(m, dict)] if isinstance(metrics, list) else []
    speeds = [v for v in (as_float(m.get("output_throughput")) for m in metrics) if v is not None]
    accepts = [v for v in (as_float(m.get("accept_length")) for m in metrics) if v is not None]
    if not speeds:
        skipped.append(f"{label}: SpecForge {name}: a config without a numeric output_throughput")
        return []
    steps = as_int(entry.get("steps"))
    accept = sum(accepts) / len(accepts) if accepts else None
    spec = bool(steps) or (steps is None and accept is not None and accept > 1.0)
    flags = {k: v for k, v in (("speculative_num_steps", steps), ("speculative_eagle_topk", as_int(entry.get("topk"))),
                               ("speculative_num_draft_tokens", as_int(entry.get("num_draft_tokens")))) if v}
    fig = BenchFigures(arm="speculative" if spec else "baseline", concurrency=as_int(entry.get("batch_size")) or None,
                       num_prompts=as_int(entry.get("num_samples")), output_tok_s=sum(speeds) / len(speeds),
                       accept_length=accept if spec else None, dataset=name,
                       source=f"{label}: SpecForge bench_eagle3 results, {name}")
    return [Row(fig, flags)]


def results_file(text: str, label: str) -> Reading:
    try:
        data = json.loads(text.strip()) if text.strip().startswith("{") else None
    except (ValueError, RecursionError):
        data = None
    rows: list[Row] = []
    skipped: list[str] = []
    if isinstance(data, dict) and "model" in data:
        for name, entries in data.items():
            if isinstance(entries, list):
                for entry in entries:
                    rows.extend(_runs(str(name), entry, label, skipped))
    return Reading(rows, "SpecForge bench_eagle3 results file", skipped)


READERS: tuple[Callable[[str, str], Reading], ...] = (printed_block, results_file)
