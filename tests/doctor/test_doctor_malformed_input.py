"""Issue 43, item 5: doctor on text it half-reads, on huge logs and on binary garbage. Malformed values are left
out with a note (never a traceback), the log is read in one bounded pass, and input from which nothing was read
is refused in one line naming the file (exit 2), even beside --concurrency or --temperature."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eagle3lab.bench.diagnostics.evidence import CAUSES
from eagle3lab.bench.remote import TOOL
from eagle3lab.commands.cli import main

SRC = str(Path(__file__).parents[2] / "src")
DECODE = ("[2026-01-01 00:00:{s:02d} TP0] Decode batch, #running-req: {running}, #token: 4096, token usage: 0.05, "
          "accept len: {accept}, cuda graph: True, gen throughput (token/s): {gen}, #queue-req: {queued}")


def decode(accept: str = "2.50", gen: str = "812.3", running: int = 8, queued: int = 0, s: int = 0) -> str:
    return DECODE.format(accept=accept, gen=gen, running=running, queued=queued, s=s % 60)


def _doctor(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(["doctor", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err.strip()


def test_decode_lines_with_numbers_that_are_none_are_skipped_with_a_note(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text("\n".join([decode(accept="1.2.3"), decode(gen="2.10."), decode(accept="..."),
                              decode(accept="2.40", running=16)]) + "\n", encoding="utf-8")
    code, out, _ = _doctor(["--server-log", str(log), "--json"], capsys)
    assert code == 0
    answer = json.loads(out)
    assert answer["read"] == ["--server-log"]
    assert any("3 decode line(s) with a value that is no number skipped" in n for n in answer["notes"])


def test_a_log_of_only_unreadable_decode_lines_is_refused_naming_the_file(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(decode(accept="1.2.3") + "\n" + decode(accept="...") + "\n", encoding="utf-8")
    code, _, err = _doctor(["--server-log", str(log)], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "read nothing" in err and str(log) in err and "no number" in err


def test_server_args_and_configs_of_the_wrong_type_are_left_out(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text("[2026] server_args=ServerArgs(tp_size='abc', cuda_graph_max_bs=[1, 'a'], "
                   "max_running_requests='1.2.3', speculative_algorithm='EAGLE3', speculative_num_steps=3)\n"
                   + decode(running=16) + "\n", encoding="utf-8")
    drafter = tmp_path / "drafter.json"
    drafter.write_text(json.dumps({"architectures": True, "hidden_size": "4096", "num_hidden_layers": [1],
                                   "eagle_config": {"eagle_aux_hidden_state_layer_ids": ["x", 2]}}), encoding="utf-8")
    code, out, _ = _doctor(["--server-log", str(log), "--drafter-config", str(drafter), "--target-config",
                            "llama-3.1-8b-instruct", "--json"], capsys)
    assert code == 0
    answer = json.loads(out)
    assert [f["cause"] for f in answer["findings"]] == list(CAUSES)
    notes = " ".join(answer["notes"])
    assert "tp_size='abc'" in notes and "cuda_graph_max_bs=[1, 'a']" in notes and "architectures=True" in notes
    assert "answered unknown" not in notes  # each was left out before any rule saw it


def test_own_results_with_odd_fields_keep_their_rows(tmp_path, capsys):
    """eagle3lab bench's JSON with ``interleaved: true`` and a negative acceptance: the points still read."""
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"tool": TOOL, "workload": {"temperature": 0}, "interleaved": True, "points": [
        {"arm": "speculative", "concurrency": 8, "output_tok_s": 90.0, "accept_length": -1},
        {"arm": "baseline", "concurrency": 8, "output_tok_s": 100.0}]}), encoding="utf-8")
    code, out, _ = _doctor(["--bench", str(bench)], capsys)
    assert code == 0 and out.startswith("measured speedup: 0.90x at concurrency 8")
    assert "negative accept_length left out" in out


def test_binary_garbage_beside_context_numbers_is_refused_naming_the_files(tmp_path, capsys):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 256)
    code, _, err = _doctor(["--server-log", str(garbage), "--bench", str(garbage), "--launch", str(garbage),
                            "--concurrency", "8", "--temperature", "0"], capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert "read nothing" in err and f"--server-log {garbage} (binary data" in err and f"--bench {garbage}" in err


def test_huge_and_adversarial_inputs_finish(tmp_path):
    """Inputs that ran past minutes (patterns scanning a line once per record in it, a table row searched from
    every header to the text's end) and 10 MB single lines: all answered, in one child whose timeout only guards
    the suite against a hang (no time is asserted)."""
    cases = {
        "glued_records.log": ("] Decode batch" * 2000 + "\n") * 360,  # 10 MB, lines of 28 K characters
        "one_line_records.log": "Decode batch, #running-req: 8, accept len: 1.5, " * 200_000,  # 10 MB, one line
        "one_line_marks.log": "] Decode batch" * 720_000,
        "one_line_plain.log": "x" * 10_000_000,
        "send_one_headers.txt": "| Latency (s) | Tokens | Acc Length | Speed (token/s) |\n" * 36_000,
        "namespaces.txt": "Namespace(" * 1_000_000,
    }
    argv = {}
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        argv[name] = ["doctor", "--server-log" if name.endswith(".log") else "--bench", str(path), "--json"]
    code = ("import json, sys, contextlib, io; from eagle3lab.commands.cli import main\n"
            f"codes = {{}}\nfor name, argv in {argv!r}.items():\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "        codes[name] = [main(argv), out.getvalue()]\n"
            "print(json.dumps(codes))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": SRC})
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    codes = json.loads(done.stdout.splitlines()[-1])
    assert all(code in (0, 2) for code, _ in codes.values()), codes
    records = json.loads(codes["one_line_records.log"][1])
    assert records["read"] == ["--server-log"]
    assert any("evenly spread" in n for n in records["notes"])
