"""``eagle3lab bench`` on servers a user runs, here the cpu profile's own two (started by the project's server
code: the baseline, and EAGLE-3 with the trained drafter behind the full delegation patch), shared by the module:

- the A/B command measures the same prompts as notebook 03's sweep
  (``notebook.patch_and_bench.server_arms.sweep_config`` and ``sweep.run_arm``, the code notebook 03 runs) and gets
  the same tokens and the same per-request acceptance;
  ``doctor --bench`` reads its JSON;
- the real output of sglang 0.5.9's own tools against these servers (``send_one``, ``bench_serving``, the server
  log's decode lines) is read by doctor as the tools printed it.

Wall-clock figures are measured, never asserted."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3lab.bench import remote
from eagle3lab.bench.crosscheck import run_bench_serving
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, load_requests, run_arm
from eagle3lab.commands.cli import main
from eagle3lab.doctor.bench import read_bench
from eagle3lab.doctor.run import DoctorInput, doctor
from timing import patience

PROMPTS = 8  # measured prompts per arm at concurrency 1 (notebook 03's prompt stream, its first 8)
ROUNDS = 2


@pytest.fixture(scope="module")
def servers(tmp_path_factory, cpu_profile, tiny_models):
    """Both of the cpu profile's servers, up for the whole module, stopped on every way out."""
    from eagle3lab.fix.relaunch import patched_server
    from eagle3lab.notebook.patch_and_bench.arm_plans import resolve_drafters
    from eagle3lab.package.patching import FULL_DELEGATION_PATCH
    from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
    from eagle3lab.runtime.deployment import server_spec
    from eagle3lab.runtime.server import free_port, running_server

    drafters = resolve_drafters(cpu_profile, tiny_models)
    models = dataclasses.replace(tiny_models, draft=drafters.trained, aux_layer_ids=drafters.trained_layer_ids)
    logs = tmp_path_factory.mktemp("remote-bench-logs")
    spec = server_spec(cpu_profile, models, speculative=True, shims=SPEC_SHIMS, port=free_port())
    base = server_spec(cpu_profile, models, speculative=False, shims=CONTROL_SHIMS, port=free_port())
    with contextlib.ExitStack() as stack:
        stack.enter_context(patched_server(spec, logs / "eagle3.log", cpu_profile.ready_timeout_s,
                                           [FULL_DELEGATION_PATCH]))
        stack.enter_context(running_server(base, logs / "baseline.log", cpu_profile.ready_timeout_s))
        yield {"spec": spec.base_url, "base": base.base_url, "models": models, "spec_log": logs / "eagle3.log"}


def _bench_argv(servers, out: Path) -> list[str]:
    return ["bench", "--base-url", servers["spec"], "--baseline-url", servers["base"], "--concurrency", "1",
            "--num-prompts", str(PROMPTS), "--input-len", "32", "--output-len", "32", "--rounds", str(ROUNDS),
            "--tokenizer", str(servers["models"].target), "--out", str(out)]


@pytest.mark.server
def test_the_ab_command_reproduces_notebook_03s_numbers_and_feeds_doctor(servers, cpu_profile, tmp_path, capsys):
    from eagle3lab.notebook.patch_and_bench.server_arms import sweep_config

    assert main(_bench_argv(servers, tmp_path / "ab")) == 0
    printed = capsys.readouterr().out
    assert "bench_result.json" in printed and "lossless 8/8 prompts identical" in printed
    result = json.loads((tmp_path / "ab" / remote.RESULT_FILE).read_text(encoding="utf-8"))
    assert result["tool"] == remote.TOOL and result["lossless"][0]["lossless"]
    sample = result["interleaved"][0]
    assert len(sample["round_speedups"]) == ROUNDS and sample["speedup_low"] <= sample["speedup"] <= \
        sample["speedup_high"]

    # notebook 03's own sweep, on the same servers and prompts (its first 8 measured prompts at concurrency 1)
    config = dataclasses.replace(sweep_config(cpu_profile, servers["models"], "ids"), concurrency=[1],
                                 num_prompts=PROMPTS)
    nb03 = tmp_path / "nb03"
    ours = {}
    for name, url, kind in (("eagle3", servers["spec"], ARM_KIND_EAGLE3), ("baseline", servers["base"],
                                                                           ARM_KIND_BASELINE)):
        arm = run_arm(name, url, config, nb03, kind=kind)
        ours[name] = {r.prompt_index: r for r in load_requests(nb03 / arm.requests_file) if r.phase == "measure"}
    blocks = sorted((tmp_path / "ab").glob("eagle3-c1-round*.requests.jsonl"))
    assert len(blocks) == ROUNDS
    offset = 0
    for block in blocks:
        measured = [r for r in load_requests(block) if r.phase == "measure"]
        for record in measured:
            reference = ours["eagle3"][offset + record.prompt_index]
            assert record.completion_tokens == reference.completion_tokens == 32
            assert record.spec_verify_ct == reference.spec_verify_ct, (block.name, record.prompt_index)
            assert record.output_ids == reference.output_ids == ours["baseline"][offset + record.prompt_index].output_ids
        offset += len(measured)
    pooled = sum(r.completion_tokens for r in ours["eagle3"].values()) / sum(r.spec_verify_ct
                                                                             for r in ours["eagle3"].values())
    assert result["points"][1]["accept_length"] == pytest.approx(pooled)

    # doctor reads the command's JSON as it is
    given = DoctorInput(bench=(tmp_path / "ab" / remote.RESULT_FILE).read_text(encoding="utf-8"))
    answer = doctor(given)
    assert answer.read == ["--bench"] and answer.measured is not None
    assert answer.measured.speedup == pytest.approx(sample["speedup"]) and answer.measured.concurrency == 1
    found = {f.cause: f for f in answer.findings}
    assert found["temperature_sampling"].applies == "no" and found["chat_template_mismatch"].applies == "yes"
    assert f"{pooled:.2f}" in found["low_acceptance"].evidence


