"""``make gpu-check`` rehearsed on this CPU: the gpu-1x profile's own check, end to end, with the GPU probe skipped.

``commands.gpu_check.check`` is what ``gpu-check`` runs once ``gpu_check.require_gpu`` (the GPU probe) found a GPU:
set-up (the tiny pair and the drafter trained on it), notebooks 01-03 through ``build_report``, then the one table
and ``artifacts/gpu_check.gpu-1x.json``. Here the probe is the one thing skipped: the inventory handed in says so,
and only device and size keys are overridden (with ``--set``, as a user would); gpu-1x's fp32, random-id prompts,
exact lossless check, 8-layer target with the drafter ids [2, 4, 5] and 3-point sweep [1, 4, 16] stay its own. On a
CPU sglang 0.5.9 records no graphs, so the crash must come at the eager call after loading (``model_runner.py``),
which is where the check looks when graphs are off. Runs in the installed-sglang group (tests/conftest.py): its
notebooks patch the one installed sglang.
"""

from __future__ import annotations

import json

import pytest
from test_rehearsal import CPU_KEYS

from eagle3lab import gpu_check
from eagle3lab.commands import cli
from eagle3lab.commands import gpu_check as gpu_check_command
from eagle3lab.runtime import gpuinfo
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.server import free_port

# gpu-1x's 8-layer depth stays: its drafter ids [2, 4, 5] are sglang's graph default at that depth (the profile's
# point), and 8 tiny layers already run on a CPU
GPU_1X_CPU_KEYS = tuple(key for key in CPU_KEYS if key != "model_num_layers")
# sizes only: the three concurrencies stay, each sent one prompt per slot (2, 4 and 16 prompts; the cpu profile's
# 4 running requests queue the rest), 16 ids in and 8 out; one cross-check round of each client
SIZES = {"bench_input_len": 16, "bench_output_len": 8, "bench_num_prompts": 2, "bench_prompts_per_concurrency": 1,
         "bench_crosscheck_rounds": 1}
SKIPPED_PROBE = "the CPU rehearsal skips the GPU probe (gpu_check.require_gpu); device keys overridden to the cpu profile's"


def rehearsal_sets() -> list[str]:
    """``--set key=value`` for the device keys (the cpu profile's values), the sizes and a free port."""
    cpu = load_profile("cpu")
    values = {key: getattr(cpu, key) for key in GPU_1X_CPU_KEYS} | SIZES | {"port": free_port()}
    return [f"{key}={json.dumps(value)}" for key, value in values.items()]


@pytest.mark.server
@pytest.mark.notebook
@pytest.mark.network  # notebook 02 reads the sglang 0.5.9 wheel (downloaded once into the cache)
def test_gpu_check_runs_end_to_end_on_cpu_with_only_the_gpu_probe_skipped(monkeypatch, tmp_path, capsys):
    for name in ("artifacts", "reports", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(tmp_path / name))
    monkeypatch.setenv("EAGLE3LAB_REPORT_MD", str(tmp_path / "REPORT.md"))
    argv = ["gpu-check", "--profile", "gpu-1x", *(arg for pair in rehearsal_sets() for arg in ("--set", pair))]
    args = cli.build_parser(argv).parse_args(argv)
    no_gpu = gpuinfo.GpuInventory(0, error=SKIPPED_PROBE)  # instead of gpu_check.require_gpu()
    # notebook 02 on one release without the fix verifications, notebook 03 without the experiment arms (the
    # blackwell-8x rehearsal's trims): the check's rows read neither
    path = gpu_check_command.check(args, no_gpu, per_notebook={
        "02": {"sglang_source": "0.5.9", "bisect_versions": ["0.5.9"], "verify_fixes": False},
        "03": {"capture": False, "experiment_concurrency": []}})

    out = capsys.readouterr().out
    evidence = json.loads(path.read_text())
    rows = {row["check"]: row for row in evidence["rows"]}
    assert path == tmp_path / "artifacts" / "gpu_check.gpu-1x.json" and evidence["ok"] and evidence["failure"] is None
    assert gpu_check.table([gpu_check.Row(**row) for row in evidence["rows"]]) in out, "the table, as written"
    assert rows["GPU"]["outcome"] == "info" and "skips the GPU probe" in rows["GPU"]["detail"]
    # the crash: the unpatched EAGLE-3 launch died at the hook's first call, here the eager one
    crash = rows["crash at the eager call (01)"]
    assert crash["outcome"] == "ok" and "model_runner.py:622" in crash["detail"], crash
    assert "AttributeError: 'KimiK25ForConditionalGeneration'" in crash["detail"]
    patch = rows["patch and relaunch (03)"]
    assert patch["outcome"] == "ok" and "full delegation patch: ready" in patch["detail"], patch
    assert "served speculatively" in patch["detail"] and "unpatched: died" in patch["detail"]
    layers = rows["captured layers, graphs / eager (02)"]
    # gpu-1x's own table (not blackwell-8x's, also traced); on a CPU its start-up records no graphs
    assert "graphs None, eager [3, 5, 6]" in layers["detail"] and "drafter ids [2, 4, 5]" in layers["detail"], layers
    lossless = rows["lossless (03)"]
    assert lossless["outcome"] == "ok" and lossless["detail"].startswith("exact:"), lossless
    bench = rows["benchmark, 3 points (03)"]
    assert bench["outcome"] == "ok" and [f"c={c}:" in bench["detail"] for c in (1, 4, 16)] == [True] * 3, bench

    # the same verdicts from the sidecars themselves: what was served, exact equality, three measured points
    s03 = json.loads((tmp_path / "artifacts" / "03_patch_and_bench.gpu-1x.json").read_text())
    assert s03["lossless"]["mode"] == "exact" and s03["lossless"]["passed"] is True
    assert all(c["identical"] == c["prompts"] > 0 for c in s03["lossless"]["comparisons"])
    headline = next(arm for arm in s03["spec_arms"] if arm["kind"] == "eagle3")
    assert headline["aux_layer_ids"] == [2, 4, 5], "notebook 03 serves a drafter trained on gpu-1x's own ids"
    assert sorted(row["concurrency"] for row in s03["speedup"]) == [1, 4, 16]
    measured = {(arm["arm"], arm["concurrency"]): arm for arm in s03["arms"] if arm["arm"] in ("baseline", "eagle3")}
    assert {c: measured["baseline", c]["ok"] for c in (1, 4, 16)} == {1: "2/2", 4: "4/4", 16: "16/16"}
    s01 = json.loads((tmp_path / "artifacts" / "01_crash_repro.gpu-1x.json").read_text())
    assert s01["profile_values"]["dtype"] == "float32" and s01["profile_values"]["bench_prompt_kind"] == "ids"
