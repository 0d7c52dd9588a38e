"""Faults found from outside the suite (issue 21): each one is one clear line and exit 2, nothing lost, nothing
left behind."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
import yaml

from eagle3lab.errors import ProfileError
from eagle3lab.paths import params_dir
from eagle3lab.runtime.profiles import MAX_BENCH_CONCURRENCY, MAX_BENCH_NUM_PROMPTS, load_profile

from .faultkit import cli, default_signals, one_line, patience


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


# ---------------------------------------------------------------------------------------------------------
# (10) the patch lock wait ends, and names the holder


@pytest.mark.parametrize("command", [("patch", "check", "kimi_k25-one-method"), ("patch", "restore"), ("patch", "apply", "kimi_k25-one-method")])
def test_a_stopped_lock_holder_is_named_and_the_wait_ends(sandbox, no_leftover_processes, command):
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time; from eagle3lab.package import patching\n"
         "with patching.held():\n    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=sandbox.env(), preexec_fn=default_signals)
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.send_signal(signal.SIGSTOP)  # hung: holds the lock, never releases it
        result = cli(sandbox, *command, EAGLE3LAB_LOCK_TIMEOUT_S="2")
        assert result.returncode == 2 and "Traceback" not in result.stderr
        *waited, line = [x for x in result.stderr.splitlines() if x.startswith("eagle3lab:")]
        assert all(f"eagle3lab: waiting for pid {holder.pid} (" in x for x in waited)  # if said, names the holder
        assert f"still held after 2 s by pid {holder.pid}" in line and "stopped" in line, line
    finally:
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.wait(timeout=patience(30))
    sandbox.assert_nothing_left()
