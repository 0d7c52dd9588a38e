"""The cost model against cases worked out by hand, plus the invariants its conclusions rest on."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from eagle3lab.report import incident
from eagle3lab.errors import PerfModelError
from eagle3lab.report.perfmodel import (
    SPEC_MAX_RUNNING_REQUESTS,
    DraftModelConfig,
    Hardware,
    MoEModelConfig,
    SpecConfig,
    allreduce_time,
    allreduces_per_forward,
    baseline_tok_s,
    break_even_accept_length,
    calibrate_overhead,
    draft_forward,
    expected_distinct_experts,
    kv_capacity_requests,
    predict_deployment,
    spec_tok_s,
    speedup,
    speedup_grid,
    target_forward,
    weight_bytes_per_gpu,
)
from eagle3lab.report.presets import (
    cpu_preset,
    h200_x8,
    incident_hardware,
    kimi_k25,
    kimi_k25_eagle3_drafter,
    moe_config_from_hf,
    predict_incident,
    rtx_pro_6000_x8,
    tiny_kimi,
)

SHAPE_KEYS = ("num_layers", "first_k_dense", "hidden", "num_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
              "qk_rope_head_dim", "v_head_dim", "dense_intermediate", "moe_intermediate", "n_routed_experts",
              "experts_per_token", "n_shared_experts", "vocab_size", "dense_bytes_per_param", "expert_weight_bits",
              "expert_group_size", "expert_scale_bytes", "kv_bytes_per_elem")


def toy_model(**overrides) -> MoEModelConfig:
    """Small enough to add up by hand: 2 layers (1 dense, 1 MoE), 4 experts of which 2 per token, INT4 experts."""
    values = dict(num_layers=2, first_k_dense=1, hidden=8, num_heads=2, q_lora_rank=4, kv_lora_rank=2,
                  qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2, dense_intermediate=6, moe_intermediate=4,
                  n_routed_experts=4, experts_per_token=2, n_shared_experts=1, vocab_size=10,
                  dense_bytes_per_param=2.0, expert_weight_bits=4.0, expert_group_size=4, expert_scale_bytes=2.0,
                  kv_bytes_per_elem=2.0)
    values.update(overrides)
    return MoEModelConfig(name="toy", **values, sources={k: "test" for k in SHAPE_KEYS})


def toy_hardware(**overrides) -> Hardware:
    values = dict(name="toy-hw", tp_size=2, mem_bandwidth=1000.0, bandwidth_efficiency=1.0, peak_flops=1e18,
                  flops_efficiency=1.0, allreduce_latency_s=0.0, allreduce_bus_bw=1e18, gpu_memory_bytes=1e6,
                  step_overhead_s=0.0, draft_forward_overhead_s=0.0, spec_cycle_overhead_s=0.0)
    values.update(overrides)
    return Hardware(**values, sources={k: "test" for k in values if k != "name"})


# ------------------------------------------------------------------------------------------- hand-computed
def test_distinct_experts_hand_cases():
    assert expected_distinct_experts(0, 384, 8) == 0
    assert expected_distinct_experts(1, 384, 8) == pytest.approx(8)  # one token touches exactly its k experts
    assert expected_distinct_experts(2, 4, 2) == pytest.approx(3)  # 4 * (1 - (1/2)^2)
    # 4 verify tokens on Kimi-K2.5: 384 * (1 - (47/48)^4); (47/48)^4 = 4879681 / 5308416
    assert expected_distinct_experts(4, 384, 8) == pytest.approx(384 * (1 - 4879681 / 5308416))
    assert 383 < expected_distinct_experts(10_000, 384, 8) <= 384


def test_distinct_experts_rejects_bad_input():
    with pytest.raises(PerfModelError, match="distinct experts"):
        expected_distinct_experts(4, 8, 9)


def test_kimi_expert_and_kv_bytes_by_hand():
    m = kimi_k25()
    # 3 * 7168 * 2048 weights at 4 bits plus one 2-byte scale per 32 weights = 0.5625 bytes per weight
    assert m.expert_bytes == 3 * 7168 * 2048 * 0.5625 == 24_772_608
    # MLA caches 512 latent + 64 rope values per token and layer, 2 bytes each, 61 layers
    assert m.kv_bytes_per_token == 61 * 576 * 2 == 70_272


def test_toy_weight_bytes_by_hand():
    wb = weight_bytes_per_gpu(toy_model(), tp=2, tokens=1)
    # attention replicated per layer: 8*(4+2+2) + norms 4 + 2 = 70 params; 2 layers, 2 bytes, on every GPU
    assert wb.attention_replicated == 280
    # split per layer: q_b 4*2*4=32, kv_b 2*2*4=16, o 2*2*8=32 -> 80 params; 2 layers * 2 bytes / tp 2
    assert wb.attention_split == 160
    assert wb.dense_mlp == 3 * 8 * 6 * 2 / 2 == 144
    assert wb.router == 8 * 4 * 2 == 64  # replicated
    assert wb.shared_experts == 3 * 8 * 4 * 2 / 2 == 96
    # one expert: 96 weights * (0.5 + 2/4) bytes = 96 bytes; one token touches 2 experts; split over tp 2
    assert wb.routed_experts == 2 * 96 / 2 == 96
    assert wb.lm_head == 10 * 8 * 2 / 2 == 80
    assert wb.total == 920
    # two tokens touch 4 * (1 - (1/2)^2) = 3 experts on average: 48 more bytes
    assert weight_bytes_per_gpu(toy_model(), tp=2, tokens=2).total == pytest.approx(968)


def test_target_forward_time_by_hand():
    m, hw = toy_model(), toy_hardware(step_overhead_s=0.5)
    step = target_forward(m, hw, batch=1, context_len=10)
    # KV: 10 tokens * 2 layers * (2 + 2) values * 2 bytes = 160 bytes; weights 920; 1000 bytes/s
    assert step.kv_bytes == 160
    assert step.memory_s == pytest.approx(1.08)
    assert step.total_s == pytest.approx(1.58)
    assert sum(step.breakdown().values()) == pytest.approx(step.total_s)


def test_allreduce_time_by_hand():
    hw = rtx_pro_6000_x8()
    assert allreduces_per_forward(61) == 124  # 2 per layer + embedding all-reduce + logits gather
    ring = 2 * 7 / 8 * (1 * 7168 * 2) / 20e9
    assert allreduce_time(hw, 124, 1, 7168) == pytest.approx(124 * (30e-6 + ring))
    assert allreduce_time(toy_hardware(tp_size=1), 10, 5, 8) == 0.0


def test_compute_bound_step_uses_compute_time():
    slow = toy_hardware(peak_flops=1.0)
    step = target_forward(toy_model(), slow, batch=4, context_len=10)
    assert step.compute_s > step.memory_s
    assert step.total_s == pytest.approx(step.compute_s)
    assert step.compute_excess_s == pytest.approx(step.compute_s - step.memory_s)


def test_kv_capacity_by_hand():
    m = toy_model()
    hw = toy_hardware(gpu_memory_bytes=10_000.0)
    # resident: everything read at one token, minus 2 experts, plus all 4 experts (192) and embedding (80)
    resident = 920 - 96 + 4 * 96 / 2 + 80
    assert kv_capacity_requests(m, hw, context_len=10, mem_fraction_static=0.5) == (5000 - resident) // 160
    with pytest.raises(PerfModelError, match="do not fit"):
        kv_capacity_requests(m, toy_hardware(gpu_memory_bytes=100.0), 10, 0.5)


# ------------------------------------------------------------------------------------ calibration, validation
def test_calibration_reproduces_measured_step_and_rejects_impossible_ones():
    m = kimi_k25()
    hw = calibrate_overhead(m, rtx_pro_6000_x8(), measured_step_s=0.02, context_len=1000, source="test")
    assert target_forward(m, hw, 1, 1000).total_s == pytest.approx(0.02)
    assert hw.sources["step_overhead_s"] == "test"
    with pytest.raises(PerfModelError, match="below the model's floor"):
        calibrate_overhead(m, rtx_pro_6000_x8(), measured_step_s=1e-4, context_len=1000, source="test")
    with pytest.raises(PerfModelError, match="must be > 0"):
        calibrate_overhead(m, rtx_pro_6000_x8(), measured_step_s=0.0, context_len=1000, source="test")


def test_every_preset_parameter_has_a_source():
    for cfg in (kimi_k25(), kimi_k25_eagle3_drafter(), rtx_pro_6000_x8(), h200_x8(), tiny_kimi()):
        assert all(cfg.sources.get(f, "").strip() for f in cfg.__dataclass_fields__ if f not in ("name", "sources"))


def test_missing_source_or_bad_value_is_one_clear_error():
    with pytest.raises(PerfModelError, match="'hidden' has no source"):
        MoEModelConfig(**{**toy_model().__dict__, "sources": {k: "x" for k in SHAPE_KEYS if k != "hidden"}})
    with pytest.raises(PerfModelError, match="'hidden' must be a number >= 0"):
        toy_model(hidden=-8)
    with pytest.raises(PerfModelError, match="efficiencies"):
        toy_hardware(bandwidth_efficiency=1.5)
    with pytest.raises(PerfModelError, match="topk == 1"):
        SpecConfig(num_steps=3, topk=2)


def test_moe_config_from_hf_reads_kimi_style_text_config():
    cfg = {"text_config": {"num_hidden_layers": 61, "first_k_dense_replace": 1, "hidden_size": 7168,
                           "num_attention_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
                           "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                           "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 384,
                           "num_experts_per_tok": 8, "n_shared_experts": 1, "vocab_size": 163840}}
    from_hf = moe_config_from_hf(cfg, "kimi", "test config", expert_weight_bits=4.0, expert_group_size=32,
                                 expert_scale_bytes=2.0)
    assert replace(from_hf, name=kimi_k25().name) == kimi_k25()  # the preset agrees with a config.json reading
    with pytest.raises(PerfModelError, match="lacks num_hidden_layers"):
        moe_config_from_hf({"hidden_size": 8}, "x", "broken.json")


def test_tiny_model_is_read_from_the_generator():
    from eagle3lab.runtime.tinymodel.configs import text_config

    assert tiny_kimi(6).num_layers == text_config(6)["num_hidden_layers"] == 6


def test_cpu_preset_calibrates_overhead_from_measured_step():
    hw = cpu_preset(measured_step_s=0.007, context_len=64, mem_bandwidth=1e10)
    floor = target_forward(tiny_kimi(), hw, 1, 64, include_overhead=False).total_s
    assert hw.step_overhead_s == pytest.approx(0.007 - floor)
    assert "calibrated" in hw.sources["step_overhead_s"]
    assert hw.tp_size == 1 and allreduce_time(hw, 10, 1, 64) == 0


# --------------------------------------------------------------------------------------- speculative decoding
@pytest.fixture(scope="module")
def incident_setup():
    pcie, _ = incident_hardware(1152)
    return kimi_k25(), kimi_k25_eagle3_drafter(), pcie, SpecConfig(num_steps=3)


def test_verify_of_four_tokens_reads_more_experts_than_one_token(incident_setup):
    m, _, hw, spec = incident_setup
    one = target_forward(m, hw, 1, 1152)
    verify = target_forward(m, hw, 1, 1152, tokens_per_request=spec.num_draft_tokens)
    extra_experts = expected_distinct_experts(4, 384, 8) - 8
    assert verify.weight_bytes - one.weight_bytes == pytest.approx(60 * extra_experts * m.expert_bytes / 8)


def test_break_even_gives_speedup_one_and_speedup_grows_with_acceptance(incident_setup):
    m, d, hw, spec = incident_setup
    for batch in (1, 16, 48):
        tau = break_even_accept_length(m, d, hw, spec, batch, 1152)
        assert 1 < tau < spec.max_accept_length
        assert speedup(m, d, hw, spec, batch, 1152, tau) == pytest.approx(1.0)
    grid = speedup_grid(m, d, hw, spec, [1, 48], [1.0, 2.0, 3.0, 4.0], 1152)
    assert all(row == sorted(row) for row in grid)
    assert grid[0][0] < 1  # nothing accepted: speculation only adds cost


def test_spec_cycle_adds_draft_forwards(incident_setup):
    m, d, hw, spec = incident_setup
    cycle_per_token = 1 / spec_tok_s(m, d, hw, spec, 1, 1152, 1.0)
    expected = (target_forward(m, hw, 1, 1152, 4).total_s + 3 * draft_forward(d, hw, 1).total_s
                + hw.spec_cycle_overhead_s)
    assert cycle_per_token == pytest.approx(expected)


def test_accept_length_out_of_range_is_rejected(incident_setup):
    m, d, hw, spec = incident_setup
    with pytest.raises(PerfModelError, match=r"\[1, 4\]"):
        spec_tok_s(m, d, hw, spec, 1, 1152, 4.5)


def test_incident_prediction_structure():
    pcie, nvlink = predict_incident(accept_lengths=(1.0, 2.0, 4.0))
    assert pcie.single_stream_tok_s == pytest.approx(incident.SINGLE_STREAM.value)  # calibrated on it
    assert pcie.floor_single_stream_tok_s > pcie.single_stream_tok_s
    assert pcie.spec_max_batch == SPEC_MAX_RUNNING_REQUESTS < pcie.baseline_max_batch
    assert pcie.baseline_peak_batch == pcie.baseline_max_batch  # plain decoding keeps gaining with batch
    assert list(pcie.spec_peak_tok_s) == sorted(pcie.spec_peak_tok_s)
    assert nvlink.floor_single_stream_tok_s > pcie.floor_single_stream_tok_s  # 4.8 vs 1.79 TB/s, NVLink
    assert math.isfinite(pcie.break_even_at_spec_max_batch)


def test_predict_deployment_respects_explicit_request_limits(incident_setup):
    m, d, hw, spec = incident_setup
    p = predict_deployment(m, d, hw, spec, 1152, 0.9, [2.0], spec_max_running_requests=8,
                           baseline_max_running_requests=16)
    assert (p.spec_max_batch, p.baseline_max_batch) == (8, 16)
    assert p.baseline_peak_tok_s == pytest.approx(baseline_tok_s(m, hw, 16, 1152))


def test_draft_model_weights_by_hand():
    d = DraftModelConfig(name="d", num_layers=1, hidden=4, num_heads=2, num_kv_heads=1, head_dim=2, intermediate=3,
                         draft_vocab_size=5, num_aux_layers=3, bytes_per_param=2.0,
                         sources={k: "t" for k in ("num_layers", "hidden", "num_heads", "num_kv_heads", "head_dim",
                                                   "intermediate", "draft_vocab_size", "num_aux_layers",
                                                   "bytes_per_param")})
    # fc 3*4*4=48, qkv 2*4*(2+2)*2=64, o 2*2*4=16, mlp 3*4*3=36, head 4*5=20
    assert d.params_per_forward == 184
    assert draft_forward(d, toy_hardware(), batch=1).weight_bytes == 184 * 2 / 2


def test_sensitivity_moves_the_way_the_physics_says():
    from eagle3lab.report.presets import incident_sensitivity

    rows = {r["variation"]: r for r in incident_sensitivity(
        {"base": {}, "faster bus": {"allreduce_bus_bw": 40e9}, "longer context": {"context_len": 2048}},
        accept_lengths=(3.0,))}
    assert rows["faster bus"]["baseline_peak_tok_s"] > rows["base"]["baseline_peak_tok_s"]
    assert rows["longer context"]["baseline_max_batch"] < rows["base"]["baseline_max_batch"]
    assert all(r["single_stream_tok_s"] == pytest.approx(incident.SINGLE_STREAM.value) for r in rows.values())
    with pytest.raises(PerfModelError, match="unknown hardware parameter"):
        incident_sensitivity({"typo": {"bandwith": 1.0}})


def test_incident_report_is_json_and_keeps_reported_apart():
    import json

    from eagle3lab.report.presets import incident_report

    report = json.loads(json.dumps(incident_report()))
    assert {r["kind"] for r in report["reported"]} == {"reported"}
    side = report["side_by_side"]
    assert side["single_stream_tok_s"]["reported"] == incident.SINGLE_STREAM.value
    assert side["peak_tok_s"]["reported"] == incident.PEAK.value
    predicted = report["predicted"]["rtx_pro_6000_x8"]
    assert side["peak_tok_s"]["predicted"] == pytest.approx(predicted["baseline_peak_tok_s"])
    assert all(report["sources"]["model"].values())
