"""The report's list of CPU harness changes is read off the launch environments the servers really get."""

from __future__ import annotations

import re

from eagle3lab.runtime import cpu_harness
from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS, cpu_environment
from eagle3lab.runtime.cpu_harness.changes import BOTH, KIND_START_UP, harness_changes
from eagle3lab.runtime.launch_env import launch_environment
from eagle3lab.runtime.profiles import load_profile


def _envs(**base: str) -> tuple[dict[str, str], dict[str, str]]:
    return (cpu_environment(CONTROL_SHIMS, base=base), cpu_environment(SPEC_SHIMS, base=base, speculative=True))


def test_every_shim_and_variable_of_the_cpu_servers_is_listed_with_the_servers_it_applies_to():
    rows = {row.name: row for row in harness_changes(*_envs())}
    assert set(SPEC_SHIMS) <= set(rows)
    assert {name for name, row in rows.items() if row.servers == BOTH} >= set(CONTROL_SHIMS)
    assert {rows[name].servers for name in set(SPEC_SHIMS) - set(CONTROL_SHIMS)} == {"EAGLE-3 only"}
    assert rows["TRITON_INTERPRET"].servers == "EAGLE-3 only"  # the baseline's forward has no Triton kernel
    assert rows["EAGLE3LAB_FORK_SUBPROCESSES"].kind == KIND_START_UP
    assert rows["TORCHDYNAMO_DISABLE"].servers == BOTH
    obstacles = [row.obstacle for row in harness_changes(*_envs())]
    assert obstacles == sorted(obstacles)


def test_a_variable_the_caller_turned_off_is_not_listed():
    rows = {row.name for row in harness_changes(*_envs(TORCHDYNAMO_DISABLE="0", EAGLE3LAB_FORK_SUBPROCESSES="0"))}
    assert "TORCHDYNAMO_DISABLE" not in rows and "EAGLE3LAB_FORK_SUBPROCESSES" not in rows
    assert "TRITON_INTERPRET" in rows


def test_a_gpu_launch_has_no_harness_change():
    for name in ("gpu-1x", "blackwell-8x"):
        profile = load_profile(name)
        baseline = launch_environment(profile, (), False)
        eagle3 = launch_environment(profile, (), True)
        assert harness_changes(baseline, eagle3) == []


def test_every_listed_obstacle_is_in_the_harness_docstring_list():
    numbered = {int(n) for n in re.findall(r"^(\d+)\.", cpu_harness.__doc__ or "", flags=re.M)}
    numbered |= {n for a, b in re.findall(r"^(\d+)-(\d+)\.", cpu_harness.__doc__ or "", flags=re.M)
                 for n in range(int(a), int(b) + 1)}
    assert {row.obstacle for row in harness_changes(*_envs())} <= numbered
