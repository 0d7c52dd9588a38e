"""``make gpu-check``: one line and a non-zero exit before anything heavy on a machine without a GPU, the command
line the docs document, and the table's rows decided from sidecar records (records built here: the GPU run that
writes the real ones cannot run on this machine)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from timing import patience

from eagle3lab import gpu_check, sidecars
from eagle3lab.errors import SidecarError
from eagle3lab.paths import REPO_ROOT
from eagle3lab.runtime import gpuinfo
from eagle3lab.runtime.profiles import load_profile

NO_GPU_HERE = pytest.mark.skipif(not gpuinfo.no_driver(), reason="this machine has an NVIDIA driver: the check would run")


def recipe(target: str) -> list[str]:
    """The recipe lines of one Makefile target."""
    lines = (REPO_ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"{target}:")
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        body.append(line.strip())
    return body


@NO_GPU_HERE
def test_make_gpu_check_without_a_gpu_is_one_line_and_builds_nothing(tmp_path):
    venv = tmp_path / "venv"
    result = subprocess.run(["make", "--no-print-directory", "-C", str(REPO_ROOT), "gpu-check", f"VENV={venv}"],
                            capture_output=True, text=True, timeout=patience(60))
    out = (result.stdout + result.stderr).strip()
    assert result.returncode != 0 and "\n" not in out, out
    assert "make gpu-check needs one CUDA GPU" in out and "make run" in out
    assert not venv.exists(), "the GPU check comes before the venv"


@NO_GPU_HERE
def test_the_gpu_check_command_without_a_gpu_is_one_line_and_exit_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "eagle3lab", "gpu-check"], capture_output=True, text=True,
                            timeout=patience(120), cwd=tmp_path)
    line = result.stderr.strip()
    assert result.returncode == 2 and "\n" not in line and "Traceback" not in line, result.stderr[-500:]
    assert line.startswith("eagle3lab: make gpu-check needs one CUDA GPU") and "no NVIDIA driver" in line


def test_a_cpu_profile_is_refused_before_the_gpu_is_looked_for():
    result = subprocess.run([sys.executable, "-m", "eagle3lab", "gpu-check", "--profile", "cpu"],
                            capture_output=True, text=True, timeout=patience(120))
    assert result.returncode == 2 and "one-GPU cuda profile" in result.stderr and "cpu has device cpu" in result.stderr


def test_the_documented_command_is_the_targets():
    body = recipe("gpu-check")
    assert "$(error make gpu-check needs one CUDA GPU" in body[0], "the GPU check is the first line"
    assert "$(STAMP)" in body[1], "the venv only after the GPU check"
    command = re.search(r"\$\(PY\) -m (eagle3lab gpu-check --profile gpu-1x)", body[-1])
    assert command, body[-1]
    documented = f"`make gpu-check` (`python -m {command.group(1)}`)"
    assert documented in (REPO_ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    assert "`make gpu-check`" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    profile = load_profile("gpu-1x")
    assert (profile.device, profile.tp_size, profile.disable_cuda_graph) == ("cuda", 1, False)
    assert len(profile.bench_concurrency) == 3, "the 3-point benchmark is the profile's sweep"


def crash(call_site: str | None, status: str = "exited") -> sidecars.CrashRecord:
    return sidecars.CrashRecord(status=status, seconds_to_outcome=12.0, peak_rss_bytes=1, log="l",
                                signature="AttributeError: 'KimiK25ForConditionalGeneration' object has no "
                                          "attribute 'set_eagle3_layers_to_capture'", call_site=call_site)


def test_the_crash_passes_only_at_the_graph_capture_call():
    graphs = gpu_check.crash_row(crash("srt/model_executor/cuda_graph_runner.py:365 in __init__"))
    eager = gpu_check.crash_row(crash("srt/model_executor/model_runner.py:622 in initialize"))
    up = gpu_check.crash_row(crash("srt/model_executor/cuda_graph_runner.py:365 in __init__", status="ready"))
    assert (graphs.outcome, eager.outcome, up.outcome) == ("ok", "FAIL", "FAIL")
    assert "cuda_graph_runner.py:365" in graphs.detail and gpu_check.crash_row(None).outcome == "FAIL"


def test_with_graphs_off_the_crash_passes_only_at_the_eager_call():
    """``--set disable_cuda_graph=true`` (the profile's documented second run) and the CPU rehearsal record no graphs:
    the hook's first call is then the eager one after loading."""
    eager = gpu_check.crash_row(crash("srt/model_executor/model_runner.py:622 in initialize"), graphs=False)
    graphs = gpu_check.crash_row(crash("srt/model_executor/cuda_graph_runner.py:365 in __init__"), graphs=False)
    assert (eager.outcome, graphs.outcome) == ("ok", "FAIL") and eager.check == "crash at the eager call (01)"


def test_without_a_gpu_described_the_gpu_row_says_why():
    row = gpu_check.gpu_row(gpuinfo.GpuInventory(0, error="the rehearsal skips the GPU probe"))
    assert (row.outcome, row.detail) == ("info", "no GPU: the rehearsal skips the GPU probe")


def test_lossless_and_the_three_points_are_decided_from_the_records():
    exact = sidecars.LosslessRecord(lossless=True, required_concurrency=4, mode="exact", passed=True,
                                    comparisons=[{}, {}])
    parted = sidecars.LosslessRecord(lossless=False, required_concurrency=4, mode="exact", passed=False)
    assert gpu_check.lossless_row(exact).outcome == "ok" and gpu_check.lossless_row(parted).outcome == "FAIL"
    point = {"baseline_tok_s": 100.0, "eagle3_tok_s": 150.0, "speedup": 1.5, "accept_length": 2.0}
    full = gpu_check.bench_row([sidecars.SpeedupRow(**point, concurrency=c) for c in (1, 4, 16)], [1, 4, 16])
    short = gpu_check.bench_row([sidecars.SpeedupRow(**point, concurrency=1)], [1, 4, 16])
    assert full.outcome == "ok" and full.detail.count("1.50x") == 3
    assert short.outcome == "FAIL" and "not measured: [4, 16]" in short.detail


def test_captured_layers_are_shown_with_where_they_were_read():
    table = sidecars.LayerIdTable(profile="gpu", depth=8, aux_layer_ids=[2, 4, 5],
                                  eager_forwards_capture={"self.model.layers_to_capture": [3, 5, 6]},
                                  cuda_graph_forwards_capture={"self.model.layers_to_capture": [2, 4, 5]})
    row = gpu_check.capture_row(table)
    assert row.outcome == "info" and "graphs [2, 4, 5], eager [3, 5, 6]" in row.detail
    assert "capture-order defect" in row.detail and "not read off this GPU" in row.detail


def test_without_sidecars_every_row_fails_and_the_evidence_is_still_written(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    inventory = gpuinfo.GpuInventory(1, [gpuinfo.Gpu(0, "NVIDIA H200", (9, 0), 141 * 2**30)], torch_version="2.9.1",
                                     torch_cuda="12.8", driver="570.1")  # a GPU described, not used: mocked_gpu
    rows = gpu_check.rows("gpu-1x", inventory, [1, 4, 16])
    assert rows[0].outcome == "info" and "NVIDIA H200, sm_90" in rows[0].detail
    assert [r.outcome for r in rows[1:]] == ["FAIL", "FAIL", "FAIL", "FAIL", "FAIL"]
    text = gpu_check.table(rows)
    assert len(text.splitlines()) == 2 + len(rows)
    path = gpu_check.write_evidence("gpu-1x", rows, inventory, failure="notebook 01 failed")
    data = json.loads(path.read_text())
    assert path.parent == tmp_path and data["ok"] is False and data["gpu"]["gpus"][0]["sm"] == "sm_90"
    assert [r["check"] for r in data["rows"]] == [r.check for r in rows]


def test_a_malformed_sidecar_is_refused_naming_its_file_not_shown_as_a_notebook_that_did_not_finish(tmp_path,
                                                                                                    monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    broken = sidecars.sidecar_path(sidecars.CrashReproSidecar.NOTEBOOK, "gpu-1x")
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("{not json", encoding="utf-8")
    inventory = gpuinfo.GpuInventory(1, [gpuinfo.Gpu(0, "NVIDIA H200", (9, 0), 141 * 2**30)])  # described: mocked_gpu
    with pytest.raises(SidecarError) as err:
        gpu_check.rows("gpu-1x", inventory, [1])
    assert broken.name in str(err.value) and "\n" not in str(err.value)


def test_no_gpu_from_torch_is_the_same_one_line():
    with pytest.raises(Exception) as err:
        gpu_check.require_gpu(gpuinfo.GpuInventory(0, error="torch sees no device"))
    assert "make gpu-check needs one CUDA GPU" in str(err.value) and "torch sees no device" in str(err.value)
