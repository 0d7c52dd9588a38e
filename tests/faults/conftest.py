"""The fault suite's ground rules: every test runs against a faithful copy of the installed sglang 0.5.9 (all its
files and its RECORD; the template and its fingerprint are the session fixtures of ``tests/conftest.py``), made
"the installed sglang" of the processes under test by ``PYTHONPATH``, with a cache of its own; and every test ends
by asserting that nothing is lost or left behind: the package is byte-identical to the release, no backup
manifest, temporary file, process or listening port remains.
"""

from __future__ import annotations

import os
import shutil
import time
import psutil
import pytest

from .faultkit import Sandbox, patience, sandbox_processes


@pytest.fixture
def sandbox(sglang_template, release_hashes, tmp_path, monkeypatch) -> Sandbox:
    root = tmp_path / "site-packages"
    shutil.copytree(sglang_template, root, copy_function=os.link)  # hardlinks: every project write is a rename
    box = Sandbox(root, tmp_path / "cache", tmp_path / "work", release_hashes)
    box.work.mkdir()
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(box.cache))
    return box


@pytest.fixture
def no_leftover_processes(sandbox):
    """Every process started for this test is gone when it ends, even one whose parent died (zombies hold
    nothing and are ignored)."""
    yield
    deadline = time.monotonic() + patience(15)
    while True:
        left = sandbox_processes(sandbox)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    names = [(p.pid, _name(p)) for p in left]
    for proc in left:
        proc.kill()
    assert names == [], "processes outlived the test"


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline()[:4])
    except psutil.Error:
        return "?"


