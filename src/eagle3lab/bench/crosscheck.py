"""Cross-check our harness against sglang's own ``python -m sglang.bench_serving`` on the same server.

Same server, same lengths, same number of prompts and concurrency; only the client differs. A run of a few hundred
tokens lasts a second or two, and on a shared 2-core machine one such window differs from the next by several per
cent, in a noisy spell by a quarter (measured 2026-12-03 on one idle machine, one baseline server, concurrency 4:
single-round ratios 0.80-1.42 within minutes). So both clients run ``rounds`` times, alternated in mirrored order (ours, theirs | theirs,
ours | ...: a drift of the machine falls on both), on ``num_prompts`` each, and each side's throughput is pooled
(all its tokens over all its run time). Every round's pair is kept. The result is read from bench_serving's
``--output-file`` (JSON lines), never parsed from its stdout. A pooled ratio near 1 says our client measures what
sglang's does; far from 1, with the rounds agreeing, one of the two clients is the bottleneck or counts differently.
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

from eagle3lab.bench import cpuload, interleave
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, point_summary, run_arm
from eagle3lab.errors import BenchError
from eagle3lab.progress import PointProgress
from eagle3lab.bench.metrics import PointMetrics
from eagle3lab.bench.workload import SweepConfig

#: The bench_serving result keys we keep (the rest, e.g. the whole server_info, is in its own file).
OURS, THEIRS = "ours", "theirs"  # the two clients, as ``CrossCheck.order`` names them
KEPT_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
             "output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "median_itl_ms",
             "p99_itl_ms", "mean_e2e_latency_ms", "median_e2e_latency_ms", "accept_length", "max_concurrency")


@dataclass
class CrossCheck:
    """Our output throughput next to bench_serving's at one concurrency, each pooled over alternated rounds."""

    concurrency: int
    num_prompts: int  # measured prompts per run (each client, each round)
    ours_output_tok_per_s: float  # pooled: our rounds' output tokens over their summed durations
    theirs_output_tok_per_s: float  # pooled likewise, from bench_serving's total_output_tokens and duration
    ratio: float  # ours / theirs, pooled
    ours_rounds: list[float]  # each round's rate, in round order
    theirs_rounds: list[float]
    order: list[str]  # who ran first in each round: "ours" or "theirs" (mirrored)
    theirs: dict[str, Any]  # bench_serving's kept keys, from its last round
    argv: list[str]
    seconds: float  # both clients, all rounds
    machine_cpu_busy: float | None = None  # whole-machine CPU use while bench_serving ran (mean over its rounds)
    server_cpu: float | None = None  # the server's share of it (the rest: bench_serving and anything else)

    @property
    def rounds(self) -> int:
        return len(self.ours_rounds)

    @property
    def round_ratios(self) -> list[float]:
        """Each round's ours / theirs: their spread says how far one pair alone could be trusted."""
        return [ours / theirs for ours, theirs in zip(self.ours_rounds, self.theirs_rounds)]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rounds": self.rounds, "round_ratios": self.round_ratios}


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
                      round_number: int = 1, timeout_s: float = 1800.0) -> BenchServingRun:
    """Run bench_serving once; its stdout/stderr go to a log file next to its output file."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"bench_serving.c{concurrency}.round{round_number}"
    output_file, log_file = out_dir / f"{stem}.jsonl", out_dir / f"{stem}.log"
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


def round_order(rounds: int) -> list[str]:
    """Who runs first in each round: ours, theirs, theirs, ours, ... (``interleave.round_order``'s mirror)."""
    return [pair[0] for pair in interleave.round_order(rounds, OURS, THEIRS)]


def compare(ours: list[PointMetrics], runs: list[BenchServingRun], num_prompts: int,
            order: list[str] | None = None, seconds: float | None = None) -> CrossCheck:
    """Pool each client's rounds (tokens over time) and put the two output throughputs side by side.
    ``seconds``: the whole cross-check's wall time (None: bench_serving's runs alone)."""
    if not ours or len(ours) != len(runs):
        raise BenchError(f"the cross-check needs one run of each client per round ({len(ours)} ours, "
                         f"{len(runs)} bench_serving)", problem="unpaired_rounds")
    if len({m.concurrency for m in ours}) != 1:
        raise BenchError("our runs for the cross-check must share one concurrency", key="concurrency",
                         problem="mixed_concurrency")
    theirs_rounds = [float(run.result.get("output_throughput") or 0.0) for run in runs]
    ours_rounds = [m.output_tok_per_s for m in ours]
    their_time = sum(float(run.result.get("duration") or 0.0) for run in runs)
    our_time = sum(m.duration_s for m in ours)
    if min(theirs_rounds + ours_rounds) <= 0 or their_time <= 0 or our_time <= 0:
        raise BenchError("a throughput of zero cannot be compared; one of the runs produced no tokens",
                         problem="zero_throughput")
    ours_pooled = sum(m.output_tokens for m in ours) / our_time
    theirs_pooled = sum(float(run.result.get("total_output_tokens") or 0) for run in runs) / their_time
    busy = [run.machine_cpu_busy for run in runs if run.machine_cpu_busy is not None]
    server = [run.server_cpu for run in runs if run.server_cpu is not None]
    return CrossCheck(concurrency=ours[0].concurrency, num_prompts=num_prompts, ours_output_tok_per_s=ours_pooled,
                      theirs_output_tok_per_s=theirs_pooled, ratio=ours_pooled / theirs_pooled,
                      ours_rounds=ours_rounds, theirs_rounds=theirs_rounds,
                      order=order or round_order(len(runs)),
                      theirs={k: runs[-1].result.get(k) for k in KEPT_KEYS}, argv=runs[-1].argv,
                      seconds=seconds if seconds is not None else sum(run.seconds for run in runs),
                      machine_cpu_busy=sum(busy) / len(busy) if busy else None,
                      server_cpu=sum(server) / len(server) if server else None)


def cross_check(concurrency: int, base_url: str, tokenizer_dir: str, config: SweepConfig, out_dir: Path,
                rounds: int = 1, num_prompts: int | None = None) -> CrossCheck:
    """bench_serving and our harness, ``rounds`` times each in mirrored order, at ``concurrency`` on this server.

    ``num_prompts`` (None: the config's count at that concurrency) measured prompts per run; ``tokenizer_dir`` is
    the model directory (bench_serving loads its tokenizer to build the random-ids prompts).
    """
    pairs = interleave.round_order(rounds, OURS, THEIRS)  # refuses rounds < 1
    single = dataclasses.replace(config, concurrency=[concurrency])
    if num_prompts is not None:
        single = dataclasses.replace(single, num_prompts=num_prompts, prompts_per_concurrency=None)
    count = single.prompts_for(concurrency)
    started = time.perf_counter()
    ours: list[PointMetrics] = []
    runs: list[BenchServingRun] = []
    with PointProgress(f"cross-check c={concurrency}", 2 * len(pairs), unit="run") as progress:
        for number, pair in enumerate(pairs, start=1):
            for client in pair:
                what = f"round {number}/{len(pairs)} {'bench_serving' if client == THEIRS else 'our client'}"
                if client == THEIRS:
                    runs.append(run_bench_serving(base_url, tokenizer_dir, single, concurrency, out_dir, number))
                    rate = float(runs[-1].result.get("output_throughput") or 0.0)
                    progress.point(what, f"{rate:.1f} tok/s")
                    continue
                point = run_arm(f"crosscheck_ours_round{number}", base_url, single, out_dir, kind=ARM_KIND_BASELINE,
                                log=lambda line: None).points[0]
                progress.point(what, point_summary(point))
                if not point.measured or point.metrics is None:
                    raise BenchError(f"our cross-check run {number} failed: {point.reason}",
                                     problem="remeasure_failed")
                ours.append(point.metrics)
    return compare(ours, runs, count, [pair[0] for pair in pairs], seconds=time.perf_counter() - started)
