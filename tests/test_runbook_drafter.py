"""`make run` trains a missing drafter beside notebooks 01-02 (which do not serve it): the child is real, notebook
03 waits for it, a failed child leaves the training to notebook 03 and the child never outlives the run."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from eagle3lab import runbook
from eagle3lab.runtime.profiles import load_profile

NOTEBOOKS = ["01_crash_repro", "02_interface_trace", "03_patch_and_bench"]


@pytest.fixture
def not_cached(monkeypatch, tmp_path):
    """The drafter cache state is a stand-in (training the real drafter takes minutes); the child is real."""
    monkeypatch.setattr(runbook, "trained_drafter_cached", lambda profile: False)
    monkeypatch.setenv("EAGLE3LAB_REPORTS_DIR", str(tmp_path / "reports"))
    return tmp_path


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_notebook_03_waits_for_the_drafter_trained_beside_01_and_02(not_cached, capsys):
    done = not_cached / "done"
    with runbook.drafter_in_background(load_profile("cpu"), "cpu", None, NOTEBOOKS,
                                       child(f"import time, pathlib; time.sleep(1); pathlib.Path({str(done)!r})"
                                             ".write_text('x')")) as ready:
        assert "training it in the background while 01_crash_repro, 02_interface_trace run" in capsys.readouterr().out
        ready()
        assert done.is_file()  # ready() returned only after the child finished
    assert "the background build is done" in capsys.readouterr().out


def test_a_failed_background_build_leaves_the_training_to_notebook_03(not_cached, capsys):
    with runbook.drafter_in_background(load_profile("cpu"), "cpu", None, NOTEBOOKS,
                                       child("import sys; print('boom'); sys.exit(3)")) as ready:
        ready()
    out = capsys.readouterr().out
    assert "failed (exit code 3" in out and "03_patch_and_bench trains it itself" in out
    assert "boom" in (not_cached / "reports" / "drafter-build.cpu.log").read_text()


def test_the_child_does_not_outlive_a_run_that_fails_before_notebook_03(not_cached):
    pid_file = not_cached / "pid"
    code = f"import os, pathlib, time; pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(600)"
    with pytest.raises(RuntimeError, match="notebook 01 failed"):
        with runbook.drafter_in_background(load_profile("cpu"), "cpu", None, NOTEBOOKS, child(code)):
            for _ in range(600):  # until the child is up (it writes its pid first)
                if pid_file.is_file() and pid_file.read_text():
                    break
                time.sleep(0.1)
            raise RuntimeError("notebook 01 failed")
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("case", ["03 runs first", "03 not run", "a GPU profile", "already cached"])
def test_no_background_build_when_nothing_runs_before_03_or_no_drafter_is_needed(not_cached, monkeypatch, case):
    names = {"03 runs first": NOTEBOOKS[2:], "03 not run": NOTEBOOKS[:2]}.get(case, NOTEBOOKS)
    profile = load_profile("blackwell-8x" if case == "a GPU profile" else "cpu")
    if case == "already cached":
        monkeypatch.setattr(runbook, "trained_drafter_cached", lambda profile: True)
    marker = not_cached / "started"
    start = child(f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')")
    with runbook.drafter_in_background(profile, profile.name, None, names, start) as ready:
        ready()
    assert not marker.exists()


def test_the_background_build_is_setup_for_the_same_profile_and_overrides():
    argv = runbook.drafter_build_command("cpu", {"overrides": {"model_num_layers": 6, "bench_concurrency": [1, 2]}})
    assert argv[1:6] == ["-m", "eagle3lab", "setup", "--profile", "cpu"]
    assert "--set=model_num_layers=6" in argv and "--set=bench_concurrency=[1, 2]" in argv


def test_setup_skip_drafter_on_an_empty_cache_builds_everything_but_the_drafter_and_says_so(tmp_path):
    cache = tmp_path / "cache"  # a fresh machine's: nothing built yet
    env = {**os.environ, "EAGLE3LAB_CACHE": str(cache)}
    result = subprocess.run([sys.executable, "-m", "eagle3lab", "setup", "--profile", "cpu", "--skip-drafter"],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr[-1000:]
    first = result.stdout.splitlines()[0]
    assert f"the eagle3lab cache {cache} is empty" in first and "building the tiny models," in first
    assert "drafter" not in first.split(str(cache), 1)[1]  # it is not trained here: the line does not promise it
    assert "not built here (--skip-drafter)" in result.stdout and "offline acceptance" not in result.stdout
    assert any((cache / "models").iterdir()) and not any((cache / "drafters").glob("*"))
