"""Progress inside long cells: a line per measured point where no terminal shows a bar, the bar where one does."""

from __future__ import annotations

import io
import re

import pytest

from eagle3lab import progress
from eagle3lab.progress import BAR, LINES, OFF, PointProgress, kernel_setting, progress_mode

POINTS = [("c=1", "ok, 12.5 tok/s"), ("c=2", "ok, 20.0 tok/s"), ("c=4", "failed, server died")]
LINE = re.compile(r"^\[sweep baseline\] (\d)/3 (c=\d): (.+) \((\d+\.\d s|\d+ min \d\d s); "
                  r"(\d+\.\d s|\d+ min \d\d s) elapsed\)$")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def fake_sweep(stream, requests_per_point: int = 4, mode: str | None = None) -> None:
    """The shape of ``run_sweep``: requests tick the bar, each finished point is reported with its result."""
    with PointProgress("sweep baseline", len(POINTS), total=len(POINTS) * requests_per_point, unit="req",
                       stream=stream, mode=mode) as bar:
        for what, result in POINTS:
            for _ in range(requests_per_point):
                bar.tick()
            bar.point(what, result)


@pytest.fixture(autouse=True)
def no_setting(monkeypatch):
    monkeypatch.delenv("EAGLE3LAB_PROGRESS", raising=False)
    monkeypatch.delenv("CI", raising=False)


def test_not_a_terminal_gets_one_line_per_point_naming_it_its_result_and_elapsed_time():
    out = io.StringIO()
    fake_sweep(out)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(POINTS), out.getvalue()
    for number, ((what, result), line) in enumerate(zip(POINTS, lines), start=1):
        match = LINE.match(line)
        assert match, line
        assert match.group(1, 2, 3) == (str(number), what, result)
    assert "\r" not in out.getvalue()  # no bar redraws in a log


def test_a_terminal_gets_the_tqdm_bar_and_no_point_lines():
    out = Tty()
    fake_sweep(out)
    text = out.getvalue()
    assert "\r" in text and "12/12" in text and "req" in text, text  # tqdm's redrawn bar, counting requests
    assert "c=4: failed, server died" in text  # the last point's result rides on the bar
    assert not any(LINE.match(line) for line in text.replace("\r", "\n").splitlines())


def test_the_bar_can_be_forced_and_lines_can_be_forced(monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_PROGRESS", "bar")
    out = io.StringIO()
    fake_sweep(out)
    assert "12/12" in out.getvalue() and not LINE.match(out.getvalue().splitlines()[0])
    monkeypatch.setenv("EAGLE3LAB_PROGRESS", "lines")
    tty = Tty()
    fake_sweep(tty)
    assert [LINE.match(line) is not None for line in tty.getvalue().splitlines()] == [True] * len(POINTS)


def test_ci_gets_lines_even_on_a_terminal_and_zero_silences_everything(monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert progress_mode(Tty()) == LINES
    monkeypatch.setenv("EAGLE3LAB_PROGRESS", "0")
    out = io.StringIO()
    fake_sweep(out)
    assert progress_mode(Tty()) == OFF and out.getvalue() == ""


def test_default_lines_go_to_file_descriptor_2_flushed(capfd):
    """Inside a Jupyter kernel fd 2 reaches both the notebook and the terminal or CI log that started it."""
    fake_sweep(None)
    captured = capfd.readouterr()
    assert [LINE.match(line) is not None for line in captured.err.splitlines()] == [True] * len(POINTS), captured.err
    assert captured.out == ""


def test_a_loop_inside_another_keeps_quiet_in_lines_mode():
    """An interleaved block is a whole sweep: one line for the block, not one more for its single point."""
    out = io.StringIO()
    with PointProgress("interleaved launch 1", 2, unit="block", stream=out) as blocks:
        for arm in ("baseline", "eagle3"):
            with PointProgress(f"{arm}-launch1-c4-round1", 1, stream=out) as inner:
                inner.point("c=4", "ok")
            blocks.point(f"{arm} c=4 round 1", "ok")
    lines = out.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == ["[interleaved launch 1"] * 2, lines
    assert progress._open_lines == 0  # closed loops no longer count
    with PointProgress("after", 1, stream=out) as alone:
        assert not alone.quiet


def test_papermill_kernels_get_lines_unless_progress_was_turned_off(monkeypatch):
    assert kernel_setting() == LINES
    monkeypatch.setenv("EAGLE3LAB_PROGRESS", "off")
    assert kernel_setting() == "0"
    monkeypatch.setenv("EAGLE3LAB_PROGRESS", "bar")  # a bar redrawn into an executed notebook: lines instead
    assert kernel_setting() == LINES
    assert progress_mode(Tty()) == BAR
