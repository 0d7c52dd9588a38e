"""Stale state is found and repaired: a backup left by a killed patcher, or a package that matches no known
state, stops every run and patch command with one line naming the file and ``patch restore``; that command brings
the package back from the backup, or from the release wheel when the backup is gone."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

import pytest

from eagle3lab.atomic import write_text_atomic
from eagle3lab.package.release import sha256_file

from .faultkit import (
    FULL,
    KIMI,
    ONE,
    USER_CACHE,
    cli,
    command_lines,
    default_signals,
    one_line,
    patience,
    relaunch_notebook,
    sandbox_processes,
    start_cli,
    wait_for,
)

RESTORE = "run python -m eagle3lab patch restore"
HOLD_SCRIPT = """
import sys, time
from pathlib import Path
from eagle3lab.package import patching
with patching.patched(sys.argv[1]):
    Path(sys.argv[2]).write_text("applied")
    time.sleep(600)
"""


def kill_a_patcher(box, tmp_path, patch: str = FULL) -> None:
    """A helper process holding ``patch`` dies by SIGKILL: nothing of it can run, the backup stays."""
    flag = tmp_path / "applied"
    helper = subprocess.Popen([sys.executable, "-c", HOLD_SCRIPT, patch, str(flag)], env=box.env(), preexec_fn=default_signals)
    wait_for(lambda: flag.exists() or helper.poll() is not None, what="the patch")
    helper.send_signal(signal.SIGKILL)
    helper.wait(timeout=patience(30))
    assert sha256_file(box.kimi) != box.release[KIMI] and len(box.manifests()) == 1


@pytest.mark.parametrize("command", [
    ("patch", "check", FULL), ("patch", "apply", ONE), ("patch", "verify", FULL), ("patch", "revert", FULL),
    ("run", "--notebooks", "01"), ("report", "--notebooks", "01"),
])
def test_stale_backup_stops_run_and_patch_commands(sandbox, no_leftover_processes, tmp_path, command):
    kill_a_patcher(sandbox, tmp_path)
    result = cli(sandbox, *command)
    assert result.returncode == 2
    line = one_line(result.stderr)
    manifest = sandbox.manifests()[0]
    assert f"its backup manifest {manifest} was left by pid" in line and "which is gone" in line
    assert line.endswith(RESTORE) and "sglang version" not in line
    restored = cli(sandbox, "patch", "restore")
    assert restored.returncode == 0, restored.stderr
    assert f"matches its release again: 1 file(s) from the backup of {FULL}" in restored.stdout
    sandbox.assert_nothing_left()


def test_patch_applied_on_purpose_blocks_runs_until_restored(sandbox, no_leftover_processes):
    assert cli(sandbox, "patch", "apply", FULL).returncode == 0
    refused = cli(sandbox, "run", "--notebooks", "01")
    assert refused.returncode == 2
    line = one_line(refused.stderr)
    assert f"running the notebooks needs the sglang release, but {sandbox.root} carries patch {FULL}" in line
    assert "(applied with `patch apply`" in line and line.endswith(RESTORE)
    assert cli(sandbox, "patch", "verify", FULL).returncode == 0  # a patch applied on purpose is a known state
    assert cli(sandbox, "patch", "restore").returncode == 0
    sandbox.assert_nothing_left()


def test_restore_on_the_release_changes_nothing(sandbox):
    result = cli(sandbox, "patch", "restore")
    assert result.returncode == 0 and result.stdout.strip().endswith("is the release already; nothing to restore")
    sandbox.assert_nothing_left()


@pytest.fixture
def seeded_wheel(sandbox):
    """Put the release wheel into the sandbox's cache, from the user's cache (fetched there once if missing)."""
    from eagle3lab.package.wheels import fetch_wheel

    with pytest.MonkeyPatch.context() as patch:
        if USER_CACHE:
            patch.setenv("EAGLE3LAB_CACHE", USER_CACHE)
        else:
            patch.delenv("EAGLE3LAB_CACHE", raising=False)
        wheel = fetch_wheel("0.5.9")
    target = sandbox.cache / "wheels" / wheel.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(wheel, target)
    return target


@pytest.mark.network
def test_package_that_matches_no_known_state_is_refused_then_restored_from_the_wheel(sandbox, seeded_wheel):
    write_text_atomic(sandbox.kimi, sandbox.kimi.read_text() + "\n# edited by hand\n", mode=None)
    for command in (("patch", "apply", FULL), ("patch", "check", FULL), ("run", "--notebooks", "01")):
        result = cli(sandbox, *command)
        assert result.returncode == 2
        line = one_line(result.stderr)
        assert f"{sandbox.kimi} differs from the sglang 0.5.9 release and no eagle3lab backup explains it" in line
        assert "run python -m eagle3lab patch restore (it takes the file from the release wheel)" in line
    restored = cli(sandbox, "patch", "restore")
    assert restored.returncode == 0 and "1 file(s) from the release wheel" in restored.stdout
    sandbox.assert_nothing_left()


@pytest.mark.network
def test_lost_backup_is_restored_from_the_wheel(sandbox, seeded_wheel, tmp_path):
    """A patch applied with one cache, inspected with another (or the cache wiped): no backup explains it."""
    assert cli(sandbox, "patch", "apply", FULL).returncode == 0
    other_cache = tmp_path / "other-cache"
    shutil.copytree(sandbox.cache / "wheels", other_cache / "wheels")
    check = cli(sandbox, "patch", "check", FULL, EAGLE3LAB_CACHE=str(other_cache))
    assert check.returncode == 2 and "no eagle3lab backup explains it" in one_line(check.stderr)
    restored = cli(sandbox, "patch", "restore", EAGLE3LAB_CACHE=str(other_cache))
    assert restored.returncode == 0 and "1 file(s) from the release wheel" in restored.stdout
    sandbox.assert_release()
    # The first cache still holds the backup of a patch that is no longer in: its restore just drops it.
    assert cli(sandbox, "patch", "restore").returncode == 0
    sandbox.assert_nothing_left()


@pytest.mark.server
@pytest.mark.notebook
def test_sigkill_of_a_real_patched_run_is_found_and_restored(sandbox, no_leftover_processes, tmp_path,
                                                               tiny_models):
    """The issue's case: a run killed by SIGKILL while the relaunch chain has the one-method patch applied and
    its EAGLE-3 server starting. Nothing can clean up; the next commands find it, ``patch restore`` repairs it."""
    from eagle3lab.runtime.server import check_port_free, free_port

    port = free_port()
    notebook = relaunch_notebook(tmp_path / "chain.ipynb", tiny_models, tmp_path / "logs", port)
    run = start_cli(sandbox, "run", "--notebooks", str(notebook))

    def server_started() -> bool:
        return any("sglang.launch_server" in line for line in command_lines(run.pid))

    wait_for(lambda: server_started() or run.poll() is not None, what="the patched EAGLE-3 launch")
    assert run.poll() is None and sha256_file(sandbox.kimi) != sandbox.release[KIMI]
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=patience(30))
    wait_for(lambda: not sandbox_processes(sandbox), timeout=60, what="the orphaned kernel and server to die")

    manifest = sandbox.manifests()[0]
    holder = json.loads(manifest.read_text())["holder"]
    assert "ipykernel" in holder["command"]  # the kernel held the patch
    for command in (("run", "--notebooks", "01"), ("patch", "check", ONE)):
        result = cli(sandbox, *command)
        assert result.returncode == 2
        line = one_line(result.stderr)
        assert f"may still carry patch {ONE}: its backup manifest {manifest}" in line and line.endswith(RESTORE)
    restored = cli(sandbox, "patch", "restore")
    assert restored.returncode == 0 and f"1 file(s) from the backup of {ONE}" in restored.stdout
    sandbox.assert_nothing_left()
    check_port_free("127.0.0.1", port)
