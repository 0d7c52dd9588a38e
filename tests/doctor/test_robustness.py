"""Half-read, huge, nested and binary input: doctor answers in one line or skips the item, always in time linear in
what it was given, and says it read nothing (exit 2) when nothing was text it knows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3lab.bench.diagnostics.evidence import CAUSES
from eagle3lab.commands.cli import main
from eagle3lab.doctor.run import DoctorInput, doctor

SRC = str(Path(__file__).parents[2] / "src")


def test_binary_garbage_is_read_as_nothing_and_exits_2(tmp_path, capsys):
    garbage = tmp_path / "log.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    assert main(["doctor", "--server-log", str(garbage), "--bench", str(garbage)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "read nothing" in err and "binary data" in err
    assert "Traceback" not in err


def test_text_holding_nothing_known_exits_2_but_numbers_alone_are_read(tmp_path, capsys):
    prose = tmp_path / "notes.txt"
    prose.write_text("it is slow, please help\n", encoding="utf-8")
    assert main(["doctor", "--bench", str(prose)]) == 2
    assert "read nothing" in capsys.readouterr().err
    assert main(["doctor", "--bench", str(prose), "--speedup", "0.9", "--concurrency", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("measured speedup: 0.90x at concurrency 8") and "not read (nothing recognised): --bench" in out


@pytest.mark.parametrize("flag, value", [("--accept", "0"), ("--spec-tok-s", "-3"), ("--concurrency", "1.2.3"),
                                         ("--accept", "2.10.")])
def test_bad_numbers_as_flags_are_one_line(flag, value, capsys):
    try:
        code = main(["doctor", flag, value, "--baseline-tok-s", "100"])
    except SystemExit as exc:  # argparse's own refusal, already one line (commands.common.one_line_errors)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_a_10_mb_single_line_log_finishes(tmp_path):
    """Each line is cut to a bounded length and every reader is linear in it: a 10 MB line of decode records
    without line breaks, a cut server_args line of nested brackets and plain bytes all finish (the child's
    timeout only guards the suite against a hang; no time is asserted)."""
    for n, text in enumerate(("[2026-01-01 00:00:00] Decode batch, #running-req: 8, accept len: 1.5, " * 140_000,
                              "server_args=ServerArgs(" + "a=[" * 3_000_000, "x" * 10_000_000)):
        log = tmp_path / f"big{n}.log"
        log.write_text(text, encoding="utf-8")
        code = ("import sys; from eagle3lab.commands.cli import main; "
                f"sys.exit(main(['doctor', '--server-log', {str(log)!r}, '--bench', {str(log)!r}, '--json']))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": SRC})
        assert "Traceback" not in done.stderr and done.returncode in (0, 2), done.stderr[-2000:]
        if n == 0:  # the records, their line breaks restored, are read
            assert json.loads(done.stdout)["read"] == ["--server-log"]


def test_deeply_nested_launches_are_read_or_skipped():
    nested = "bash -c " + "\"sh -c '" * 200 + "python -m sglang.launch_server --tp 2 --speculative-algorithm EAGLE3"
    k8s = "args:\n" + "".join("  " * i + "- - \n" for i in range(2000)) + "- --tp\n- '4'\n- --speculative-algo\n- EAGLE\n"
    brackets = "python -m sglang.launch_server --speculative-config " + "{\"a\":" * 100_000 + "1" + "}" * 100_000
    for launch in (nested, k8s, brackets):
        result = doctor(DoctorInput(launch=launch, concurrency=[4]))
        assert [f.cause for f in result.findings] == list(CAUSES)
