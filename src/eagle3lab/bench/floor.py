"""The noise floor measured on a live baseline server: concurrency 1 and the sweep's highest, the same prompts.

Why here and not in the benchmark: it must be known first (notebook 01's control server runs it), before the hours
the EAGLE-3 sweep takes, and its prompts must be the ones notebook 03's lossless check compares (the same sweep
configuration: the concurrency-1 point's prompts are the first of every point's).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from eagle3lab.bench.lossless import REQUIRED_CONCURRENCY, NoiseFloor, noise_floor
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, load_requests, run_arm
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError


def floor_workload(config: SweepConfig) -> dict[str, Any]:
    """What the floor's prompts were: notebook 03 uses a floor only for the same workload."""
    return {"prompt_kind": config.prompt_kind, "dataset": Path(config.dataset_path).name if config.dataset_path
            else None, "input_len": config.input_len, "output_len": config.output_len, "seed": config.seed,
            "prompts_at_concurrency_1": config.prompts_for(REQUIRED_CONCURRENCY)}


def measure_noise_floor(base_url: str, config: SweepConfig, out_dir: Path, where: str) -> NoiseFloor:
    """Sweep the baseline at concurrency 1 and the config's highest (greedy, as every sweep), then compare each
    concurrency-1 prompt's output with the same prompt's at the highest."""
    high = max(config.concurrency)
    arm = run_arm("noise-floor", base_url, dataclasses.replace(config, concurrency=[REQUIRED_CONCURRENCY, high]),
                  Path(out_dir), kind=ARM_KIND_BASELINE)
    if len(arm.measured_points()) < 2 or not arm.requests_file:
        raise BenchError(f"the noise floor's sweep did not measure both concurrencies ({arm.status}); see "
                         f"{out_dir}", arm=arm.name, problem="no_measured")
    records = load_requests(Path(out_dir) / arm.requests_file)
    how = (f"the baseline server ({where}) swept at concurrency {REQUIRED_CONCURRENCY} "
           f"({config.prompts_for(REQUIRED_CONCURRENCY)} prompts) and {high} ({config.prompts_for(high)} prompts, "
           f"the first {config.prompts_for(REQUIRED_CONCURRENCY)} the same), greedy, {config.output_len} tokens each")
    return noise_floor(records, high, how=how, workload=floor_workload(config))
