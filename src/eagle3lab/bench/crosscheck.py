"""Cross-check our harness against sglang's own ``python -m sglang.bench_serving`` on the same server.

Same server, same lengths, same number of prompts and concurrency; only the client differs. Our point (the sweep's,
measured just before) is measured once more right after bench_serving and the two are averaged, so a drift of the
machine (on a shared 2-core box other work comes and goes) shows up as a before/after gap instead of silently
skewing the ratio. The result is read from bench_serving's ``--output-file`` (JSON lines), never parsed from its stdout.
A ratio near 1 says our client measures what sglang's does; far from 1, one of the two clients is the
bottleneck or counts differently.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eagle3lab.bench import cpuload
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, run_arm
from eagle3lab.errors import BenchError
from eagle3lab.bench.metrics import PointMetrics
from eagle3lab.bench.workload import SweepConfig

#: The bench_serving result keys we keep (the rest, e.g. the whole server_info, is in its own file).
KEPT_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
             "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms",
             "p99_itl_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms", "accept_length", "max_concurrency")


@dataclass
class CrossCheck:
    """Our output throughput next to bench_serving's at one concurrency."""

    concurrency: int
    num_prompts: int
    ours_output_tok_per_s: float  # mean of the runs before and after bench_serving
    ours_before_after: list[float]
    theirs_output_tok_per_s: float
    ratio: float  # ours / theirs
    theirs: dict[str, Any]
    argv: list[str]
    seconds: float
    machine_cpu_busy: float | None = None  # whole-machine CPU use while bench_serving ran
    server_cpu: float | None = None  # the server's share of it (the rest: bench_serving and anything else)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BenchServingRun:
    """One bench_serving run: its result line, how it was called, how long it took."""

    result: dict[str, Any]
    argv: list[str]
    seconds: float
    machine_cpu_busy: float | None = None
    server_cpu: float | None = None


def bench_serving_argv(base_url: str, tokenizer_dir: str, config: SweepConfig, concurrency: int,
                       output_file: Path, python: str = sys.executable) -> list[str]:
    """The command line (flags checked against sglang 0.5.9's bench_serving.py).

    ``--tokenize-prompt`` sends token ids like our harness does, so prompt lengths are exact; ``--flush-cache``
    and ``--warmup-requests <concurrency>`` match our per-point flush and warm-up.
    """
    return [python, "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", base_url,
            "--dataset-name", "random-ids", "--random-input-len", str(config.input_len),
            "--random-output-len", str(config.output_len), "--random-range-ratio", "1",
            "--num-prompts", str(config.prompts_for(concurrency)), "--max-concurrency", str(concurrency),
            "--tokenizer", tokenizer_dir, "--tokenize-prompt", "--flush-cache",
            "--warmup-requests", str(config.warmup_count(concurrency)), "--seed", str(config.seed + 1),
            "--disable-tqdm", "--output-file", str(output_file)]


def read_bench_serving_output(path: Path) -> dict[str, Any]:
    """The last JSON line of a bench_serving output file (it appends one line per run)."""
    try:
        lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    except FileNotFoundError:
        raise BenchError(f"bench_serving wrote no output file at {path}; see its log next to it", path=Path(path),
                         problem="missing") from None
    if not lines:
        raise BenchError(f"bench_serving output {path} is empty; the run produced no result", path=Path(path), problem="empty")
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise BenchError(f"bench_serving output {path} does not end with a JSON line", path=Path(path),
                         problem="not_json") from None
    if not isinstance(result, dict) or "output_throughput" not in result:
        raise BenchError(f"bench_serving output {path} has no output_throughput; was the run complete?", path=Path(path),
                         key="output_throughput", problem="missing_key")
    return result


def run_bench_serving(base_url: str, tokenizer_dir: str, config: SweepConfig, concurrency: int, out_dir: Path,
                      timeout_s: float = 1800.0) -> BenchServingRun:
    """Run bench_serving once; its stdout/stderr go to a log file next to its output file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output_file = out_dir / f"bench_serving.c{concurrency}.jsonl"
    log_file = out_dir / f"bench_serving.c{concurrency}.log"
    output_file.unlink(missing_ok=True)
    argv = bench_serving_argv(base_url, tokenizer_dir, config, concurrency, output_file)
    server = cpuload.server_processes(base_url)
    start, cpu_before = time.perf_counter(), cpuload.snapshot(server)
    with log_file.open("wb") as log:
        try:
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise BenchError(f"bench_serving did not finish within {timeout_s:g} s; see {log_file}", path=log_file,
                             problem="timeout") from None
    seconds, used = time.perf_counter() - start, cpuload.shares(cpu_before, cpuload.snapshot(server))
    if proc.returncode != 0:
        tail = log_file.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise BenchError(f"bench_serving exited with code {proc.returncode}: {tail[0][:200]}; see {log_file}", path=log_file,
                         problem="exit_status")
    return BenchServingRun(read_bench_serving_output(output_file), argv, seconds,
                           used.machine_busy if used else None, used.server if used else None)


def compare(ours: list[PointMetrics], run: BenchServingRun, num_prompts: int) -> CrossCheck:
    """Put the two output throughputs side by side (ours: the mean of our runs at the same concurrency)."""
    theirs = run.result
    their_tps = float(theirs["output_throughput"])
    rates = [m.output_tok_per_s for m in ours]
    if not rates or their_tps <= 0 or min(rates) <= 0:
        raise BenchError("a throughput of zero cannot be compared; one of the runs produced no tokens", problem="zero_throughput")
    if len({m.concurrency for m in ours}) != 1:
        raise BenchError("our runs for the cross-check must share one concurrency", key="concurrency",
                         problem="mixed_concurrency")
    mean = sum(rates) / len(rates)
    return CrossCheck(concurrency=ours[0].concurrency, num_prompts=num_prompts, ours_output_tok_per_s=mean,
                      ours_before_after=rates, theirs_output_tok_per_s=their_tps, ratio=mean / their_tps,
                      theirs={k: theirs.get(k) for k in KEPT_KEYS}, argv=run.argv, seconds=run.seconds,
                      machine_cpu_busy=run.machine_cpu_busy, server_cpu=run.server_cpu)


def cross_check(ours: PointMetrics, base_url: str, tokenizer_dir: str, config: SweepConfig,
                out_dir: Path) -> CrossCheck:
    """bench_serving at the concurrency of ``ours`` (our point just measured on this server), then ours again.

    ``tokenizer_dir`` is the model directory (bench_serving loads its tokenizer to build the random-ids prompts).
    """
    run = run_bench_serving(base_url, tokenizer_dir, config, ours.concurrency, out_dir)
    single = dataclasses.replace(config, concurrency=[ours.concurrency])
    again = run_arm("crosscheck_after", base_url, single, out_dir, kind=ARM_KIND_BASELINE,
                    log=lambda line: None).points[0]
    if not again.measured or again.metrics is None:
        raise BenchError(f"our re-measurement after bench_serving failed: {again.reason}", problem="remeasure_failed")
    return compare([ours, again.metrics], run, config.prompts_for(ours.concurrency))
