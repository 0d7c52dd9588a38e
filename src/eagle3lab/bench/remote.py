"""``eagle3lab bench``: the project's benchmark client on a server the user runs (``--base-url``), or an
interleaved A/B of two (``--baseline-url``): both up at once, each concurrency's prompts split into rounds of
blocks in mirrored order (``bench.interleave``), each arm pooled over its blocks with the bootstrap interval of
the speedup over the rounds (``launch_spread.interleaved_sample``), per-request acceptance from each response's
``meta_info``, and the lossless check between the two servers' greedy outputs, block by block on the same prompts.

Its JSON (``RESULT_FILE``) is what ``doctor --bench`` reads (``doctor.readers.own``): one entry per arm and
concurrency under ``points``, with the workload's temperature, dataset and chat-template setting."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import os
import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, Sequence

from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.bench import interleave, launch_spread
from eagle3lab.bench.loadgen import fetch_json
from eagle3lab.bench.lossless import LosslessComparison, compare_outputs
from eagle3lab.bench.sweep import (ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ArmResult, PointResult, load_requests,
                                   arm_summary, run_arm)
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError
from eagle3lab.progress import PointProgress

TOOL = "eagle3lab bench"
RESULT_FILE, CSV_FILE = "bench_result.json", "bench_result.csv"
SPECULATIVE, BASELINE = "speculative", "baseline"


def server_info(base_url: str) -> dict[str, Any]:
    """``/get_server_info`` of a running sglang server, or one line saying none answers there."""
    info = asyncio.run(fetch_json(base_url.rstrip("/"), "/get_server_info", timeout_s=30.0))
    if not isinstance(info, dict):
        raise BenchError(f"no sglang server answers /get_server_info at {base_url}; start it or fix the URL",
                         key="base_url", value=base_url, problem="unreachable")
    return info


def is_speculative(info: dict[str, Any]) -> bool:
    return bool(info.get("speculative_algorithm"))


@dataclass
class Point:
    """One arm at one concurrency, as doctor reads it."""

    arm: str  # speculative | baseline
    concurrency: int
    output_tok_s: Optional[float]
    accept_length: Optional[float]
    completed: int
    failed: int
    num_prompts: int
    mean_input_len: Optional[float]
    mean_output_len: Optional[float]
    server: str


@dataclass
class Result:
    """Everything one ``eagle3lab bench`` run measured."""

    servers: dict[str, str]
    workload: dict[str, Any]
    points: list[Point] = field(default_factory=list)
    interleaved: list[dict[str, Any]] = field(default_factory=list)  # launch_spread.LaunchSample per concurrency
    lossless: list[dict[str, Any]] = field(default_factory=list)
    arms: list[dict[str, Any]] = field(default_factory=list)
    date: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    machine: dict[str, Any] = field(default_factory=lambda: {"platform": platform.platform(),
                                                             "cpus": os.cpu_count()})

    def to_dict(self) -> dict[str, Any]:
        return {"tool": TOOL, "version": 1, **dataclasses.asdict(self)}


def _point(arm: str, point: PointResult, server: str) -> Point:
    m = point.metrics
    done = m.completed if m else 0
    return Point(arm, point.concurrency, m.output_tok_per_s if m else None, m.accept_length if m else None, done,
                 m.failed if m else 0, m.requests if m else 0, (m.input_tokens / done) if m and done else None,
                 (m.output_tokens / done) if m and done else None, server)


def workload(config: SweepConfig, dataset: str, chat_template: bool) -> dict[str, Any]:
    """The workload as doctor reads it: the sweep settings, greedy sampling (the client sends temperature 0 unless
    extra sampling parameters say otherwise), the dataset and whether the chat template was applied."""
    temperature = float(config.extra_sampling_params.get("temperature", 0.0) or 0.0)
    return {**config.to_dict(), "dataset": dataset, "chat_template": chat_template, "temperature": temperature}


def run_single(base_url: str, config: SweepConfig, out_dir: Path, dataset: str, chat_template: bool) -> Result:
    """Sweep one server over the concurrency list (``sweep.run_arm``)."""
    info = server_info(base_url)
    arm = SPECULATIVE if is_speculative(info) else BASELINE
    result = run_arm(arm, base_url, config, out_dir, kind=ARM_KIND_EAGLE3 if arm == SPECULATIVE else
                     ARM_KIND_BASELINE)
    out = Result({arm: base_url}, workload(config, dataset, chat_template), arms=[result.to_dict()])
    out.points = [_point(arm, p, base_url) for p in result.measured_points()]
    return out


def _records(arm: ArmResult, out_dir: Path) -> list[Any]:
    return load_requests(out_dir / arm.requests_file) if arm.requests_file else []


def run_pair(spec_url: str, base_url: str, config: SweepConfig, out_dir: Path, rounds: int,
             prompts: Optional[int], dataset: str, chat_template: bool) -> Result:
    """Both servers, every concurrency in each round, blocks mirrored (``interleave.schedule``)."""
    spec_info, base_info = server_info(spec_url), server_info(base_url)
    if not is_speculative(spec_info):
        raise BenchError(f"--base-url {spec_url} serves without speculative decoding; give the speculative server "
                         "as --base-url and the plain one as --baseline-url", key="base_url", problem="not_speculative")
    if is_speculative(base_info):
        raise BenchError(f"--baseline-url {base_url} serves with speculative decoding; give a plain server",
                         key="baseline_url", problem="speculative")
    blocks: dict[int, Sequence[SweepConfig]] = {
        c: interleave.block_configs(dataclasses.replace(config, concurrency=[c]), c, rounds, prompts)
        for c in config.concurrency}
    urls = {interleave.BASELINE: base_url, interleave.EAGLE3: spec_url}
    kinds = {interleave.BASELINE: ARM_KIND_BASELINE, interleave.EAGLE3: ARM_KIND_EAGLE3}
    measured: dict[tuple[str, int], list[ArmResult]] = {(a, c): [] for a in urls for c in blocks}
    plan = interleave.schedule(blocks)
    with PointProgress("interleaved A/B", len(plan), unit="block") as progress:
        for block in plan:
            name = f"{block.arm}-c{block.concurrency}-round{block.round}"
            arm = run_arm(name, urls[block.arm], block.config, out_dir, kind=kinds[block.arm], log=lambda _: None)
            measured[(block.arm, block.concurrency)].append(arm)
            progress.point(f"{block.arm} c={block.concurrency} round {block.round}", arm_summary(arm))
    out = Result({SPECULATIVE: spec_url, BASELINE: base_url}, workload(config, dataset, chat_template))
    for c in sorted(blocks):
        base_blocks, spec_blocks = measured[(interleave.BASELINE, c)], measured[(interleave.EAGLE3, c)]
        out.arms.extend(a.to_dict() for a in base_blocks + spec_blocks)
        sample = launch_spread.interleaved_sample(1, base_blocks, spec_blocks, c)
        if isinstance(sample, str):
            out.interleaved.append({"concurrency": c, "skipped": sample})
            continue
        out.interleaved.append(sample.model_dump())
        out.points.extend(_pooled_points(base_blocks, spec_blocks, c, sample, spec_url, base_url))
        out.lossless.append(_lossless(base_blocks, spec_blocks, c, out_dir))
    return out


def _pooled_points(base_blocks: Sequence[ArmResult], spec_blocks: Sequence[ArmResult], c: int, sample: Any,
                   spec_url: str, base_url: str) -> list[Point]:
    def totals(blocks: Sequence[ArmResult]) -> tuple[int, int, int, Optional[float], Optional[float]]:
        metrics = [p.metrics for b in blocks for p in b.measured_points() if p.concurrency == c and p.metrics]
        done = sum(m.completed for m in metrics)
        mean_in = sum(m.input_tokens for m in metrics) / done if done else None
        mean_out = sum(m.output_tokens for m in metrics) / done if done else None
        return done, sum(m.failed for m in metrics), sum(m.requests for m in metrics), mean_in, mean_out

    b_done, b_failed, b_requests, b_in, b_out = totals(base_blocks)
    s_done, s_failed, s_requests, s_in, s_out = totals(spec_blocks)
    return [Point(BASELINE, c, sample.baseline_tok_s, None, b_done, b_failed, b_requests, b_in, b_out, base_url),
            Point(SPECULATIVE, c, sample.eagle3_tok_s, sample.accept_length, s_done, s_failed, s_requests, s_in, s_out,
                  spec_url)]


def _lossless(base_blocks: Sequence[ArmResult], spec_blocks: Sequence[ArmResult], c: int,
              out_dir: Path) -> dict[str, Any]:
    """The speculative server's greedy outputs against the baseline's, block by block (each pair of a round ran
    the same prompts), summed over the rounds."""
    rounds: list[LosslessComparison] = []
    for base, spec in zip(base_blocks, spec_blocks):
        try:
            rounds.append(compare_outputs(_records(base, out_dir), _records(spec, out_dir), c,
                                          reference_arm=base.name, candidate_arm=spec.name))
        except BenchError as exc:
            return {"concurrency": c, "checked": False, "reason": str(exc)}
    prompts = sum(r.prompts for r in rounds)
    identical = sum(r.identical for r in rounds)
    first = next((dataclasses.asdict(m) for r in rounds for m in r.mismatches), None)
    return {"concurrency": c, "checked": True, "prompts": prompts, "identical": identical,
            "tokens_compared": sum(r.tokens_compared for r in rounds), "lossless": prompts > 0 and identical == prompts,
            "first_mismatch": first}


def write_outputs(result: Result, out_dir: Path) -> tuple[Path, Path]:
    """The JSON doctor reads and a CSV of the points, both written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = write_json_atomic(out_dir / RESULT_FILE, result.to_dict())
    buffer = io.StringIO()
    names = [f.name for f in dataclasses.fields(Point)]
    writer = csv.DictWriter(buffer, fieldnames=names + ["speedup", "speedup_low", "speedup_high"])
    writer.writeheader()
    intervals = {s["concurrency"]: s for s in result.interleaved if "speedup" in s}
    for point in result.points:
        row: dict[str, Any] = dataclasses.asdict(point)
        sample = intervals.get(point.concurrency)
        if sample and point.arm == SPECULATIVE:
            row.update(speedup=sample["speedup"], speedup_low=sample.get("speedup_low"),
                       speedup_high=sample.get("speedup_high"))
        writer.writerow(row)
    return json_path, write_text_atomic(out_dir / CSV_FILE, buffer.getvalue())


def summary(result: Result) -> list[str]:
    """One line per point (and per interleaved concurrency, its speedup and interval; and the lossless check)."""
    lines = [f"{p.arm:<11} c={p.concurrency:<3} {p.output_tok_s or 0:>9.1f} tok/s  "
             f"accept {p.accept_length if p.accept_length is not None else '-':<6}  ok {p.completed}/{p.num_prompts}"
             for p in result.points]
    for s in result.interleaved:
        if "speedup" in s:
            interval = f" [{s['speedup_low']:.2f}, {s['speedup_high']:.2f}] 95% over {len(s['round_speedups'])} rounds" \
                if s.get("speedup_low") is not None else ""
            lines.append(f"c={s['concurrency']}: speedup {s['speedup']:.2f}x{interval}")
        else:
            lines.append(f"c={s['concurrency']}: {s.get('skipped')}")
    for check in result.lossless:
        if check.get("checked"):
            lines.append(f"c={check['concurrency']}: lossless {check['identical']}/{check['prompts']} prompts identical")
    return lines