@pytest.mark.server
def test_one_server_swept_with_a_request_rate_and_sharegpt_prompts(servers, tmp_path):
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_text(json.dumps([{"id": str(i), "conversations": [
        {"from": "human", "value": f"question number {i} about the weather"},
        {"from": "gpt", "value": "an answer"}]} for i in range(5)]), encoding="utf-8")
    out = tmp_path / "one"
    assert main(["bench", "--base-url", servers["spec"], "--concurrency", "1,2", "--num-prompts", "4",
                 "--output-len", "16", "--dataset", "sharegpt", "--dataset-path", str(sharegpt),
                 "--request-rate", "50", "--out", str(out)]) == 0
    result = json.loads((out / remote.RESULT_FILE).read_text(encoding="utf-8"))
    assert [(p["arm"], p["concurrency"], p["completed"]) for p in result["points"]] == [
        ("speculative", 1, 4), ("speculative", 2, 4)]
    assert all(p["accept_length"] >= 1.0 for p in result["points"])
    assert result["workload"]["request_rate"] == 50 and (out / remote.CSV_FILE).read_text().startswith("arm,")


@pytest.mark.server
def test_doctor_reads_sglangs_own_tools_as_they_printed_against_these_servers(servers, cpu_profile, tmp_path):
    """sglang 0.5.9's send_one and bench_serving run against the two servers; their stdout, as printed, is what
    doctor reads; so are the EAGLE-3 server's own decode lines."""
    port = servers["spec"].rsplit(":", 1)[1]
    sent = subprocess.run([sys.executable, "-m", "sglang.test.send_one", "--port", port, "--max-new-tokens", "24"],
                          capture_output=True, text=True, timeout=patience(300))
    assert sent.returncode == 0, sent.stderr[-2000:]
    (tmp_path / "send_one.txt").write_text(sent.stdout, encoding="utf-8")
    rows = read_bench(sent.stdout).rows
    assert len(rows) == 1 and rows[0].figures.concurrency == 1 and rows[0].figures.arm == "speculative"
    assert rows[0].figures.accept_length is not None and rows[0].figures.accept_length > 1.0

    from eagle3lab.notebook.patch_and_bench.server_arms import sweep_config

    config = dataclasses.replace(sweep_config(cpu_profile, servers["models"], "ids"), concurrency=[1], num_prompts=4)
    texts = []
    for name, url in (("baseline", servers["base"]), ("eagle3", servers["spec"])):
        run = run_bench_serving(url, str(servers["models"].target), config, 1, tmp_path / name, 1)
        texts.append((tmp_path / name / "bench_serving.c1.round1.log").read_text(encoding="utf-8"))
        assert run.result["completed"] == 4
    reading = read_bench("\n".join(texts))
    assert [(r.figures.arm, r.figures.concurrency, r.figures.completed) for r in reading.rows] == [
        ("baseline", 1, 4), ("speculative", 1, 4)]
    assert reading.rows[1].figures.accept_length is not None and reading.rows[1].figures.accept_length > 1.0
    answer = doctor(DoctorInput(bench="\n".join(texts), server_log=servers["spec_log"].read_text(encoding="utf-8")))
    found = {f.cause: f for f in answer.findings}
    assert "bench_serving's default" in found["temperature_sampling"].evidence and \
        found["temperature_sampling"].applies == "no"
    assert "accept-length figure(s) in the server log" in found["low_acceptance"].evidence
    assert answer.measured is not None and answer.measured.concurrency == 1
