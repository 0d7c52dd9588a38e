"""The fault suite's ground rules: every test runs against a faithful copy of the installed sglang 0.5.9 (all its
files and its RECORD), made "the installed sglang" of the processes under test by ``PYTHONPATH``, with a cache of
its own; and every test ends by asserting that nothing is lost or left behind: the package is byte-identical to
the release, no backup manifest, temporary file, process or listening port remains.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import psutil
import pytest

from eagle3lab.package.location import installed_root
from eagle3lab.package.release import drift, package_hashes, release_record

from .faultkit import Sandbox, patience, sandbox_processes


@pytest.fixture(scope="session")
def release_hashes(sglang_template) -> dict[str, str]:
    """The release's fingerprint, taken once, before any test touched anything."""
    return package_hashes(sglang_template)


@pytest.fixture(scope="session")
def sglang_template(tmp_path_factory) -> Path:
    """One pristine copy of the installed sglang package and its dist-info (byte caches left out)."""
    installed = installed_root()
    record = release_record(installed)
    if record is None:
        pytest.skip("the installed sglang has no RECORD to compare with")
    root = tmp_path_factory.mktemp("sglang-template")
    shutil.copytree(installed / "sglang", root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    dist = next(installed.glob("sglang-*.dist-info"))
    shutil.copytree(dist, root / dist.name)
    assert drift(root).clean, "the installed sglang itself differs from its release; reinstall it first"
    return root


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


