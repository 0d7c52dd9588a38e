"""Serving benchmarks' summaries: sglang's ``bench_serving`` and vLLM's ``vllm bench serve`` (text and JSON
lines), and the benchmark's own command line (whose flags say whether the chat template was applied).

The summary lines are the tools' own format strings: sglang 0.5.9 ``sglang/bench_serving.py`` (``Max request
concurrency:``, ``Successful requests:``, ``Output token throughput (tok/s):``, ``Accept length:`` ...) and its
``Namespace(...)`` echo of the arguments; vLLM ``vllm/benchmarks/serve.py`` (``Maximum request concurrency:``,
``Failed requests:``, and under ``Speculative Decoding`` ``Acceptance length:``). A result without an acceptance
length is taken as the baseline arm. sglang's bench_serving sends temperature 0.0 unless ``--extra-request-body``
sets one (``async_request_sglang_generate``): ``GREEDY_DEFAULT`` says so where the output names no temperature.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Optional

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.doctor.launch import tolerant_flags
from eagle3lab.doctor.readers.text import Reading, Row, as_float, as_int, number

_NUM = r"([^\s]+)"
_SUMMARY = {
    "concurrency": rf"Max(?:imum)? request concurrency:[ \t]*{_NUM}",
    "completed": rf"Successful requests:[ \t]*{_NUM}",
    "failed": rf"Failed requests:[ \t]*{_NUM}",
    "output_tok_s": rf"Output token throughput \(tok/s\):[ \t]*{_NUM}",
    "accept_length": rf"Accept(?:ance)? length:[ \t]*{_NUM}",
    "total_input": rf"Total input tokens:[ \t]*{_NUM}",
    "total_output": rf"Total generated tokens:[ \t]*{_NUM}",
}
_SUMMARY_RE = {key: re.compile(pattern) for key, pattern in _SUMMARY.items()}
_BLOCK = re.compile(r"=+ ?Serving Benchmark Result ?=+")
NAMESPACE = "Namespace("
_NS_FIELD = re.compile(r"(?:^|, )(?P<key>[a-z_]+)=(?P<value>'[^']*'|\{[^}]*\}|[^,]*)")
BENCH_COMMANDS = ("bench_serving", "benchmark_serving", "run_benchmark_serving", "evalscope perf", "vllm bench")
CHAT_FLAGS = ("--apply-chat-template", "--use-chat-template")
SGLANG_TOOL, VLLM_TOOL = "sglang bench_serving", "vllm bench serve"
GREEDY_DEFAULT = ("bench_serving's default: sglang/bench_serving.py (0.5.9, async_request_sglang_generate) sends "
                  "temperature 0.0 unless --extra-request-body sets one")


def _namespace(text: str) -> dict[str, Any]:
    """The first line's ``Namespace(...)`` echo: found by a string search per line, since a pattern scanning to
    the line's end from every ``Namespace(`` in it is quadratic in the line."""
    for line in text.split("\n"):
        start = line.find(NAMESPACE)
        end = len(line.rstrip(" \t"))
        if start >= 0 and line.endswith(")", 0, end) and end > start + len(NAMESPACE):
            body = line[start + len(NAMESPACE):end - 1]
            return {m["key"]: m["value"].strip().strip("'") for m in _NS_FIELD.finditer(body)}
    return {}


def _temperature(extra: Any) -> Optional[float]:
    if isinstance(extra, str) and extra.startswith("{"):
        try:
            extra = json.loads(extra)
        except (json.JSONDecodeError, RecursionError):
            return None
    if isinstance(extra, dict):
        nested = extra.get("sampling_params")
        params: dict[str, Any] = nested if isinstance(nested, dict) else extra
        return as_float(params.get("temperature"))
    return None


def _from_args(fig: BenchFigures, args: dict[str, Any], where: str) -> None:
    if "apply_chat_template" in args:
        fig.chat_template = str(args["apply_chat_template"]).lower() == "true"
    if fig.dataset is None and isinstance(args.get("dataset_name"), str) and args["dataset_name"]:
        fig.dataset = args["dataset_name"]
    if fig.num_prompts is None:
        fig.num_prompts = as_int(args.get("num_prompts"))
    if fig.concurrency is None:
        fig.concurrency = as_int(args.get("max_concurrency")) or None
    temperature = _temperature(args.get("extra_request_body"))
    if temperature is not None:
        fig.temperature = temperature
    fig.source = fig.source or where


def _means(fig: BenchFigures, completed: Optional[int], total_input: Optional[float],
           total_output: Optional[float]) -> None:
    if completed:
        if total_input is not None:
            fig.mean_input_len = total_input / completed
        if total_output is not None:
            fig.mean_output_len = total_output / completed


