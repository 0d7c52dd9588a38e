"""The crash parser on logs that real sglang wrote for this project, and on edits of them."""

from __future__ import annotations

import json
import os
import re

import pytest

from eagle3lab.runtime.crashlog import crash_report, extract_tracebacks, sglang_relative
from eagle3lab.runtime.deployment import server_spec
from eagle3lab.runtime.server import free_port, launch


@pytest.mark.server
def test_eagle3_crash_is_an_interface_gap_on_the_wrapper(eagle3_crash):
    report = eagle3_crash.report
    assert eagle3_crash.outcome.status == "died"
    assert report is not None and report.category == "interface_gap"
    assert report.exc_type == "AttributeError"
    assert report.object_class == "KimiK25ForConditionalGeneration"
    assert report.missing_attribute == "set_eagle3_layers_to_capture"
    # The call site is runtime code in sglang that asks the model object for the member.
    assert report.call_site.path.startswith("sglang/srt/") and "models/" not in report.call_site.path
    assert "set_eagle3_layers_to_capture" in report.call_site.code
    assert all(not frame.path.startswith("/") or "sglang/" not in frame.path for frame in report.frames)


@pytest.mark.server
def test_interleaved_lines_from_other_processes_do_not_change_the_report(eagle3_crash):
    text = eagle3_crash.outcome.log_text()
    noisy = []
    for i, line in enumerate(text.splitlines()):
        noisy.append(line)
        if i % 2:
            noisy.append(f"[2026-11-29 10:00:{i % 60:02d}] INFO:     127.0.0.1:4242 - \"GET /health HTTP/1.1\" 503")
    original, interleaved = crash_report(text), crash_report("\n".join(noisy))
    assert interleaved.signature == original.signature
    assert [str(f) for f in interleaved.frames] == [str(f) for f in original.frames]


@pytest.mark.server
def test_one_traceback_per_tp_rank_is_one_distinct_crash(eagle3_crash):
    block = eagle3_crash.report.traceback_text
    text = "\n".join(f"[2026-11-29 10:00:00 TP{rank}] Scheduler hit an exception: {block}" for rank in range(8))
    report = crash_report(text)
    assert report.tracebacks_found == 8 and report.distinct_tracebacks == 1
    assert report.missing_attribute == "set_eagle3_layers_to_capture"


@pytest.mark.server
def test_log_without_traceback_gives_no_report(eagle3_crash):
    text = eagle3_crash.outcome.log_text()
    assert crash_report(re.sub(r"(?m)^.*Traceback \(most recent call last\):.*$", "", text)) is None


@pytest.mark.server
def test_missing_driver_library_is_an_environment_problem(tmp_path, cpu_profile, tiny_models):
    """Without the stub libcuda the launcher dies importing sgl_kernel: a set-up problem, not the bug."""
    spec = server_spec(cpu_profile, tiny_models, speculative=True, port=free_port())
    env = dict(spec.env)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in env["LD_LIBRARY_PATH"].split(os.pathsep)
                                             if "libcuda-stub" not in p)
    bare = type(spec)(**{**spec.__dict__, "env": env})
    outcome = launch(bare, tmp_path / "nostub.log", timeout_s=cpu_profile.ready_timeout_s)
    report = crash_report(outcome.log_text())
    assert outcome.status == "died"
    assert report.category == "environment", report.signature


@pytest.mark.server
def test_an_unrecognised_crash_is_unknown_and_verbatim(tmp_path, cpu_profile, tiny_models):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "no_such_model_type",
                                                     "architectures": ["NoSuchModel"]}))
    spec = server_spec(cpu_profile, tiny_models, speculative=False, port=free_port())
    outcome = launch(type(spec)(**{**spec.__dict__, "model_path": str(broken)}), tmp_path / "broken.log",
                     timeout_s=cpu_profile.ready_timeout_s)
    report = crash_report(outcome.log_text())
    assert outcome.status == "died" and report.category == "unknown" and report.rule is None
    assert report.message and report.message in outcome.log_text()
    assert report.traceback_text.splitlines()[-1].strip().startswith(report.exc_type)


@pytest.mark.parametrize("raw, relative", [
    ("/x/lib/python3.11/site-packages/sglang/srt/model_executor/model_runner.py",
     "sglang/srt/model_executor/model_runner.py"),
    ("/usr/lib/python3.11/threading.py", "/usr/lib/python3.11/threading.py"),
])
def test_paths_are_made_sglang_relative(raw, relative):
    assert sglang_relative(raw) == relative


def test_chained_exceptions_are_found_separately():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/a/site-packages/sglang/srt/x.py", line 3, in f',
        "    g()",
        "KeyError: 'k'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/a/site-packages/sglang/srt/y.py", line 9, in h',
        "    raise ValueError('v')",
        "ValueError: v",
    ])
    found = extract_tracebacks(text)
    assert [(tb.exc_type, tb.message) for tb in found] == [("KeyError", "'k'"), ("ValueError", "v")]
    assert crash_report(text).exc_type == "KeyError"
