"""What a benchmark file says: sglang ``bench_serving``'s text summary, its JSONL results, or the benchmark's own
command line (whose flags say whether the chat template was applied).

The summary lines are bench_serving's own (``sglang/bench_serving.py``: ``Successful requests:``,
``Max request concurrency:``, ``Output token throughput (tok/s):``, ``Accept length:`` ...) and its
``Namespace(...)`` echo of the arguments; a result without an accept length is taken as the baseline arm.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from eagle3lab.doctor.launch import tolerant_flags
from eagle3lab.bench.diagnostics import BenchFigures

_SUMMARY = {
    "concurrency": r"Max request concurrency:\s*(\d+)",
    "completed": r"Successful requests:\s*(\d+)",
    "output_tok_s": r"Output token throughput \(tok/s\):\s*([\d.]+)",
    "accept_length": r"Accept length:\s*([\d.]+)",
    "total_input": r"Total input tokens:\s*(\d+)",
    "total_output": r"Total generated tokens:\s*(\d+)",
}
_BLOCK = re.compile(r"=+ Serving Benchmark Result =+")
_NAMESPACE = re.compile(r"Namespace\((?P<body>.*?)\)\s*$", re.MULTILINE)
_NS_FIELD = re.compile(r"(?:^|, )(?P<key>[a-z_]+)=(?P<value>'[^']*'|\{[^}]*\}|[^,]*)")
BENCH_COMMANDS = ("bench_serving", "benchmark_serving", "run_benchmark_serving", "evalscope perf", "vllm bench")
CHAT_FLAGS = ("--apply-chat-template", "--use-chat-template")


def _num(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _namespace(text: str) -> dict[str, Any]:
    found = _NAMESPACE.search(text)
    if not found:
        return {}
    out: dict[str, Any] = {}
    for m in _NS_FIELD.finditer(found["body"]):
        value = m["value"].strip().strip("'")
        out[m["key"]] = value
    return out


def _from_args(fig: BenchFigures, args: dict[str, Any], where: str) -> None:
    if "apply_chat_template" in args:
        fig.chat_template = str(args["apply_chat_template"]).lower() == "true"
    fig.dataset = fig.dataset or (str(args["dataset_name"]) if args.get("dataset_name") else None)
    if fig.num_prompts is None and _num(str(args.get("num_prompts"))) is not None:
        fig.num_prompts = int(float(args["num_prompts"]))
    if fig.concurrency is None and _num(str(args.get("max_concurrency"))) is not None:
        fig.concurrency = int(float(args["max_concurrency"]))
    extra = args.get("extra_request_body")
    if isinstance(extra, str) and extra.startswith("{"):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError:
            extra = None
    if isinstance(extra, dict) and isinstance(extra.get("temperature"), (int, float)):
        fig.temperature = float(extra["temperature"])
    fig.source = fig.source or where


def _text_blocks(text: str, label: str) -> list[BenchFigures]:
    starts = [m.start() for m in _BLOCK.finditer(text)]
    args = _namespace(text)
    out = []
    for i, start in enumerate(starts):
        block = text[start:starts[i + 1] if i + 1 < len(starts) else len(text)]
        values = {k: (m.group(1) if (m := re.search(p, block)) else None) for k, p in _SUMMARY.items()}
        completed = _num(values["completed"])
        fig = BenchFigures(arm="speculative" if values["accept_length"] else "baseline",
                           concurrency=int(_num(values["concurrency"])) if values["concurrency"] else None,
                           completed=int(completed) if completed is not None else None,
                           output_tok_s=_num(values["output_tok_s"]), accept_length=_num(values["accept_length"]),
                           source=f"{label}: bench_serving summary {i + 1}")
        if completed and values["total_input"]:
            fig.mean_input_len = float(values["total_input"]) / completed
        if completed and values["total_output"]:
            fig.mean_output_len = float(values["total_output"]) / completed
        if args:
            _from_args(fig, args, f"{label}: bench_serving Namespace")
            if fig.num_prompts is not None and fig.completed is not None:
                fig.failed = max(0, fig.num_prompts - fig.completed)
        out.append(fig)
    return out


def _jsonl(text: str, label: str) -> list[BenchFigures]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(row, dict) or not ({"completed", "output_throughput"} & set(row)):
            continue
        accept = row.get("accept_length")
        completed = row.get("completed")
        fig = BenchFigures(arm="speculative" if isinstance(accept, (int, float)) else "baseline",
                           concurrency=row.get("max_concurrency"), completed=completed,
                           output_tok_s=row.get("output_throughput"),
                           accept_length=accept if isinstance(accept, (int, float)) else None,
                           source=f"{label}: bench_serving JSONL line {n}")
        if completed:
            if isinstance(row.get("total_input_tokens"), (int, float)):
                fig.mean_input_len = row["total_input_tokens"] / completed
            if isinstance(row.get("total_output_tokens"), (int, float)):
                fig.mean_output_len = row["total_output_tokens"] / completed
        _from_args(fig, row, fig.source)
        if fig.num_prompts is not None and completed is not None:
            fig.failed = max(0, fig.num_prompts - completed)
        out.append(fig)
    return out


def _command(text: str, label: str) -> list[BenchFigures]:
    out = []
    joined = re.sub(r"\\\s*\n", " ", text)
    lines = [line for line in joined.splitlines() if any(c in line for c in BENCH_COMMANDS)]
    for line in lines:
        tokens = line.split()
        args = tolerant_flags(tokens)
        fig = BenchFigures(arm="benchmark", source=f"{label}: benchmark command")
        fig.chat_template = any(flag in tokens for flag in CHAT_FLAGS)
        fig.dataset = str(args["dataset_name"]) if args.get("dataset_name") else None
        if isinstance(args.get("num_prompts"), int):
            fig.num_prompts = args["num_prompts"]
        if isinstance(args.get("max_concurrency"), int):
            fig.concurrency = args["max_concurrency"]
        extra = args.get("extra_request_body")
        if isinstance(extra, dict) and isinstance(extra.get("temperature"), (int, float)):
            fig.temperature = float(extra["temperature"])
        for key, attr in (("input_len", "mean_input_len"), ("random_input_len", "mean_input_len"),
                          ("output_len", "mean_output_len"), ("random_output_len", "mean_output_len")):
            if isinstance(args.get(key), int):
                setattr(fig, attr, float(args[key]))
        out.append(fig)
    return out


def parse_bench(text: str, label: str = "bench") -> tuple[list[BenchFigures], str]:
    """Every arm a benchmark file reports, and a note on what was read (empty list: nothing recognised)."""
    for reader, what in ((_text_blocks, "bench_serving text summary"), (_jsonl, "bench_serving JSONL"),
                         (_command, "benchmark command line")):
        found = reader(text, label)
        if found:
            return found, f"{label}: read as {what} ({len(found)} result(s))"
    return [], f"{label}: no bench_serving summary, JSONL result or benchmark command recognised"
