"""Measured requests per point scale with concurrency on GPU profiles: max(floor, k x c)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3lab.bench.crosscheck import bench_serving_argv
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.errors import BenchError
from eagle3lab.runtime.profiles import load_profile


def test_gpu_profiles_send_max_32_4c_prompts_per_point():
    config = SweepConfig.from_profile(load_profile("blackwell-8x"))
    assert [config.prompts_for(c) for c in config.concurrency] == [max(32, 4 * c) for c in config.concurrency]
    assert config.prompts_for(1) == 32 and config.prompts_for(128) == 512


def test_the_cpu_profile_keeps_one_count_for_every_point():
    config = SweepConfig.from_profile(load_profile("cpu"))
    assert {config.prompts_for(c) for c in config.concurrency} == {config.num_prompts}


def test_bench_serving_gets_the_same_count_at_its_concurrency():
    config = SweepConfig.from_profile(load_profile("gpu-1x"))
    argv = bench_serving_argv("http://127.0.0.1:1", "/m", config, 16, Path("/o.json"))
    assert argv[argv.index("--num-prompts") + 1] == str(config.prompts_for(16)) == "64"


def test_a_non_positive_multiplier_is_one_line():
    with pytest.raises(BenchError, match="prompts_per_concurrency must be >= 1"):
        SweepConfig([1], 8, 8, 4, prompts_per_concurrency=0)
