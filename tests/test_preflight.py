"""Preflight: every check of a deployment, each failure one line with its fix, without launching anything.

This machine has no GPU, so the GPU profile's real run must stop at the GPU count. Where a check needs GPUs
(architecture, memory, interconnect, a passing run), the GPUs are described by a constructed inventory and the
test name says so (``_mocked_gpu``); everything else (sglang, checkpoints, sglang's parser, the trace) is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import on_cpu

from eagle3lab.errors import PreflightFailed
from eagle3lab.runtime import gpuinfo
from eagle3lab import preflight
from eagle3lab.preflight import runner
from eagle3lab.preflight.host import HostFacts
from eagle3lab.runtime.gpuinfo import Gpu, GpuInventory
from eagle3lab.runtime.profiles import load_profile
from kimi_checkpoint import RTX_PRO_6000_MIB, write_checkpoint
from timing import patience

# A host with what the GPU path needs (preflight/host.py), so the rows below do not depend on this machine's
GOOD_HOST = HostFacts(shm_bytes=64 * 2**30, ram_bytes=1024 * 2**30, python_include="/usr/include/python3.11",
                      python_h=True, compiler="/usr/bin/gcc", libnuma=True)
CHECKS = ["GPUs", "GPU architecture", "sglang", "target checkpoint", "draft checkpoint", "KV cache (baseline)",
          "KV cache (EAGLE-3)", "GPU memory", "free disk", "/dev/shm", "host RAM", "Triton build", "libnuma",
          "weight loads",
          "server flags (baseline)", "server flags (EAGLE-3)", "sglang check_server_args (baseline)",
          "sglang check_server_args (EAGLE-3)", "drafter aux layers", "first raise", "capture order", "NVIDIA driver", "cuDNN",
          "sgl-kernel", "GPUs idle", "interconnect", "NCCL all-reduce"]

# Constructed in the format `nvidia-smi topo -m` prints (8 GPUs on two PCIe roots, no NVLink); not a capture.
PCIE_TOPOLOGY = "\n".join(
    ["\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tCPU Affinity\tNUMA Affinity"]
    + [f"GPU{i}\t" + "\t".join(" X " if i == j else ("NODE" if (i < 4) == (j < 4) else "SYS") for j in range(8))
       + "\t0-63\t0" for i in range(8)]
    + ["", "Legend:", "", "  X    = Self", "  SYS  = Connection traversing PCIe as well as the SMP interconnect"])


def blackwells(count: int = 8, arch: tuple[str, ...] = ("sm_90", "sm_100", "sm_120")) -> GpuInventory:
    gpus = [Gpu(i, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", (12, 0), 96 * 2**30) for i in range(count)]
    return GpuInventory(count, gpus, list(arch), "2.9.1+cu128", "12.8", "580.65.06", PCIE_TOPOLOGY,
                        cudnn_version=91002, used_mib=[3] * count)


def test_the_cpu_profile_is_passed_over():
    result = preflight.run_preflight(load_profile("cpu"), inventory=lambda: pytest.fail("no GPU query for cpu"))
    assert result.ok and result.passed_over and result.checks == []
    assert result.rows()[0]["outcome"] == "skipped"


def test_the_gpu_profile_stops_at_the_gpu_count_on_this_machine(empty_hub):
    """Real: torch is asked in a child process and finds no CUDA GPU here."""
    result = preflight.run_preflight(load_profile("blackwell-8x"), quick=True)
    assert [c.name for c in result.checks] == CHECKS
    gpus = result.check("GPUs")
    assert gpus.outcome == "fail" and gpus.detail.startswith("blackwell-8x needs 8 CUDA GPUs; found 0")
    assert result.problem_line().startswith("blackwell-8x needs 8 CUDA GPUs; found 0")
    assert "; run on a machine with 8 CUDA GPUs, or lower tp_size" in result.problem_line()
    assert result.check("target checkpoint").fix == "python -m eagle3lab fetch-models --profile blackwell-8x"
    assert result.check("server flags (EAGLE-3)").outcome == "skipped", "quick: sglang's parser waits for a fix"
    json.dumps(result.to_dict())


def test_require_raises_one_line_and_saves_every_check(empty_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    monkeypatch.setattr(runner, "read_host_facts", lambda: GOOD_HOST)
    shown = []
    with pytest.raises(PreflightFailed) as err:
        preflight.require(load_profile("blackwell-8x"), echo=shown.append)
    assert "\n" not in str(err.value) and "(+2 more failed checks" in str(err.value)
    saved = json.loads((tmp_path / "preflight.blackwell-8x.json").read_text())
    assert [c["name"] for c in saved["checks"]] == CHECKS and saved["ok"] is False
    assert "fail    GPUs" in shown[0]


def run_cli(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "eagle3lab", *args], capture_output=True, text=True,
                          timeout=patience(300),
                          env={**os.environ, **env})
    return proc, time.monotonic() - started


def test_preflight_json_lists_every_check_and_its_outcome(tmp_path):
    """The full run: sglang's own parser accepts both launch command lines even before the models are fetched."""
    env = {"HF_HOME": str(tmp_path / "hf"), "EAGLE3LAB_ARTIFACTS_DIR": str(tmp_path / "artifacts")}
    proc, _ = run_cli("preflight", "--profile", "blackwell-8x", "--json", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("eagle3lab: blackwell-8x needs 8 CUDA GPUs; found 0")
    data = json.loads(proc.stdout)
    outcomes = {c["name"]: c["outcome"] for c in data["checks"]}
    assert list(outcomes) == CHECKS
    assert outcomes["server flags (baseline)"] == outcomes["server flags (EAGLE-3)"] == "ok"
    eagle3 = next(c for c in data["checks"] if c["name"] == "server flags (EAGLE-3)")
    assert "--speculative-algorithm" in eagle3["data"]["argv"] and eagle3["data"]["parsed"] is True
    full = next(c for c in data["checks"] if c["name"] == "sglang check_server_args (EAGLE-3)")
    assert full["outcome"] == "ok" and full["data"]["checked"] is True, full["detail"]
    assert full["data"]["launch_env_sglang"] == {"SGLANG_DISABLE_CUDNN_CHECK": "1"}
    order = next(c for c in data["checks"] if c["name"] == "capture order")
    assert order["outcome"] == "warn" and order["data"]["order"]["defect"] is True, order["detail"]
    assert "cuda_graph_runner.py:365" in order["detail"] and "sglang-eagle3-capture-order.patch" in order["fix"]
    quoted = order["data"]["quoted_layers"]
    assert (quoted["cuda_graph_layers"], quoted["eager_layers"]) == ([2, 30, 58], [3, 31, 59])


def test_the_report_of_the_gpu_profile_stops_before_any_notebook(tmp_path):
    """What `PROFILE=blackwell-8x make run` does after set-up, on a machine without GPUs."""
    env = {f"EAGLE3LAB_{d.upper()}_DIR": str(tmp_path / d) for d in ("artifacts", "reports", "figures")}
    env.update({"HF_HOME": str(tmp_path / "hf"), "EAGLE3LAB_REPORT_MD": str(tmp_path / "REPORT.md")})
    proc, seconds = run_cli("report", "--profile", "blackwell-8x", env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("eagle3lab: blackwell-8x needs 8 CUDA GPUs; found 0")
    assert not list((tmp_path / "reports").glob("*.ipynb")) and not (tmp_path / "REPORT.md").exists()
    print(f"report --profile blackwell-8x stopped after {seconds:.1f} s (not asserted: shared machine)")


def test_blackwell_8x_passes_with_eight_96gb_gpus_mocked_gpu(offline_hub, tiny_models):
    """Eight constructed Blackwell GPUs; the tiny models under the real repo ids; every other check real."""
    result = preflight.run_preflight(load_profile("blackwell-8x"), inventory=blackwells, host=lambda: GOOD_HOST)
    outcomes = {c.name: c.outcome for c in result.checks}
    assert result.ok, result.text()
    assert outcomes["GPUs"] == outcomes["GPU architecture"] == outcomes["GPU memory"] == "ok"
    assert outcomes["target checkpoint"] == outcomes["draft checkpoint"] == "ok"
    for label in ("baseline", "EAGLE-3"):
        check = result.check(f"server flags ({label})")
        assert check.outcome == "ok" and check.data["validated"] is True, check.detail
        assert "set by profile" in check.detail  # one fraction for both arms (preflight/memory.py)
    assert result.check("server flags (EAGLE-3)").data["chosen"]["speculative_algorithm"] == "EAGLE3"
    full = result.check("sglang check_server_args (EAGLE-3)")
    assert full.outcome == "ok" and full.data["stand_in_models"] is False, full.detail
    first = result.check("first raise")
    assert first.data["capability"] == (12, 0) and first.data["first_raise"]["certain"] is True, first.detail
    assert result.check("interconnect").detail.endswith("no NVLink: all-reduce goes over PCIe")
    assert result.check("NCCL all-reduce").detail == "torch sees 0 CUDA GPUs here, fewer than tp_size 8: not run"
    layers = result.check("drafter aux layers")
    # the tiny drafter (ids i, depth L): eager forwards capture [i + 1]; sglang's CUDA-graph runner calls the hook
    # without ids, so graph replays capture its defaults [2, L // 2, L - 3]
    depth = load_profile("cpu").model_num_layers
    assert layers.outcome == "warn"
    eager = [i + 1 for i in tiny_models.aux_layer_ids]
    assert layers.data["trace"]["eager_forwards_capture"]["self.model.layers_to_capture"] == eager
    assert layers.data["trace"]["cuda_graph_forwards_capture"]["self.model.layers_to_capture"] == [2, depth // 2,
                                                                                                   depth - 3]


def test_too_few_gpus_mocked_gpu(offline_hub):
    check = preflight.check_gpu_count(load_profile("blackwell-8x"), blackwells(4))
    assert check.outcome == "fail" and check.detail == "blackwell-8x needs 8 CUDA GPUs; found 4"
    assert preflight.check_gpu_count(load_profile("gpu-1x"), blackwells(1)).outcome == "ok"


def test_an_architecture_torch_was_not_built_for_mocked_gpu():
    assert preflight.check_capability(blackwells(arch=("sm_80", "sm_90")), 8).outcome == "fail"
    jit = preflight.check_capability(blackwells(arch=("sm_90", "compute_90")), 8)
    assert jit.outcome == "warn" and "PTX" in jit.detail
    assert preflight.check_capability(blackwells(), 8).detail.startswith("sm_120")


def test_nvlink_is_counted_from_the_topology_matrix():
    nvlinked = PCIE_TOPOLOGY.replace("NODE", "NV18")
    assert gpuinfo.links(PCIE_TOPOLOGY) == {"NODE": 12, "SYS": 16}
    assert gpuinfo.links(nvlinked) == {"NVLink": 12, "SYS": 16}
    assert gpuinfo.links(None) == {}


def test_drafter_ids_outside_the_target_are_a_failure(tmp_path, tiny_models):
    import shutil

    draft = tmp_path / "draft"
    shutil.copytree(tiny_models.draft, draft)
    config = json.loads((draft / "config.json").read_text())
    depth = json.loads((Path(tiny_models.target) / "config.json").read_text())["text_config"]["num_hidden_layers"]
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 1, depth - 1]  # L - 1: no layer L to feed
    (draft / "config.json").write_text(json.dumps(config))
    profile = load_profile("blackwell-8x", overrides={"target_model": tiny_models.target, "draft_model": str(draft)})
    check = preflight.check_layers(profile)
    assert check.outcome == "fail" and f"include [{depth - 1}], outside 0..{depth - 2}" in check.detail


def test_the_sglang_check_is_real_and_the_install_is_pristine():
    check = preflight.check_sglang(load_profile("blackwell-8x"))
    assert check.outcome == "ok" and check.data["modified"] == [] and check.data["missing"] == []


def test_a_profile_on_cpu_skips_the_gpu_checks_and_says_why(offline_hub):
    profile = load_profile("blackwell-8x", overrides=on_cpu("blackwell-8x"))
    check = preflight.check_gpu_count(profile, None)
    assert check.outcome == "skipped" and "runs on cpu (device key)" in check.detail
    assert preflight.passed_over(profile) is None, "a hub-id profile on CPU is still checked (the rehearsal)"


def test_torch_is_asked_in_a_child_process_when_a_driver_might_exist(monkeypatch):
    """The slow path a GPU machine takes, run here for real: torch in a child finds no CUDA GPU."""
    monkeypatch.setattr(gpuinfo, "no_driver", lambda: False)
    found = gpuinfo.inventory()
    assert found.count == 0 and found.gpus == [] and found.error is None
    assert found.torch_version and found.torch_version.startswith("2.9.1")


def test_gpu_1x_capture_order_warns_graphs_2_4_5_against_eager_3_5_6():
    """sglang 0.5.9 installed (pristine), CUDA graphs on, the gpu-1x drafter's ids on its 8-layer tiny target."""
    from eagle3lab.runtime.modelinfo import LayerSetup

    setup = LayerSetup(deployment="gpu-1x", startup="gpu", device="cuda", cuda_graphs=True, status="read", depth=8,
                       aux_layer_ids=[2, 4, 5])
    check = preflight.check_capture_order(load_profile("gpu-1x"), setup)
    assert check.outcome == "warn", check.detail
    assert (check.data["layers"]["cuda_graph_layers"], check.data["layers"]["eager_layers"]) == ([2, 4, 5], [3, 5, 6])
    # the tiny drafter is trained on the output of layer i (the +1): the order patch alone, not the first-id rule
    assert "patch apply patches/sglang-eagle3-capture-order.patch" in check.fix
    assert "first-id-rule" not in check.fix and "0.5.11" in check.fix


def test_capture_order_is_ok_with_cuda_graphs_off():
    check = preflight.check_capture_order(load_profile("gpu-1x", {"disable_cuda_graph": True}))
    assert check.outcome == "ok" and "CUDA graphs off" in check.detail


def test_an_old_driver_for_torchs_cuda_fails_mocked_gpu():
    inv = blackwells()
    inv.driver = "550.54.14"
    check = preflight.check_driver(inv)
    assert check.outcome == "fail" and "570.26" in check.fix
    assert preflight.check_driver(blackwells()).outcome == "ok"


def test_cudnn_910_with_torch_291_is_answered_by_the_launch_environment_mocked_gpu():
    check = preflight.check_cudnn(load_profile("blackwell-8x"), blackwells())
    assert check.outcome == "ok" and "SGLANG_DISABLE_CUDNN_CHECK=1" in check.detail
    assert check.data["launch_env"] == {"SGLANG_DISABLE_CUDNN_CHECK": "1"}


def test_sgl_kernel_without_an_sm120_library_warns_on_blackwell_mocked_gpu():
    """The installed sgl-kernel's own folders are read; the GPUs are constructed."""
    check = preflight.check_sgl_kernel(blackwells(), 8)
    assert check.data["gpus"] == ["sm120"] and "sm120" not in check.data["shipped"]
    assert check.outcome == "warn" and "not sm120" in check.detail


def test_a_busy_gpu_fails_the_idle_check_mocked_gpu():
    inv = blackwells()
    inv.used_mib = [3, 3, 40000, 3, 3, 3, 3, 3]
    check = preflight.check_idle(inv, 8)
    assert check.outcome == "fail" and "GPU 2 40000 MiB" in check.detail
    assert preflight.check_idle(blackwells(), 8).outcome == "ok"


def rtx_pro_6000s(count: int = 8) -> GpuInventory:
    """Eight cards of 97,887 MiB each (the memory.total nvidia-smi reports for an RTX PRO 6000 Blackwell), idle."""
    inv = blackwells(count)
    inv.gpus = [Gpu(g.index, g.name, g.capability, RTX_PRO_6000_MIB * 2**20) for g in inv.gpus]
    inv.used_mib = [0] * count
    return inv


@pytest.fixture(scope="module")
def kimi_memory(tmp_path_factory, tiny_models):
    """Preflight's memory rows for blackwell-8x on Kimi-K2.5's published config and index (no shard on disk), as the
    profile launches it and with mem_fraction_static left to sglang; sglang's parser runs once for both (its child
    answers are kept by command line)."""
    from eagle3lab.runtime.deployment import Models
    from eagle3lab.runtime.sglang_args import parse_launches

    root = write_checkpoint(tmp_path_factory.mktemp("kimi"))
    models = Models(str(root), tiny_models.draft, trust_remote_code=True)  # only the target is sized
    answers: dict = {}

    def parse(argvs, env, **kwargs):
        missing = {k: v for k, v in argvs.items() if tuple(v) not in answers}
        if missing:
            got = parse_launches(missing, env, timeout_s=patience(600), **kwargs)
            answers.update({tuple(missing[k]): got[k] for k in missing})
        return {k: answers[tuple(v)] for k, v in argvs.items()}

    profile = load_profile("blackwell-8x")
    named = preflight.check_memory(profile, rtx_pro_6000s(), str(root), models, parse=parse)
    old = preflight.check_memory(load_profile("blackwell-8x", overrides={"mem_fraction_static": None}),
                                 rtx_pro_6000s(), str(root), models, parse=parse)
    return {c.name: c for c in named}, {c.name: c for c in old}


def test_preflight_fails_sglangs_default_fraction_for_kimi_k25_mocked_8x_rtx_pro_6000(kimi_memory):
    _, old = kimi_memory
    eagle3, pools = old["KV cache (EAGLE-3)"], old["GPU memory"]
    assert eagle3.outcome == "fail" and eagle3.detail.startswith("too small: ")
    assert "sglang's mem_fraction_static 0.752" in eagle3.detail and "--set mem_fraction_static=0.827" in eagle3.fix
    assert eagle3.data["arm"]["pool_tokens"] < eagle3.data["min_tokens"]
    assert pools.outcome == "fail" and "different pools" in pools.detail, "0.752 and 0.771 give unequal pools"
    for row in old.values():
        print(f"{row.outcome:5} {row.name}: {row.detail}" + (f" -> {row.fix}" if row.fix else ""))


def test_preflight_passes_the_named_fraction_with_one_pool_for_both_arms_mocked_8x_rtx_pro_6000(kimi_memory):
    named, _ = kimi_memory
    baseline, eagle3, pools = named["KV cache (baseline)"], named["KV cache (EAGLE-3)"], named["GPU memory"]
    assert baseline.outcome == eagle3.outcome == pools.outcome == "ok", pools.detail
    assert baseline.data["arm"]["pool_tokens"] == eagle3.data["arm"]["pool_tokens"] >= eagle3.data["min_tokens"]
    assert "both arms get the same pool" in pools.detail
    assert pools.data["fitting_fraction"] == load_profile("blackwell-8x").mem_fraction_static
    for row in named.values():
        print(f"{row.outcome:5} {row.name}: {row.detail}")


def test_the_memory_rows_are_skipped_without_gpus_or_configs(tmp_path):
    from eagle3lab.runtime.deployment import Models

    profile = load_profile("blackwell-8x")
    models = Models("moonshotai/Kimi-K2.5", "AQ-MedAI/Kimi-K25-eagle3")
    assert {c.outcome for c in preflight.check_memory(profile, None, None, models)} == {"skipped"}
    rows = preflight.check_memory(profile, rtx_pro_6000s(), str(tmp_path), models,
                                  parse=lambda *a, **k: pytest.fail("no parse without a config"))
    assert {c.outcome for c in rows} == {"skipped"} and "--configs-only" in rows[0].detail


def test_cudnn_is_skipped_not_passed_when_torch_was_not_asked():
    check = preflight.check_cudnn(load_profile("blackwell-8x"), GpuInventory(0, error="no NVIDIA driver"))
    assert check.outcome == "skipped" and "SGLANG_DISABLE_CUDNN_CHECK=1" in check.detail
