"""Commands that meet a running job say so (issue 43, item 4): preflight names the process holding sglang's files,
its patch and locks, instead of reporting the patched file as drift; with nobody holding it, drift is drift."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import eagle3lab

from .faultkit import FULL, KIMI, cli, default_signals, patience

# check_sglang in a child, so the sandbox's sglang copy (PYTHONPATH) is the installed one; the same function
# `python -m eagle3lab preflight` runs for every profile but cpu.
CHECK = ("import json; from eagle3lab.preflight import check_sglang; from eagle3lab.runtime.profiles import "
         "load_profile\nc = check_sglang(load_profile('blackwell-8x'))\nprint(json.dumps({**c.row(), **c.data}))")


def env(sandbox) -> dict[str, str]:
    """The sandbox's environment, importing this eagle3lab (a worktree's, not the one the venv was built from)."""
    return sandbox.env(PYTHONPATH=os.pathsep.join([str(sandbox.root), str(Path(eagle3lab.__file__).parents[1])]))


def sglang_check(sandbox) -> dict:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env(sandbox),
                          cwd=sandbox.work, timeout=patience(120))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def hold(sandbox, body: str) -> subprocess.Popen:
    """A child holding what ``body`` (a ``with`` header) takes, until it is signalled."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from eagle3lab import runguard; from eagle3lab.package import patching\n"
                               f"{body}\n    print('held', flush=True); time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True, env=env(sandbox), cwd=sandbox.work, preexec_fn=default_signals)
    assert holder.stdout.readline().strip() == "held"
    return holder


def end(holder: subprocess.Popen) -> None:
    holder.send_signal(signal.SIGTERM)  # patching.patched reverts on SIGTERM, like a run stopped by its user
    holder.wait(timeout=patience(30))


def test_preflight_names_the_run_holding_a_patch_instead_of_drift(sandbox, no_leftover_processes):
    holder = hold(sandbox, f"with runguard.run_lock('test'), patching.patched('{FULL}'):")
    try:
        check = sglang_check(sandbox)
        assert check["outcome"] == "warn"  # it goes back when the job ends; a run waits for the lock
        detail = check["detail"]
        assert "is in use by a running job" in detail and "differs from its release" not in detail, detail
        assert f"pid {holder.pid} (" in detail and f"holds patch {FULL} on kimi_k25.py and the sglang patch lock" \
            in detail, detail
        assert f"this checkout's run lock is held by pid {holder.pid}" in detail, detail
        assert check["fix"].startswith(f"wait for pid {holder.pid} (") and "pip install" not in check["fix"]
    finally:
        end(holder)
    after = sglang_check(sandbox)  # the job put the release back: nothing to name, nothing drifted
    assert after["outcome"] == "ok" and "in_use" not in after, after
    sandbox.assert_nothing_left()


def test_a_held_patch_lock_is_named_and_drift_without_a_holder_stays_drift(sandbox, no_leftover_processes):
    kimi = sandbox.root / KIMI
    changed = kimi.with_name("kimi_k25.py.edit")
    changed.write_text(kimi.read_text() + "\n# hand edit\n")
    os.replace(changed, kimi)  # a new file: the sandbox's hard links to the template stay untouched
    holder = hold(sandbox, "with patching.held():")
    try:
        check = sglang_check(sandbox)
        detail = check["detail"]
        assert check["outcome"] == "warn" and "is in use by a running job" in detail, detail
        assert f"pid {holder.pid} (" in detail and "holds the sglang patch lock" in detail, detail
        assert ("1 file differs from the release beyond the patches named here (first: "
                "sglang/srt/models/kimi_k25.py)") in detail, detail
        assert "run lock" not in detail  # no run holds this checkout
    finally:
        end(holder)
    check = sglang_check(sandbox)
    assert check["outcome"] == "fail" and "in_use" not in check
    assert check["detail"].startswith("sglang 0.5.9 differs from its release in 1 file"), check["detail"]
    assert cli(sandbox, "patch", "restore").returncode == 0
    sandbox.assert_nothing_left()


def test_this_process_is_never_named_and_free_locks_name_nobody(sandbox):
    from eagle3lab import runguard
    from eagle3lab.package import backups, inuse

    assert backups.lock_holder(sandbox.root) is None and runguard.run_lock_holder() is None
    with runguard.run_lock("test"), backups.package_lock(sandbox.root):
        assert backups.lock_holder(sandbox.root) is None and runguard.run_lock_holder() is None
        assert not inuse.in_use(sandbox.root)
    runguard.run_lock_path().write_text(json.dumps({"pid": 2 ** 22 + 12345, "command": "killed run"}))
    assert runguard.run_lock_holder() is None  # a file left by a killed run names a dead pid


def test_run_and_report_meeting_a_held_patch_name_its_holder(sandbox, no_leftover_processes):
    """Another checkout's job (its own run lock, so only sglang's files are shared) holds a patch: run and report
    wait on the patch lock naming the holder, and give up in one line naming it again."""
    holder = hold(sandbox, f"with patching.patched('{FULL}'):")
    try:
        for args in (("run", "--notebooks", "01"), ("report",)):
            done = subprocess.run([sys.executable, "-m", "eagle3lab", *args], capture_output=True, text=True,
                                  env={**env(sandbox), "EAGLE3LAB_LOCK_TIMEOUT_S": "2"}, cwd=sandbox.work,
                                  timeout=patience(300))
            assert done.returncode == 2, done.stderr[-2000:]
            waited = [x for x in done.stderr.splitlines() if x.startswith("eagle3lab: waiting for")]
            assert waited and all(f"waiting for pid {holder.pid} (" in x for x in waited), done.stderr[-2000:]
            assert f"still held after 2 s by pid {holder.pid} (" in done.stderr.splitlines()[-1], done.stderr[-2000:]
        assert not list((sandbox.work / "reports").glob("*.ipynb"))
    finally:
        end(holder)
    sandbox.assert_nothing_left()
