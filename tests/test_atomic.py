"""The one atomic writer: old or new content, never a mix; a failed write keeps the old file and no temp file."""

from __future__ import annotations

import errno
import json
import os
import stat

import pytest

from eagle3lab import atomic
from eagle3lab.errors import OutputWriteError


def test_text_is_replaced_and_world_readable(tmp_path):
    target = tmp_path / "out" / "report.md"
    atomic.write_text_atomic(target, "one")
    atomic.write_text_atomic(target, "two")
    assert target.read_text() == "two"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["report.md"]


def test_failure_while_filling_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sidecar.json"
    target.write_text("good")

    def explode(handle):
        handle.write("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic.write_with(target, explode)
    assert target.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["sidecar.json"]


def test_full_disk_is_named_with_the_path(tmp_path, monkeypatch):
    target = tmp_path / "REPORT.md"
    target.write_text("good")

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.os, "replace", no_space)
    with pytest.raises(OutputWriteError) as err:
        atomic.write_text_atomic(target, "new")
    assert (err.value.path, err.value.errno) == (target, errno.ENOSPC)
    assert target.read_text() == "good"
    assert [p.name for p in tmp_path.iterdir()] == ["REPORT.md"]


def test_mode_none_keeps_the_replaced_files_mode(tmp_path):
    target = tmp_path / "module.py"
    target.write_text("x = 1\n")
    target.chmod(0o600)
    atomic.write_text_atomic(target, "x = 2\n", mode=None)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_json_converts_paths_and_dataclasses(tmp_path):
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: int

    out = atomic.write_json_atomic(tmp_path / "a.json", {"p": Point(3), "where": tmp_path, "s": (1, 2)})
    assert json.loads(out.read_text()) == {"p": {"x": 3}, "where": str(tmp_path), "s": [1, 2]}


def test_figure_failure_keeps_previous_png(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = tmp_path / "fig.png"
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    atomic.save_figure_atomic(fig, target, dpi=50)
    first = target.read_bytes()
    assert first.startswith(b"\x89PNG")

    class Broken:
        def savefig(self, *args, **kwargs):
            raise ValueError("draw failed")

    with pytest.raises(ValueError):
        atomic.save_figure_atomic(Broken(), target)
    assert target.read_bytes() == first
    plt.close(fig)
