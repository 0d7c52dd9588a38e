"""The blackwell-8x profile's notebooks, end to end, on this CPU: a rehearsal of the GPU path's first run.

Everything that makes the GPU profile different from ``cpu`` except the GPUs runs for real: hub ids resolved
offline from a Hugging Face cache (the tiny models under ``moonshotai/Kimi-K2.5`` and
``AQ-MedAI/Kimi-K25-eagle3``), configs and tokenizers read from the snapshot with the profile's
``trust_remote_code``, launches with the hub offline, the preflight, sglang's parsing of both command lines,
text prompts, sglang's own bench_serving on the snapshot's tokenizer, and the report. The launches that die at
start-up (notebook 01's crash, notebook 03's unpatched and one-method steps) run on the profile's dummy weights. The device and size keys
are overridden to run on CPU; the preflight's GPU checks are what that override skips, and it says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HUB_IDS, on_cpu

from eagle3lab.bench.workload import SweepConfig
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.server import free_port

# device and size keys only: what makes blackwell-8x run on 2 CPU cores (the cpu profile's values). Among them
# extra_server_args, i.e. --sleep-on-idle: an idle scheduler otherwise busy-polls one of the two cores, starving
# the client, bench_serving and the next launch beside it (the GPU profile has no such flag: a GPU box has cores)
CPU_KEYS = ("device", "cpu_harness", "tp_size", "dtype", "attention_backend", "disable_cuda_graph", "context_length",
            "max_total_tokens", "max_running_requests", "model_num_layers", "ready_timeout_s", "extra_server_args",
            "server_omp_threads")


def rehearsal_overrides() -> dict:
    cpu = load_profile("cpu")
    overrides = {key: getattr(cpu, key) for key in CPU_KEYS}
    # a cpu run is modelled on the host it ran on (runtime.profiles refuses a GPU preset there); the model stays
    overrides["cost_model"] = on_cpu("blackwell-8x")["cost_model"]
    overrides.update(port=free_port(), bench_concurrency=[1], bench_input_len=16, bench_output_len=8,
                     bench_num_prompts=2)
    return overrides


@pytest.mark.server
@pytest.mark.notebook
@pytest.mark.network  # notebook 02 reads the sglang 0.5.9 wheel (downloaded once into the cache)
def test_the_gpu_profile_runs_end_to_end_from_an_offline_hub_cache(offline_hub, monkeypatch, tmp_path, tiny_models):
    from eagle3lab.pipeline import build_report
    from eagle3lab.runbook import run_notebook

    for name in ("artifacts", "reports", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(tmp_path / name))
    monkeypatch.setenv("EAGLE3LAB_REPORT_MD", str(tmp_path / "REPORT.md"))
    overrides = rehearsal_overrides()
    # The preflight runs once, in notebook 01, in full, and is asserted from its sidecar below. What `report` runs
    # first is the same preflight with quick=True, which differs only once a check has failed (it then skips
    # sglang's parser), so running it here as well would only launch sglang's parser twice more.
    common = {"overrides": overrides}
    run_notebook("01", "blackwell-8x", common)
    run_notebook("02", "blackwell-8x", {**common, "sglang_source": "0.5.9", "bisect_versions": ["0.5.9"],
                                        "verify_fixes": False})
    # the EAGLE-3 experiment arms (control drafter, shifted ids) are the cpu profile's; here only the plumbing
    run_notebook("03", "blackwell-8x", {**common, "prompt_kind": "text", "capture": False,
                                        "experiment_concurrency": []})
    build_report("blackwell-8x", run=False, parameters=common)

    artifacts = tmp_path / "artifacts"
    s01 = json.loads((artifacts / "01_crash_repro.blackwell-8x.json").read_text())
    snapshot = offline_hub / "hub" / "models--moonshotai--Kimi-K2.5" / "snapshots"
    assert s01["models"]["target_source"] == HUB_IDS["target"] and s01["models"]["trust_remote_code"]
    assert Path(s01["models"]["target"]).parent == snapshot
    assert s01["crash"]["signature"].startswith("AttributeError: 'KimiK25ForConditionalGeneration'")
    assert str(snapshot) in " ".join(s01["crash"]["argv"]) and HUB_IDS["target"] not in s01["crash"]["argv"]
    # the crash dies at start-up, so it runs on blackwell-8x's dummy weights; the control serves real ones
    crash_argv = s01["crash"]["argv"]
    assert crash_argv[crash_argv.index("--load-format") + 1] == "dummy", "the same raise on dummy weights"
    assert "--load-format" not in s01["control"]["argv"]
    checks = {c["name"]: c for c in s01["preflight"]["checks"]}
    assert s01["preflight"]["ok"] and not s01["preflight"]["quick"]
    assert checks["GPUs"]["outcome"] == "skipped" and "runs on cpu (device key)" in checks["GPUs"]["detail"]
    assert checks["target checkpoint"]["outcome"] == checks["draft checkpoint"]["outcome"] == "ok"
    assert checks["weight loads"]["data"]["full_weight_loads"] == 3, checks["weight loads"]["detail"]
    for label in ("baseline", "EAGLE-3"):
        assert checks[f"server flags ({label})"]["outcome"] == "ok"
        assert checks[f"server flags ({label})"]["data"]["validated"] is True, "sglang read the snapshot's configs"
    fraction = load_profile("blackwell-8x").mem_fraction_static  # both arms alike (runtime/kv_budget.py)
    assert {row["set_by"] for row in s01["memory"]} == {"profile"}
    assert {row["mem_fraction_static"] for row in s01["memory"]} == {fraction}, "read from each server log"

    s02 = json.loads((artifacts / "02_interface_trace.blackwell-8x.json").read_text())
    setups = {s["deployment"]: s for s in s02["layer_setups"]}
    assert setups["blackwell-8x"]["status"] == "read" and setups["blackwell-8x"]["aux_layer_ids"] == list(tiny_models.aux_layer_ids)
    assert "models--AQ-MedAI--Kimi-K25-eagle3" in setups["blackwell-8x"]["draft_config"]

    s03 = json.loads((artifacts / "03_patch_and_bench.blackwell-8x.json").read_text())
    weights = [(step["step"], step["load_format"]) for step in s03["chain"]]
    assert weights == [("unpatched", "dummy"), ("one-method patch", "dummy"), ("full delegation patch", "auto")]
    assert s03["chain"][0]["category"] == s03["chain"][1]["category"] == "interface_gap", "both still die at start-up"
    assert s03["parameters"]["prompt_kind"] == "text"
    baseline = next(row for row in s03["arms"] if row["arm"] == "baseline")
    sent = SweepConfig.from_profile(load_profile("blackwell-8x", overrides=overrides)).prompts_for(1)
    assert sent == max(2, 4)  # the profile's sizing: max(bench_num_prompts, bench_prompts_per_concurrency x c)
    assert baseline["status"] == "ok" and baseline["ok"] == f"{sent}/{sent}" and baseline["out_tok_s"] > 0
    assert s03["cross_check"], "sglang's bench_serving ran with the snapshot's tokenizer"
    assert (tmp_path / "REPORT.md").read_text().count("blackwell-8x") >= 1
