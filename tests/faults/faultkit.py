"""Helpers of the fault suite: the sandboxed sglang copy, the CLI under test, one-line checks, namespaces."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from eagle3lab.package.release import drift, package_hashes
from timing import PATIENCE_ENV, patience  # noqa: F401 - the suite's one timing setting, re-exported

KIMI = "sglang/srt/models/kimi_k25.py"
FULL = "kimi_k25-eagle3-delegation"
ONE = "kimi_k25-one-method"
USER_CACHE = os.environ.get("EAGLE3LAB_CACHE")  # the user's cache, before a test points it at its sandbox


def default_signals() -> None:
    """preexec_fn for every child a test starts: SIGINT, SIGTERM and SIGHUP at their defaults, unblocked.

    Why: under ``nohup`` (or a CI runner that ignores SIGHUP) the test runner's ignored SIGHUP is inherited by
    every child, and a child rightly keeps an ignored signal ignored, so a test sending SIGHUP would wait forever.
    A user's shell starts a command with these signals at their defaults; the tests do the same.
    """
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


@dataclass
class Sandbox:
    """A copy of sglang posing as the installed one, a private cache and the environment that wires them."""

    root: Path  # site-packages-like folder holding sglang/ and its dist-info
    cache: Path
    work: Path  # artifacts/, reports/, figures/ and REPORT.md of the commands under test
    release: dict[str, str]  # sha256 of every package file, from the template

    def env(self, **extra: str) -> dict[str, str]:
        # the sandbox's sglang first; an inherited PYTHONPATH after it (a worktree's src/ tests its own eagle3lab,
        # not the one the shared venv has installed)
        path = os.pathsep.join([str(self.root), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
        env = {**os.environ, "PYTHONPATH": path, "EAGLE3LAB_CACHE": str(self.cache),
               "EAGLE3LAB_ARTIFACTS_DIR": str(self.work / "artifacts"),
               "EAGLE3LAB_REPORTS_DIR": str(self.work / "reports"),
               "EAGLE3LAB_FIGURES_DIR": str(self.work / "figures"),
               "EAGLE3LAB_REPORT_MD": str(self.work / "REPORT.md"), "PYTHONUNBUFFERED": "1"}
        env.pop("CI", None)
        return {**env, **extra}

    @property
    def kimi(self) -> Path:
        return self.root / KIMI

    def manifests(self) -> list[Path]:
        return sorted(self.cache.rglob("manifest.json"))

    def assert_release(self) -> None:
        """Byte-identical to the release: every file of RECORD, no extra file, no temporary file."""
        now = package_hashes(self.root)
        assert now == self.release, {k: "changed" for k in set(now) ^ set(self.release)} or \
            [k for k in now if now[k] != self.release[k]]
        assert drift(self.root).clean

    def assert_nothing_left(self) -> None:
        self.assert_release()
        assert self.manifests() == [], "a backup manifest was left behind"
        assert not list(self.root.rglob("*.eagle3lab-tmp")) and not list(self.cache.rglob("*.eagle3lab-tmp"))


def cli(box: Sandbox, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """``python -m eagle3lab ...`` against the sandbox (``timeout`` scaled by ``patience``)."""
    return subprocess.run([sys.executable, "-m", "eagle3lab", *args], capture_output=True, text=True,
                          timeout=patience(timeout), env=box.env(**env), cwd=box.work,
                          preexec_fn=default_signals)


def start_cli(box: Sandbox, *args: str, **env: str) -> subprocess.Popen:
    """The CLI in the background, as a user's shell runs it: SIGINT, SIGTERM and SIGHUP at their defaults (a
    background job of a script inherits SIGINT ignored, ``nohup`` SIGHUP), stdout and stderr captured."""
    return subprocess.Popen([sys.executable, "-m", "eagle3lab", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=box.env(**env), cwd=box.work,
                            preexec_fn=default_signals)


def one_line(stderr: str) -> str:
    """The last line the CLI printed, asserted to be its only ``eagle3lab:`` line and no traceback."""
    lines = [line for line in stderr.splitlines() if line.startswith("eagle3lab:")]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def wait_for(predicate, timeout: float = 300, what: str = "condition") -> None:
    """Poll ``predicate`` until true, for at most ``patience(timeout)`` seconds."""
    deadline = time.monotonic() + patience(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def namespace_available() -> bool:
    """Can this machine give a child process its own mount namespace (for real full disks, read-only dirs)?"""
    if shutil.which("unshare") is None:
        return False
    args = ["unshare", "-m", "true"] if os.geteuid() == 0 else ["unshare", "-Urm", "true"]
    return subprocess.run(args, capture_output=True).returncode == 0


def in_namespace(script: str, argv: list[str]) -> list[str]:
    """``argv`` run after ``script`` (shell mount commands) in a private mount namespace: nothing leaks out."""
    prefix = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-Urm"]
    return [*prefix, "sh", "-c", f"set -e; {script}; exec \"$@\"", "sh", *argv]


needs_namespace = pytest.mark.skipif(not namespace_available(), reason="no private mount namespace here (unshare)")


def sandbox_processes(box: Sandbox) -> list[psutil.Process]:
    """Live processes started for this sandbox, found by the cache they inherited, orphans included."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get("EAGLE3LAB_CACHE") == str(box.cache) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            pass
    return found


def command_lines(pid: int) -> list[str]:
    """Command lines of a process's live descendants (the ones that vanish meanwhile are skipped)."""
    lines = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return lines
    for child in children:
        try:
            lines.append(" ".join(child.cmdline()))
        except psutil.Error:
            pass
    return lines



def make_notebook(path: Path, *cells: str) -> Path:
    """A notebook on the project's kernel with these code cells."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "eagle3lab", "display_name": "eagle3lab", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(textwrap.dedent(cell).strip()) for cell in cells]
    nbformat.write(notebook, path)
    return path


def relaunch_notebook(path: Path, models, logs: Path, port: int) -> Path:
    """Notebook 03's relaunch step with the one-method patch: the real EAGLE-3 server on a patched sglang."""
    return make_notebook(path, f"""
        from eagle3lab.fix import relaunch
        from eagle3lab.runtime.cpu_harness import SPEC_SHIMS
        from eagle3lab.runtime.deployment import Models
        from eagle3lab.runtime.profiles import load_profile
        step = relaunch.ChainStep("one-method patch", (relaunch.ONE_METHOD_PATCH,))
        relaunch.run_step(step, load_profile("cpu"), Models({str(models.target)!r}, {str(models.draft)!r}),
                          {str(logs)!r}, SPEC_SHIMS, port={port})
    """)
