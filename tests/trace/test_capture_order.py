"""The capture-order defect, read from sglang's own source: 0.5.9 captures graphs with the defaults, later
releases with the drafter's ids; the generated 0.5.9 patch closes the gap and applies to the installed package."""

from __future__ import annotations

import pytest

from eagle3lab import sidecars
from eagle3lab.notebook import interface_trace as tracebook
from eagle3lab.fix.capture_order_fix import PATCH_NAME, generate_patch, patched_source
from eagle3lab.package import patching
from eagle3lab.trace.capture_order import bisect_fix, trace_capture_order
from eagle3lab.trace.sources import open_source

KIMI_IDS = [2, 30, 58]  # AQ-MedAI/Kimi-K25-eagle3's ids as the engineer's write-up quotes its config


@pytest.fixture(scope="module")
def release_059():
    return open_source("0.5.9")


def test_059_graph_runner_resets_to_defaults_before_capture_and_ids_come_after_graphs(release_059):
    order = trace_capture_order(release_059)
    assert order.defect
    resets = [c.where for c in order.graph_resets]
    assert resets == ["srt/model_executor/cuda_graph_runner.py:365"]
    ids = [(c.where, c.function, c.after_graph_init) for c in order.ids_calls]
    assert ids == [("srt/model_executor/model_runner.py:622", "ModelRunner.initialize", True)]
    assert order.default_expr == "[2, num_layers // 2, num_layers - 3]"


def test_kimi_drafter_reads_one_layer_early_under_graphs_in_059(release_059):
    layers = trace_capture_order(release_059).layers(61, KIMI_IDS)
    assert layers["cuda_graph_layers"] == [2, 30, 58] and layers["eager_layers"] == [3, 31, 59]
    assert layers["mismatch"]


def test_gpu_1x_depth_and_ids_show_the_same_one_layer_shift(release_059):
    layers = trace_capture_order(release_059).layers(8, [2, 4, 5])
    assert (layers["cuda_graph_layers"], layers["eager_layers"]) == ([2, 4, 5], [3, 5, 6])


def test_a_drafter_naming_no_ids_gets_the_defaults_everywhere(release_059):
    layers = trace_capture_order(release_059).layers(61, None)
    assert layers["cuda_graph_layers"] == layers["eager_layers"] == [2, 30, 58] and not layers["mismatch"]


def test_the_newest_cached_release_agrees_and_the_bisect_finds_the_fix():
    newest = trace_capture_order(open_source("0.5.23"))
    assert not newest.defect and not newest.layers(61, KIMI_IDS)["mismatch"]
    result = bisect_fix(["0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.23"], open_source)
    assert result["first_fixed"] == "0.5.11"
    assert {"version": "0.5.10.post1", "defect": True} in result["rows"]


def test_the_generated_059_patch_is_the_committed_one_applies_and_removes_the_mismatch(release_059):
    text = generate_patch(release_059)
    committed = (patching.PATCHES_DIR / f"{PATCH_NAME}.patch").read_text(encoding="utf-8")
    assert text == committed, "regenerate: fix.capture_order_fix.write_patch(open_source('0.5.9'))"
    assert patching.check(patching.PATCHES_DIR / f"{PATCH_NAME}.patch").status == patching.APPLICABLE
    fixed = trace_capture_order(patched_source(release_059))
    assert not fixed.defect and fixed.layers(61, KIMI_IDS)["cuda_graph_layers"] == [3, 31, 59]


def test_notebook_02_record_types_into_the_sidecar_field(release_059):
    record = tracebook.capture_order_record(release_059, open_source("0.5.23"),
                                            ["0.5.6", "0.5.9", "0.5.10.post1", "0.5.11", "0.5.23"], [])
    typed = sidecars.CaptureOrderRecord.model_validate(record)
    assert typed.first_fixed == "0.5.11" and typed.drafter_ids == [2, 30, 58] and typed.depth == 61
    rows = tracebook.capture_order_rows(record)
    assert [(r["release"], r["CUDA-graph replays capture"], r["eager forwards capture"]) for r in rows] == \
        [("0.5.9", [2, 30, 58], [3, 31, 59]), ("0.5.23", [2, 30, 58], [2, 30, 58])]
    spans = [(r["releases"], r["drafter"], r["CUDA-graph replays capture"], r["eager forwards capture"])
             for r in tracebook.release_table_rows(record) if r["drafter"].startswith("AQ-MedAI")]
    assert spans[0] == ("0.5.9 - 0.5.10.post1", "AQ-MedAI/Kimi-K25-eagle3 on Kimi-K2.5", [2, 30, 58], [3, 31, 59])
    assert record["milestones"]["both"] == "0.5.23"  # of the releases asked for, the first with both fixes
    text = tracebook.capture_order_text(record)
    assert "write-up" in typed.ids_source and "cuda_graph_runner.py:365" in text
    assert "deepseek_v2.py:2963 DeepseekV2ForCausalLM.set_eagle3_layers_to_capture" in text


def test_gpu_1x_profile_generates_a_drafter_whose_ids_equal_the_graph_default(release_059):
    from eagle3lab.runtime.profiles import load_profile
    from eagle3lab.runtime.tinymodel import tiny_model_inputs

    profile = load_profile("gpu-1x")
    draft = tiny_model_inputs(num_layers=profile.model_num_layers, aux_layer_ids=profile.tiny_aux_layer_ids)["draft"]
    ids = draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    layers = trace_capture_order(release_059).layers(profile.model_num_layers, ids)
    assert (profile.model_num_layers, ids) == (8, [2, 4, 5])
    assert (layers["cuda_graph_layers"], layers["eager_layers"]) == ([2, 4, 5], [3, 5, 6])
    cpu = load_profile("cpu")
    assert cpu.tiny_aux_layer_ids is None and cpu.model_num_layers == 12, "the cpu profile is unchanged"


def test_explicit_tiny_ids_outside_the_target_are_refused_in_one_line():
    from eagle3lab.errors import TinyModelError
    from eagle3lab.runtime.tinymodel import tiny_model_inputs

    with pytest.raises(TinyModelError, match=r"tiny_aux_layer_ids \[2, 4, 7\] .* within 0..6"):
        tiny_model_inputs(num_layers=8, aux_layer_ids=[2, 4, 7])


def test_the_gpu_first_raise_is_decided_by_resolved_server_args_and_capability(release_059):
    """Kimi INT4 on sm_120: moe_runner_backend stays auto, so FlashInfer autotune (and its _dummy_run at
    model_runner.py:1906) does not run, and the CUDA-graph runner's no-id call raises first."""
    from eagle3lab.trace import audit
    from eagle3lab.trace.startup import StartupProfile

    generic = audit.verdict(release_059)["first_raise"]["gpu"]
    assert generic["where"] == "srt/model_executor/model_runner.py:1906" and generic["certain"] is False
    chosen = {"device": "cuda", "disable_cuda_graph": False, "moe_runner_backend": "auto",
              "disable_flashinfer_autotune": False}
    decided = audit.verdict(release_059, profiles=(StartupProfile.resolved(chosen, (12, 0)),))["first_raise"]["gpu"]
    assert decided["where"] == "srt/model_executor/cuda_graph_runner.py:365" and decided["certain"] is True
    trtllm = {**chosen, "moe_runner_backend": "flashinfer_trtllm"}
    hopper = audit.verdict(release_059, profiles=(StartupProfile.resolved(trtllm, (9, 0)),))["first_raise"]["gpu"]
    assert hopper["where"] == "srt/model_executor/model_runner.py:1906" and hopper["certain"] is True