def _text_blocks(text: str, label: str) -> Reading:
    starts = [m.start() for m in _BLOCK.finditer(text)]
    args = _namespace(text)
    rows, skipped = [], []
    tool = VLLM_TOOL if "Maximum request concurrency:" in text or "Speculative Decoding" in text else SGLANG_TOOL
    for i, start in enumerate(starts):
        block = text[start:starts[i + 1] if i + 1 < len(starts) else len(text)]
        raw = {k: (m.group(1) if (m := p.search(block)) else None) for k, p in _SUMMARY_RE.items()}
        values = {k: number(v) for k, v in raw.items()}
        bad = [k for k in raw if raw[k] is not None and values[k] is None]
        if bad:
            skipped.append(f"{label}: {tool} summary {i + 1}: unreadable {', '.join(bad)} "
                           f"({', '.join(repr(raw[k]) for k in bad)})")
        completed = as_int(values["completed"])
        accept = values["accept_length"]
        fig = BenchFigures(arm="speculative" if accept else "baseline",
                           concurrency=as_int(values["concurrency"]) or None, completed=completed,
                           failed=as_int(values["failed"]), output_tok_s=values["output_tok_s"],
                           accept_length=accept or None, source=f"{label}: {tool} summary {i + 1}")
        _means(fig, completed, values["total_input"], values["total_output"])
        if args:
            _from_args(fig, args, f"{label}: {tool} Namespace")
            if fig.failed is None and fig.num_prompts is not None and fig.completed is not None:
                fig.failed = max(0, fig.num_prompts - fig.completed)
        rows.append(Row(fig))
    return Reading(rows, f"{tool} text summary", skipped)


def _json_objects(text: str) -> list[tuple[str, Any]]:
    """One JSON object (vLLM's ``--save-result`` file, indented) or JSON lines (sglang's ``--output-file``)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            return [("JSON", json.loads(stripped))]
        except (ValueError, RecursionError):
            pass
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append((f"JSON line {n}", json.loads(line)))
            except (ValueError, RecursionError):
                continue
    return out


def _json_rows(text: str, label: str) -> Reading:
    rows, skipped = [], []
    for where, row in _json_objects(text):
        if not isinstance(row, dict) or not ({"completed", "output_throughput"} & set(row)):
            continue
        vllm = "spec_decode_acceptance_length" in row or "max_concurrent_requests" in row
        tool = VLLM_TOOL if vllm else SGLANG_TOOL
        accept = as_float(row.get("accept_length", row.get("spec_decode_acceptance_length")))
        completed = as_int(row.get("completed"))
        throughput = as_float(row.get("output_throughput"))
        if throughput is None and completed is None:
            skipped.append(f"{label}: {tool} {where}: neither completed nor output_throughput is a number")
            continue
        fig = BenchFigures(arm="speculative" if accept else "baseline",
                           concurrency=as_int(row.get("max_concurrency")) or None, completed=completed,
                           failed=as_int(row.get("failed")), output_tok_s=throughput, accept_length=accept or None,
                           source=f"{label}: {tool} {where}")
        _means(fig, completed, as_float(row.get("total_input_tokens")), as_float(row.get("total_output_tokens")))
        _from_args(fig, row, fig.source)
        if fig.failed is None and fig.num_prompts is not None and completed is not None:
            fig.failed = max(0, fig.num_prompts - completed)
        rows.append(Row(fig))
    return Reading(rows, "serving benchmark JSON", skipped)


def _command(text: str, label: str) -> Reading:
    rows = []
    joined = re.sub(r"\\[ \t]*\r?\n", " ", text)
    for line in (line for line in joined.splitlines() if any(c in line for c in BENCH_COMMANDS)):
        tokens = line.split()
        args = tolerant_flags(tokens)
        fig = BenchFigures(arm="benchmark", source=f"{label}: benchmark command")
        fig.chat_template = any(flag in tokens for flag in CHAT_FLAGS)
        fig.dataset = str(args["dataset_name"]) if args.get("dataset_name") else None
        fig.num_prompts = as_int(args.get("num_prompts"))
        fig.concurrency = as_int(args.get("max_concurrency")) or None
        fig.temperature = _temperature(args.get("extra_request_body"))
        for key, attr in (("input_len", "mean_input_len"), ("random_input_len", "mean_input_len"),
                          ("output_len", "mean_output_len"), ("random_output_len", "mean_output_len")):
            if as_int(args.get(key)) is not None:
                setattr(fig, attr, float(args[key]))
        rows.append(Row(fig))
    return Reading(rows, "benchmark command line")


READERS: tuple[Callable[[str, str], Reading], ...] = (_text_blocks, _json_rows, _command)


def sglang_greedy_default(rows: list[Row]) -> bool:
    """Did sglang's bench_serving measure these rows without naming a temperature (so it sent 0.0)?"""
    figs = [r.figures for r in rows]
    return bool(figs) and all(SGLANG_TOOL in f.source or "benchmark command" in f.source for f in figs) and \
        all(f.temperature is None for f in figs) and any(SGLANG_TOOL in f.source for f in figs)
