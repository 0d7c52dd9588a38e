"""The workload's measured lengths: prompt and output tokens per request, as the server counted them.

Why: a chat or conversation workload's prompts are as long as their text, not ``bench_input_len`` (a cap there), so
the cost model's decode context (prompt + half the output) is read off what the run sent, not off the profile.
Random-id workloads send exactly ``bench_input_len`` tokens and keep the profile's lengths (``measured_context``
returns None for them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from eagle3lab.bench.sweep import ArmResult, BenchReport
from eagle3lab.bench.workload import SweepConfig

PROFILE_LENGTH_KINDS = ("ids",)  # prompts exactly input_len tokens long: the profile's lengths are the measured ones


def _mean(total: int, count: int) -> float | None:
    return round(total / count, 2) if count else None


def workload_record(config: SweepConfig, arms: Sequence[ArmResult]) -> dict[str, Any] | None:
    """The prompt kind, its source and the measured mean prompt and output tokens per request, over the baseline
    arm's measured points and per point (every arm sends the same prompts); None without a measured baseline."""
    baseline = next((a for a in arms if not a.speculative and a.measured_points()), None)
    if baseline is None:
        return None
    measured = [(p.concurrency, p.metrics) for p in baseline.measured_points()
                if p.metrics is not None and p.metrics.completed]
    per_point = [{"concurrency": c, "requests": m.completed, "prompt_tokens_mean": _mean(m.input_tokens, m.completed),
                  "output_tokens_mean": _mean(m.output_tokens, m.completed)} for c, m in measured]
    requests = sum(m.completed for _, m in measured)
    return {"prompt_kind": config.prompt_kind, "dataset": Path(config.dataset_path).name if config.dataset_path
            else None, "input_len": config.input_len, "output_len": config.output_len, "seed": config.seed,
            "arm": baseline.name, "requests": requests,
            "prompt_tokens_mean": _mean(sum(m.input_tokens for _, m in measured), requests),
            "output_tokens_mean": _mean(sum(m.output_tokens for _, m in measured), requests),
            "per_point": per_point}


def measured_context(report: BenchReport | None) -> float | None:
    """The cost model's decode context from the run's measured lengths (mean prompt + half the mean output), for
    a workload whose prompts are not exactly ``bench_input_len`` long; None otherwise (the profile's lengths)."""
    workload = report.workload if report is not None else None
    if not workload or workload.get("prompt_kind") in PROFILE_LENGTH_KINDS:
        return None
    prompt, output = workload.get("prompt_tokens_mean"), workload.get("output_tokens_mean")
    return float(prompt) + float(output) / 2 if prompt is not None and output is not None else None
