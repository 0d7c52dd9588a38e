"""The crash parser on logs that real sglang wrote for this project, and on edits of them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

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
    assert report.signature in report.traceback_text
    # transformers' message runs over two lines; the report keeps both, and the traceback text ends with it
    assert report.traceback_text.rstrip().endswith(report.message.splitlines()[-1])


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
    assert [(tb.chain, tb.link) for tb in found] == [(0, None), (0, "context")]
    report = crash_report(text)
    assert report.exc_type == "ValueError", "the last error of a chain is the one reported"
    assert [entry["exc_type"] for entry in report.chain] == ["KeyError", "ValueError"]


def test_unchained_tracebacks_are_separate_chains():
    one = "\n".join(["Traceback (most recent call last):", '  File "/a/x.py", line 1, in f', "    f()",
                     "KeyError: 'k'"])
    found = extract_tracebacks(one + "\nsome other output\n" + one.replace("KeyError: 'k'", "ValueError: v"))
    assert [tb.chain for tb in found] == [0, 1] and all(tb.link is None for tb in found)
    assert crash_report(one + "\n" + one).distinct_tracebacks == 1


# ------------------------------------------------------------------------------------------------------------
# Real logs kept as test data (tests/runtime/data/crashlogs/README.md says how each was produced)

CRASHLOGS = Path(__file__).parent / "data" / "crashlogs"


def stored(name: str) -> str:
    return (CRASHLOGS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["hub_id_uncached_offline.log", "hub_id_uncached_no_dns.log"])
def test_an_uncached_hub_id_is_reported_by_the_last_error_of_its_chain(name):
    report = crash_report(stored(name), profile="blackwell-8x")
    assert report.exc_type == "OSError"
    assert report.signature.startswith("OSError: We couldn't connect to 'https://huggingface.co'")
    assert report.category == "environment" and report.rule == "model_not_available_offline"
    assert report.fix == "python -m eagle3lab fetch-models --profile blackwell-8x"
    assert report.chain[-1]["exc_type"] == "OSError" and len(report.chain) >= 2
    # the whole multi-line message is kept, not only its first line
    assert "Check your internet connection" in report.message


def test_the_no_dns_chain_keeps_the_low_level_symptom_but_does_not_report_it():
    report = crash_report(stored("hub_id_uncached_no_dns.log"))
    chain_types = [entry["exc_type"] for entry in report.chain]
    assert chain_types[0] == "socket.gaierror" and "Name or service not known" in report.chain[0]["message"]
    assert chain_types.index("requests.exceptions.ConnectionError") < chain_types.index("OSError")
    assert [entry["link"] for entry in report.chain][1:] == ["cause", "cause", "context", "cause", "cause"]
    assert report.fix == "python -m eagle3lab fetch-models --profile <profile>"


def test_a_message_that_starts_on_the_next_line_is_kept_whole():
    report = crash_report(stored("sgl_kernel_without_libcuda.log"), profile="cpu")
    assert report.exc_type == "ImportError"
    assert report.signature == "ImportError: [sgl_kernel] CRITICAL: Could not load any common_ops library!"
    assert "libcuda.so.1: cannot open shared object file" in report.message
    assert report.rule == "missing_shared_library" and report.category == "environment"
    assert report.message.rstrip().endswith("No module named 'common_ops'")


def test_the_stored_wrapper_gap_log_is_the_interface_gap():
    report = crash_report(stored("kimi_eagle3_wrapper_gap.log"))
    assert (report.category, report.object_class, report.missing_attribute) == \
        ("interface_gap", "KimiK25ForConditionalGeneration", "set_eagle3_layers_to_capture")
    assert "Received sigquit" not in report.message, "the launcher's next log line is not part of the message"
    assert len(report.chain) == 1 and report.fix is None


def test_an_unknown_last_error_is_classified_by_an_earlier_link_of_its_chain():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/v/site-packages/sglang/srt/a.py", line 1, in load',
        "    import sgl_kernel",
        "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/v/site-packages/sglang/srt/b.py", line 2, in start',
        "    load()",
        "RuntimeError: start-up failed",
    ])
    report = crash_report(text)
    assert report.signature == "RuntimeError: start-up failed"
    assert report.rule == "missing_shared_library"
    assert report.classified_by.startswith("ImportError: libcuda.so.1")


def test_a_python_warning_after_the_exception_is_not_part_of_its_message():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/v/x.py", line 1, in f',
        "    f()",
        "ValueError: first line",
        "second line",
        "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: leaked semaphore objects",
    ])
    assert crash_report(text).message == "first line\nsecond line"


@pytest.mark.server
def test_a_real_launch_of_an_uncached_hub_id_offline_is_the_fetch_problem(tmp_path, cpu_profile, tiny_models):
    """The stored offline log, produced again: real sglang, an empty HF cache, HF_HUB_OFFLINE=1."""
    profile = cpu_profile.model_copy(update={"trust_remote_code": True})
    spec = server_spec(profile, tiny_models, speculative=False, port=free_port())
    env = {**spec.env, "HF_HOME": str(tmp_path / "empty-hf-home"), "HF_HUB_OFFLINE": "1"}
    hub = type(spec)(**{**spec.__dict__, "model_path": "moonshotai/Kimi-K2.5", "env": env})
    outcome = launch(hub, tmp_path / "uncached.log", timeout_s=cpu_profile.ready_timeout_s)
    report = crash_report(outcome.log_text(), profile="blackwell-8x")
    assert outcome.status == "died"
    assert report.rule == "model_not_available_offline", report.signature
    assert report.fix == "python -m eagle3lab fetch-models --profile blackwell-8x"
