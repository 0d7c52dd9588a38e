"""The CLI turns every eagle3lab error into one line on stderr and exit status 2."""

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "eagle3lab", *args], capture_output=True, text=True, timeout=120)


def test_unknown_profile_is_one_line():
    result = run_cli("setup", "--profile", "no-such-profile")
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "profile 'no-such-profile' not found" in result.stderr and "Traceback" not in result.stderr


def test_bad_override_is_one_line():
    result = run_cli("setup", "--set", "port=not-a-port")
    assert result.returncode == 2 and "override: key 'port'" in result.stderr


def test_override_without_equals_is_one_line():
    result = run_cli("run", "--set", "port")
    assert result.returncode == 2 and "--set expects key=value" in result.stderr


def test_unknown_notebook_is_one_line():
    result = run_cli("run", "--notebooks", "99")
    assert result.returncode == 2 and "notebook '99' not found" in result.stderr
