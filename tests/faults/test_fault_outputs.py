"""Atomic outputs: REPORT.md, HTML, figures, sidecars and executed notebooks are never replaced by a worse
version. ``report --no-run`` refuses, in one line and before writing anything, when an executed notebook or a
sidecar is missing, unreadable or older than its run; a failed run keeps the last good executed notebook; a full
disk is named with its path."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eagle3lab import sidecars
from eagle3lab.atomic import write_text_atomic
from eagle3lab.errors import OutputWriteError

from .faultkit import (
    cli,
    default_signals,
    in_namespace,
    make_notebook,
    needs_namespace,
    one_line,
    patience,
)

GOOD_REPORT = "# REPORT\n\nthe committed, good report\n" * 200


def fingerprint(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under a folder with its mtime and bytes: what 'nothing was rewritten' means."""
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


def executed_notebook(path: Path, started: dt.datetime, exception: bool = False) -> None:
    """An executed notebook as papermill leaves it: its run's start time in the papermill metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {
        "papermill": {"start_time": started.isoformat(), "exception": exception}}}))


@pytest.fixture
def report_inputs(sandbox, monkeypatch):
    """Executed notebook 01 of a run that started a minute ago, and the (schema-valid) sidecar that run wrote."""
    from eagle3lab import sidecars

    work = sandbox.work
    started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)
    executed_notebook(work / "reports" / "01_crash_repro.cpu.ipynb", started)
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(work / "artifacts"))
    log = str(work / "artifacts" / "logs" / "01.log")
    sidecar = sidecars.write(sidecars.CrashReproSidecar(
        profile="cpu", profile_values={}, models={"target": "t", "draft": "d"},
        crash={"status": "died", "seconds_to_outcome": 1.0, "peak_rss_bytes": 1 << 30, "log": log},
        control={"seconds_to_ready": 1.0, "peak_rss_bytes": 1 << 30, "generate_seconds": 1.0, "completion_tokens": 1,
                 "completion": "x", "log": log}))
    (work / "REPORT.md").write_text(GOOD_REPORT)
    return work, sidecar


def refused(sandbox, *args: str) -> str:
    before = fingerprint(sandbox.work)
    result = cli(sandbox, "report", "--no-run", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert fingerprint(sandbox.work) == before, "a refused report rewrote something"
    return one_line(result.stderr)


def test_report_no_run_on_a_fresh_clone_refuses_and_keeps_report_md(sandbox):
    (sandbox.work / "REPORT.md").write_text(GOOD_REPORT)
    line = refused(sandbox)
    assert "there is no executed notebook" in line and "01_crash_repro.cpu.ipynb to report from" in line
    assert "(without --no-run)" in line
    assert (sandbox.work / "REPORT.md").read_text() == GOOD_REPORT


@pytest.mark.parametrize("damage, expected", [
    ("truncate", "column 3: Unterminated string starting at; cut short?)"),
    ("delete", "is missing; rerun it: python -m eagle3lab report --profile cpu --notebooks 01"),
    ("age", "is older than the run of"),
    ("garbage", "is unreadable (line 1 column 1: Expecting value"),
    ("old-schema", "has schema version 1, this eagle3lab reads"),
    ("other-profile", "was written for profile 'gpu', not for 'cpu' (the profile asked for); rerun it"),
    ("hand-edit", "was changed after the run wrote it"),
])
def test_report_no_run_refuses_a_bad_sidecar_before_writing_anything(sandbox, report_inputs, damage, expected):
    work, sidecar = report_inputs
    if damage == "truncate":
        sidecar.write_text(sidecar.read_text()[:30])
    elif damage == "delete":
        sidecar.unlink()
    elif damage == "age":
        old = (dt.datetime.now() - dt.timedelta(hours=2)).timestamp()
        os.utime(sidecar, (old, old))
    elif damage == "garbage":
        sidecar.write_bytes(b"\x00\x01 not json")
    elif damage == "other-profile":  # issue 43, item 5 (7): the gpu run's own sidecar, copied over the cpu one
        cpu = sidecars.read(sidecars.CrashReproSidecar, "cpu")
        shutil.copy(sidecars.write(cpu.model_copy(update={"profile": "gpu"})), sidecar)
    elif damage == "hand-edit":  # issue 43, item 5 (7): one number typed over, the file still valid
        assert '"seconds_to_outcome": 1.0' in sidecar.read_text()
        sidecar.write_text(sidecar.read_text().replace('"seconds_to_outcome": 1.0', '"seconds_to_outcome": 0.4'))
    else:
        current = f'"schema_version": {sidecars.SCHEMA_VERSION}'
        sidecar.write_text(sidecar.read_text().replace(current, '"schema_version": 1'))
    line = refused(sandbox, "--notebooks", "01")
    assert str(sidecar) in line and expected in line


def test_report_no_run_refuses_a_failed_executed_notebook(sandbox, report_inputs):
    work, _ = report_inputs
    executed_notebook(work / "reports" / "01_crash_repro.cpu.ipynb", dt.datetime.now(dt.timezone.utc), exception=True)
    assert "records a failed run" in refused(sandbox, "--notebooks", "01")


def test_report_no_run_checks_the_sidecars_of_other_notebooks_too(sandbox, report_inputs):
    """The report reads every sidecar there is; a damaged one of a notebook not asked for is refused as well."""
    work, _ = report_inputs
    trace = work / "artifacts" / "02_interface_trace.cpu.json"
    trace.write_text('{"verdict": {"sglang_version": "0.5')
    assert f"sidecar of 02_interface_trace {trace} is unreadable" in refused(sandbox, "--notebooks", "01")


@needs_namespace
def test_report_md_on_a_full_disk_keeps_the_good_one(sandbox, tmp_path):
    """A real full file system: the new REPORT.md cannot be written, so the old one stays, whole."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from eagle3lab.atomic import write_text_atomic
        from eagle3lab.errors import OutputWriteError
        target = Path({str(disk / 'REPORT.md')!r})
        target.write_text({GOOD_REPORT!r})
        Path({str(disk / 'filler')!r}).write_bytes(b"x" * (200_000 - len({GOOD_REPORT!r}) - 8192))
        try:
            write_text_atomic(target, "# a new, longer report\\n" * 20000)
        except OutputWriteError as err:
            print(err)
        print(target.read_text() == {GOOD_REPORT!r}, sorted(p.name for p in target.parent.iterdir()))
    """)
    result = subprocess.run(in_namespace(f"mount -t tmpfs -o size=200k tmpfs {disk}", [sys.executable, "-c", script]),
                            capture_output=True, text=True, env=sandbox.env(), timeout=patience(60), preexec_fn=default_signals)
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 0, result.stderr
    assert lines[0] == f"no space left on the device while writing {disk / 'REPORT.md'}; free some space and rerun " \
                       "(nothing was replaced)"
    assert lines[1] == "True ['REPORT.md', 'filler']"  # the good report, whole, and no temporary file


def test_sidecars_and_reports_are_world_readable(sandbox, tmp_path, monkeypatch):
    from eagle3lab import sidecars

    class Probe(sidecars.Sidecar):
        NOTEBOOK = "00_probe"

    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path / "artifacts"))
    path = sidecars.write(Probe(profile="cpu"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(write_text_atomic(tmp_path / "REPORT.md", "x").stat().st_mode) == 0o644


def test_output_write_error_names_the_path_for_a_read_only_target(tmp_path):
    target = tmp_path / "figures" / "x.png"
    target.parent.mkdir()
    target.write_bytes(b"old")
    blocker = tmp_path / "figures" / "sub"
    blocker.write_text("a file where a folder is needed")
    with pytest.raises(OutputWriteError) as err:
        write_text_atomic(blocker / "x.png", "new")
    assert err.value.path == blocker / "x.png" and err.value.errno is not None
    assert target.read_bytes() == b"old"


# ---------------------------------------------------------------------------------------------------------
# Executed notebooks


@pytest.mark.notebook
def test_failed_run_keeps_the_last_good_executed_notebook(sandbox, no_leftover_processes, tmp_path):
    flag = tmp_path / "fail"
    notebook = make_notebook(tmp_path / "flaky.ipynb",
                             f"from pathlib import Path\nfail = Path({str(flag)!r}).exists()",
                             "if fail:\n    raise RuntimeError('this run fails')\nprint('a good run')")
    reports = sandbox.work / "reports"
    assert cli(sandbox, "run", "--notebooks", str(notebook)).returncode == 0
    good = (reports / "flaky.cpu.ipynb").read_bytes()

    flag.write_text("x")
    result = cli(sandbox, "run", "--notebooks", str(notebook))
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert "notebook flaky failed in cell" in line and "RuntimeError: this run fails" in line
    assert f"this run's copy: {reports / 'flaky.cpu.failed.ipynb'}" in line
    assert f"the last good run stays at {reports / 'flaky.cpu.ipynb'}" in line
    assert (reports / "flaky.cpu.ipynb").read_bytes() == good
    assert "this run fails" in (reports / "flaky.cpu.failed.ipynb").read_text()
    assert not (reports / "flaky.cpu.running.ipynb").exists()

    flag.unlink()
    assert cli(sandbox, "run", "--notebooks", str(notebook)).returncode == 0
    assert not (reports / "flaky.cpu.failed.ipynb").exists()  # the failure no longer describes the last run
    sandbox.assert_nothing_left()


@pytest.mark.notebook
@pytest.mark.server
def test_report_no_run_from_a_real_run_and_on_a_full_disk(sandbox, full_report, tmp_path):
    """From the real cpu run's sidecars: ``report --no-run`` rebuilds; a truncated sidecar is refused before
    any output changes; REPORT.md on a full disk keeps the good one."""
    _, root = full_report
    for name in ("artifacts", "reports", "figures"):
        shutil.copytree(root / name, sandbox.work / name)
    shutil.copy2(root / "REPORT.md", sandbox.work / "REPORT.md")
    good = (sandbox.work / "REPORT.md").read_text()
    rebuilt = cli(sandbox, "report", "--no-run", timeout=600)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "[measured]" in (sandbox.work / "REPORT.md").read_text()

    sidecar = sandbox.work / "artifacts" / "03_patch_and_bench.cpu.json"
    sidecar.write_text(sidecar.read_text()[:500])
    assert "is unreadable" in refused(sandbox)
    sidecar.write_text((root / "artifacts" / "03_patch_and_bench.cpu.json").read_text())

    if not shutil.which("unshare"):
        return
    disk = sandbox.work / "disk"
    disk.mkdir()
    good = tmp_path / "REPORT.good"
    shutil.copy2(sandbox.work / "REPORT.md", good)
    size_kb = good.stat().st_size // 1024 + 24  # room for the good REPORT.md, then filled to 8 KB short of a new copy
    mount = (f"mount -t tmpfs -o size={size_kb}k tmpfs {disk} && cp {good} {disk}/REPORT.md && "
             f"(head -c $(({size_kb}*1024 - $(stat -c %s {disk}/REPORT.md) - 8192)) /dev/zero > {disk}/filler || true)")
    check = (f'{sys.executable} -m eagle3lab report --no-run; echo "rc=$?"; '
             f'cmp -s {good} {disk}/REPORT.md && echo unchanged; ls -A {disk}')
    result = subprocess.run(in_namespace(mount, ["sh", "-c", check]), capture_output=True, text=True,
                            timeout=patience(600), env=sandbox.env(EAGLE3LAB_REPORT_MD=str(disk / "REPORT.md")))
    assert result.stdout.split() == ["rc=2", "unchanged", "REPORT.md", "filler"], result.stdout + result.stderr
    assert one_line(result.stderr).startswith(f"eagle3lab: no space left on the device while writing "
                                              f"{disk / 'REPORT.md'}")
