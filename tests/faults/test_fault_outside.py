"""Faults found from outside the suite (issue 21): each one is one clear line and exit 2, nothing lost, nothing
left behind."""

from __future__ import annotations

import pytest
import yaml

from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir
from eagle3lab.runtime.profiles import MAX_BENCH_CONCURRENCY, MAX_BENCH_NUM_PROMPTS, load_profile

from .faultkit import cli, one_line


def cpu_yaml_with(tmp_path, text: str | None = None, **changes):
    """The cpu profile with ``changes`` (or ``text`` verbatim), as ``lab.yaml`` in ``tmp_path``."""
    data = {**yaml.safe_load((params_dir() / "cpu.yaml").read_text()), **changes}
    path = tmp_path / "lab.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(data))
    return path


# ---------------------------------------------------------------------------------------------------------
# (3) a profile name is a plain name; (9) duplicate keys, bounds


@pytest.mark.parametrize("name", ["x/../../../../escaped", "../up", "a\\b", "..", ".hidden", "a..b", ""])
def test_a_profile_name_must_be_a_plain_name(tmp_path, name):
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, name=name))
    assert "key 'name'" in str(err.value)


def test_preflight_with_an_escaping_profile_name_writes_nothing_outside(sandbox, tmp_path):
    profile = cpu_yaml_with(sandbox.work, text=(params_dir() / "cpu.yaml").read_text().replace(
        "name: cpu", 'name: "x/../../escaped"'))
    result = cli(sandbox, "preflight", "--profile", str(profile))
    assert result.returncode == 2
    assert "key 'name': Value error, must be a plain name" in one_line(result.stderr)
    assert not list(tmp_path.rglob("*escaped*")) and not (sandbox.work.parent.parent / "escaped.json").exists()


def test_duplicate_yaml_keys_are_refused_with_line_and_column(tmp_path):
    text = (params_dir() / "cpu.yaml").read_text() + "port: 31000\n"
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, text=text))
    message = str(err.value)
    assert "duplicate key 'port'" in message and f"{tmp_path / 'lab.yaml'}:" in message


@pytest.mark.parametrize("changes, key", [
    ({"bench_concurrency": [MAX_BENCH_CONCURRENCY + 1]}, "bench_concurrency[0]"),
    ({"bench_concurrency": [10000]}, "bench_concurrency[0]"),
    ({"bench_num_prompts": MAX_BENCH_NUM_PROMPTS + 1}, "bench_num_prompts"),
    ({"bench_num_prompts": 1e8}, "bench_num_prompts"),
    ({"bench_num_prompts": "1e8"}, "bench_num_prompts"),
])
def test_benchmark_sizes_are_bounded_integers(tmp_path, changes, key):
    with pytest.raises(ProfileError) as err:
        load_profile(cpu_yaml_with(tmp_path, **changes))
    assert f"key '{key}'" in str(err.value)


def test_a_huge_benchmark_override_fails_at_once_in_one_line(sandbox):
    result = cli(sandbox, "run", "--set", "bench_num_prompts=100000000", "--notebooks", "01")
    assert result.returncode == 2
    assert "override: key 'bench_num_prompts': Input should be less than or equal to" in one_line(result.stderr)
    assert not (sandbox.work / "reports").exists()
