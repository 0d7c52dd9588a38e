"""The cost model's physics: hand-computed cases and the invariants its conclusions rest on."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from eagle3lab.errors import PerfModelError
from eagle3lab.report import incident
from eagle3lab.costmodel.arch import MoE, Storage, eagle1_drafter, storage_from_config
from eagle3lab.costmodel.engine import engine_preset, sglang_engine, vllm_engine
from eagle3lab.costmodel.forward import ACT_HIDDEN_VECTORS, allreduce_time, kernel_count
from eagle3lab.costmodel.perfmodel import (Deployment, Pass, break_even_accept_length, calibrate_accept_length,
                                           calibrate_baseline, calibrate_spec_extra, eagle3_drafter,
                                           expected_distinct_experts, forward_cost, gemm_efficiency,
                                           model_from_config, plain_step, predict, spec_cycle, spec_tok_s, speedup,
                                           verify_tokens)
from eagle3lab.costmodel.presets import (HARDWARE, hardware_preset, kimi_k25, kimi_k25_eagle3_drafter, load_config,
                                         speculative_flags, stored_model)
from eagle3lab.report.incident_model import incident_deployment, incident_spec, predict_incident

CHAIN = speculative_flags(3, 1, 4)


def llama8b() -> Deployment:
    target = stored_model("llama-3.1-8b-instruct")
    return Deployment(target, eagle3_drafter(target), hardware_preset("h100-sxm"), 1, sglang_engine(), 1024)


# ------------------------------------------------------------------------------------------------ models
def test_llama_from_config_matches_its_published_size_and_kv_layout():
    m = stored_model("llama-3.1-8b-instruct")
    assert m.total_params() == pytest.approx(8.03e9, rel=0.005)  # "8B": 8,030,261,248 parameters
    # 32 layers x (K and V) x 8 KV heads x 128 dims x 2 bytes
    assert m.kv_bytes_per_token(1) == 32 * 2 * 8 * 128 * 2 == 131_072


def test_gqa_kv_cache_splits_under_tp_until_heads_run_out_but_mla_never_splits():
    llama, kimi = stored_model("llama-3.1-8b-instruct"), kimi_k25()
    assert llama.kv_split_under_tp and not kimi.kv_split_under_tp
    assert llama.kv_bytes_per_token(2) == llama.kv_bytes_per_token(1) / 2
    assert llama.kv_bytes_per_token(8) == llama.kv_bytes_per_token(1) / 8
    assert llama.kv_bytes_per_token(16) == llama.kv_bytes_per_token(8)  # 8 KV heads: replicated past tp 8
    # MLA caches one 512 latent + 64 rope key per token and layer: every GPU holds all of it
    assert kimi.kv_bytes_per_token(1) == kimi.kv_bytes_per_token(8) == 61 * (512 + 64) * 2


def test_kimi_k25_is_read_through_text_config_with_int4_experts_only():
    m = kimi_k25()
    assert (m.family, m.num_layers, m.dense_layers, m.moe.layers) == ("deepseek_v3", 61, 1, 60)
    assert (m.moe.n_experts, m.moe.top_k, m.moe.shared_intermediate) == (384, 8, 2048)
    # INT4 weights plus one 16-bit scale per 32 weights; attention, shared expert and lm_head stay BF16
    assert m.storage == Storage(linear=2.0, expert=4 / 8 + 2 / 32, lm_head=2.0, kv=2.0)
    assert m.total_params() == pytest.approx(1.03e12, rel=0.02)  # Kimi-K2: 1.04T total parameters


def test_qwen3_moe_and_deepseek_layouts():
    q = stored_model("qwen3-30b-a3b")
    assert (q.moe.layers, q.dense_layers, q.moe.n_experts, q.moe.top_k) == (48, 0, 128, 8)
    assert q.total_params() == pytest.approx(30.5e9, rel=0.01)
    ds = model_from_config({"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 4, "hidden_size": 64,
                            "num_attention_heads": 4, "vocab_size": 100, "kv_lora_rank": 16, "q_lora_rank": 8,
                            "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "intermediate_size": 96,
                            "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2,
                            "n_shared_experts": 1, "first_k_dense_replace": 1}, "toy", "test")
    assert (ds.dense_layers, ds.moe.layers, ds.moe.shared_intermediate) == (1, 3, 32)
    qwen2moe = model_from_config({"architectures": ["Qwen2MoeForCausalLM"], "num_hidden_layers": 2, "hidden_size": 8,
                                  "num_attention_heads": 2, "vocab_size": 10, "moe_intermediate_size": 4,
                                  "num_experts": 4, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 16},
                                 "toy", "test")
    assert qwen2moe.moe == MoE(4, 2, 4, 16, 2)


@pytest.mark.parametrize("cfg, field, value", [
    ({"hidden_size": 8}, "parameter", "architectures"),
    ({"architectures": ["GPT2LMHeadModel"]}, "architecture", "GPT2LMHeadModel"),
    ({"architectures": ["LlamaForCausalLM"], "hidden_size": 8}, "parameter", "num_hidden_layers"),
    ({"architectures": ["KimiK25ForConditionalGeneration"]}, "parameter", "text_config"),
    ({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
      "vocab_size": 10, "intermediate_size": 16, "quantization_config": {"quant_method": "bitnet"}},
     "value", "bitnet"),
])
def test_unreadable_configs_are_one_clear_error(cfg, field, value):
    with pytest.raises(PerfModelError) as err:
        model_from_config(cfg, "x", "test.json")
    assert getattr(err.value, field) == value


def test_quantisation_bytes_per_weight():
    assert storage_from_config({}, {"quant_method": "fp8", "weight_block_size": [128, 128]}, "t").linear == \
        pytest.approx(1 + 4 / 128**2)
    assert storage_from_config({}, {"quant_method": "awq", "bits": 4, "group_size": 128}, "t").expert == \
        pytest.approx(0.5 + 2 / 128)
    assert storage_from_config({"torch_dtype": "float16"}, None, "t") == Storage()
    with pytest.raises(PerfModelError) as err:
        storage_from_config({"torch_dtype": "int3"}, None, "t")
    assert (err.value.parameter, err.value.value) == ("torch_dtype", "int3")


def test_stored_configs_cite_public_sources_and_load_errors_are_clear(tmp_path):
    for name in ("llama-3.1-8b-instruct", "qwen3-8b", "qwen3-30b-a3b", "llama-3-70b-instruct", "kimi-k2.5"):
        _, source = load_config(name)
        assert "https://" in source and "shared/" not in source and "FINDINGS" not in source
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(PerfModelError) as err:
        load_config(bad)
    assert (err.value.problem, err.value.path) == ("unreadable", bad)
    with pytest.raises(PerfModelError) as err:
        load_config(tmp_path / "missing.json")
    assert (err.value.problem, err.value.path) == ("not_found", tmp_path / "missing.json")


# ------------------------------------------------------------------------------------------------ rooflines
def test_weight_read_time_is_bytes_over_bandwidth():
    dep = llama8b()
    one = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(1, 1, 0))
    fast = forward_cost(dep.target, dep.hardware.with_("test", mem_bandwidth=2 * dep.hardware.mem_bandwidth), 1,
                        dep.engine, Pass(1, 1, 0))
    assert one.weights == pytest.approx(one.weight_bytes / (dep.hardware.mem_bandwidth *
                                                            dep.engine.bandwidth_efficiency))
    assert fast.weights == pytest.approx(one.weights / 2)
    fp8 = replace(dep.target, storage=Storage(linear=1.0, expert=1.0, lm_head=2.0))
    assert forward_cost(fp8, dep.hardware, 1, dep.engine, Pass(1, 1, 0)).weights < 0.55 * one.weights


def test_kv_read_time_grows_with_requests_and_context_and_splits_under_tp():
    dep = llama8b()
    kv = [forward_cost(dep.target, dep.hardware, tp, dep.engine, Pass(r, 1, c)).kv_cache
          for tp, r, c in ((1, 8, 1000), (1, 16, 1000), (1, 8, 2000), (2, 8, 1000))]
    assert kv[1] == pytest.approx(2 * kv[0], rel=0.01)
    assert kv[2] == pytest.approx(2 * kv[0], rel=0.01)
    assert kv[3] == pytest.approx(kv[0] / 2, rel=0.01)
    # a verify pass reads each request's cache once, however many tokens it verifies
    verify = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(8, 4, 1000))
    assert verify.kv_cache == pytest.approx(kv[0], rel=0.01)


def test_gemm_efficiency_is_monotone_in_tokens_and_halves_at_the_tile():
    engine = sglang_engine()
    values = [gemm_efficiency(t, engine) for t in (1, 4, 16, 64, 256, 1024, 4096)]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert gemm_efficiency(engine.tile_tokens, engine) == pytest.approx(engine.flops_efficiency / 2)
    assert values[-1] < engine.flops_efficiency
    with pytest.raises(PerfModelError):
        gemm_efficiency(0, engine)


def test_compute_roofline_takes_over_only_for_many_tokens():
    dep = llama8b()
    small = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(4, 1, 100))
    big = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(512, 4, 100))
    assert small.gemm_compute == 0  # 4 tokens: reading weights dominates
    assert big.gemm_compute > 0  # 2048 tokens: the tensor cores are the bound
    # compute time = 2 * params * (T + n_1/2) / (peak * efficiency): check through the excess
    peak = dep.hardware.peak_bf16_flops * dep.engine.flops_efficiency
    assert big.weights + big.gemm_compute == pytest.approx(big.gemm_flops / peak, rel=1e-9)


def test_moe_verify_reads_the_extra_experts_its_tokens_route_to():
    q = stored_model("qwen3-30b-a3b")
    hw, e = hardware_preset("h100-sxm"), sglang_engine()
    assert expected_distinct_experts(1, 128, 8) == pytest.approx(8)
    assert expected_distinct_experts(2, 4, 2) == pytest.approx(3)  # 4 * (1 - (1/2)^2)
    one = forward_cost(q, hw, 4, e, Pass(1, 1, 100))
    verify = forward_cost(q, hw, 4, e, Pass(1, 16, 100))
    extra = expected_distinct_experts(16, 128, 8) - 8
    assert verify.weight_bytes - one.weight_bytes == pytest.approx(48 * extra * q.expert_params(4) * 2.0, rel=1e-9)


def test_all_reduces_only_under_tp_and_launch_counts_layers():
    dep = llama8b()
    assert forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(1)).all_reduce == 0
    two = forward_cost(dep.target, dep.hardware, 2, dep.engine, Pass(1))
    # two per layer plus the embedding's, each timed on the link's measured curve (costmodel.collectives)
    assert two.all_reduce == pytest.approx((2 * 32 + 1) * allreduce_time(dep.hardware, dep.engine, 2, 4096 * 2, 1).seconds)
    assert two.all_reduce > 0
    assert kernel_count(dep.target, dep.engine) == 32 * 12 + 8
    assert kernel_count(kimi_k25(), dep.engine) == 1 * 12 + 60 * 17 + 61 * 5 + 8


def test_activation_traffic_is_linear_in_tokens():
    dep = llama8b()
    a = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(10, 1, 0)).activations
    b = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(20, 1, 0)).activations
    assert b == pytest.approx(2 * a)
    assert a >= 10 * 32 * ACT_HIDDEN_VECTORS * 4096 * 2 / (dep.hardware.mem_bandwidth * 0.85)


def test_pass_components_sum_to_the_total():
    dep = llama8b()
    cost = forward_cost(dep.target, dep.hardware, 1, dep.engine, Pass(64, 4, 1000, 4))
    assert sum(cost.breakdown().values()) == pytest.approx(cost.total_s)
    assert cost.gpu_work_s == pytest.approx(cost.total_s - cost.launch)


# ------------------------------------------------------------------------------------------------ the drafter
def test_drafter_attends_over_the_whole_context_and_eagle3_fc_runs_only_on_extend():
    dep = llama8b()
    d = dep.drafter
    assert (d.num_layers, d.head_vocab, d.attn_input, d.fc_input) == (1, 32000, 2 * 4096, 3 * 4096)
    short = spec_cycle(replace(dep, context=100), CHAIN, 32)
    long = spec_cycle(replace(dep, context=4000), CHAIN, 32)
    assert long.draft.kv_cache == pytest.approx(short.draft.kv_cache * 4000 / 100, rel=0.02)
    assert long.draft.kv_bytes > 0 and short.draft.weight_bytes == long.draft.weight_bytes
    cycle = spec_cycle(dep, CHAIN, 8)
    assert cycle.extend.weight_bytes - cycle.draft.weight_bytes == pytest.approx(d.fc_params() * 2, rel=0.01)
    e1 = eagle1_drafter(dep.target)
    assert e1.fc_every_pass and e1.head_vocab == dep.target.vocab


# ------------------------------------------------------------------------------------------------ cycles
def test_verify_tokens_follow_sglang():
    assert verify_tokens(speculative_flags(3, 1, 9)) == 4  # topk 1: num_steps + 1 whatever was asked
    assert verify_tokens(speculative_flags(3, 4, 21)) == 21
    with pytest.raises(PerfModelError) as err:
        verify_tokens(speculative_flags(3, 4, 40))
    assert (err.value.parameter, err.value.problem) == ("num_draft_tokens", "out_of_range")


def test_cycle_is_the_sum_of_its_parts():
    dep = llama8b()
    c = spec_cycle(dep, CHAIN, 16)
    assert c.draft_passes == CHAIN.num_steps - 1
    assert c.total_s == pytest.approx(sum(c.parts().values()))
    assert c.verify.tokens == 16 * 4 and c.extend.tokens == 16 * 4 and c.draft.tokens == 16


def test_cpu_work_hides_under_the_overlap_scheduler_but_not_in_a_speculative_cycle():
    dep = llama8b()
    sg = plain_step(dep, 8)
    assert sg.total_s == pytest.approx(max(sg.target.total_s, sg.cpu_s))
    vl = plain_step(replace(dep, engine=vllm_engine()), 8)
    assert vl.total_s == pytest.approx(vl.target.total_s + vl.cpu_s)
    c = spec_cycle(dep, CHAIN, 8)
    assert c.cpu_s == pytest.approx(dep.engine.cpu_step_s + 8 * dep.engine.cpu_per_request_s
                                    + dep.engine.spec_cpu_preps * dep.engine.cpu_forward_prep_s)
    # per-request CPU work grows the cycle with the batch
    assert spec_cycle(dep, CHAIN, 64).cpu_s - c.cpu_s == pytest.approx(56 * dep.engine.cpu_per_request_s)


def test_break_even_acceptance_is_where_the_speedup_crosses_one():
    dep = llama8b()
    for batch in (1, 16, 128):
        tau = break_even_accept_length(dep, CHAIN, batch)
        assert speedup(dep, CHAIN, batch, tau) == pytest.approx(1.0)
        assert speedup(dep, CHAIN, batch, min(4.0, tau + 0.1)) > 1 > speedup(dep, CHAIN, batch, max(1.0, tau - 0.1))
    # along the batch axis the speedup at fixed acceptance falls below 1 exactly where break-even passes it
    batches = [1, 8, 32, 64, 128, 256, 512]
    accept = 1.8
    for b in batches:
        assert (speedup(dep, CHAIN, b, accept) > 1) == (break_even_accept_length(dep, CHAIN, b) < accept)
    assert speedup(dep, CHAIN, 1, accept) > 1 > speedup(dep, CHAIN, 512, accept)


def test_acceptance_out_of_range_is_rejected():
    with pytest.raises(PerfModelError) as err:
        spec_tok_s(llama8b(), CHAIN, 1, 4.5)
    assert (err.value.parameter, err.value.problem) == ("accept_length", "out_of_range")


# ------------------------------------------------------------------------------------------------ calibration
def test_baseline_calibration_reproduces_the_measured_rate_and_refuses_impossible_ones():
    dep = calibrate_baseline(llama8b(), 140.0, "test")
    assert plain_step(dep, 1).tok_s == pytest.approx(140.0, rel=1e-9)
    assert "calibrated" in dep.engine.sources["kernel_overhead_s"]
    with pytest.raises(PerfModelError) as err:
        calibrate_baseline(llama8b(), 1e6, "test")
    assert err.value.problem == "below_model_floor"
    with pytest.raises(PerfModelError) as err:
        calibrate_baseline(llama8b(), 0.0, "test")
    assert (err.value.parameter, err.value.problem) == ("single_stream_tok_s", "not_positive")


def test_spec_and_acceptance_calibrations_reproduce_their_single_stream_numbers():
    dep = calibrate_baseline(llama8b(), 140.0, "test")
    fitted = calibrate_spec_extra(dep, CHAIN, 2.5, 250.0, "test")
    assert spec_tok_s(fitted, CHAIN, 1, 2.5) == pytest.approx(250.0, rel=1e-9)
    assert fitted.engine.spec_cycle_extra_s > 0
    with pytest.raises(PerfModelError) as err:
        calibrate_spec_extra(dep, CHAIN, 2.5, 1e5, "test")
    assert err.value.problem == "cycle_shorter_than_model"
    accept = calibrate_accept_length(dep, CHAIN, 1.7)
    assert speedup(dep, CHAIN, 1, accept) == pytest.approx(1.7)
    with pytest.raises(PerfModelError) as err:
        calibrate_accept_length(dep, CHAIN, 9.0)
    assert err.value.problem == "acceptance_out_of_range"


def test_predict_reports_points_notes_and_break_even():
    dep = llama8b()
    p = predict(dep, speculative_flags(3, 1, 6), 2.5, [64, 1, 8])
    assert [pt.batch for pt in p.points] == [1, 8, 64]
    assert p.num_draft_tokens == 4 and any("num_steps + 1" in n for n in p.notes)
    assert any("caps running requests at 48" in n for n in p.notes)
    for pt in p.points:
        assert pt.speedup == pytest.approx(pt.eagle3_tok_s / pt.baseline_tok_s)
        assert pt.speedup == pytest.approx(2.5 / pt.break_even_accept_length)
    assert p.break_even_single_stream == p.points[0].break_even_accept_length
    with pytest.raises(PerfModelError) as err:
        predict(dep, CHAIN, 2.5, [0])
    assert err.value.parameter == "batches"


# ------------------------------------------------------------------------------------------------ presets
def test_hardware_presets_exist_and_cite_public_datasheets_for_every_number():
    assert {"h100-sxm", "h200", "b200", "gb200", "mi300x", "mi325x", "mi355x", "rtx-pro-6000-blackwell"} <= set(HARDWARE)
    for name in HARDWARE:
        hw = hardware_preset(name)
        for key, source in hw.sources.items():
            assert "shared/" not in source and "FINDINGS" not in source
            assert "https://" in source or source.startswith(("assumption", "derived", "PCI-SIG", "the first point")), \
                (name, key)
    assert hardware_preset("h200").mem_bandwidth > hardware_preset("h100-sxm").mem_bandwidth
    with pytest.raises(PerfModelError) as err:
        hardware_preset("a100")
    assert (err.value.parameter, err.value.problem) == ("hardware", "unknown")
    assert f"known: {', '.join(sorted(HARDWARE))}" in str(err.value)  # the line lists the choices


def test_engine_constants_carry_their_justification():
    for engine in (sglang_engine(), vllm_engine()):
        assert all(str(v).strip() for v in engine.sources.values())
        assert not any("FINDINGS" in str(v) or "shared/" in str(v) for v in engine.sources.values())
    with pytest.raises(PerfModelError) as err:
        sglang_engine().with_("test", bandwidth_efficiency=1.5)
    assert err.value.problem == "out_of_range"
    with pytest.raises(PerfModelError) as err:
        sglang_engine().with_("test", bandwith=1.0)
    assert (err.value.problem, err.value.parameter) == ("unknown_parameter", "bandwith")


# ------------------------------------------------------------------------------------------------ the incident
def test_incident_flags_come_from_the_launch_spec():
    from eagle3lab.runtime.deployment import Models, server_spec
    from eagle3lab.runtime.profiles import load_profile

    profile = load_profile("blackwell-8x")
    models = Models(profile.target_model, profile.draft_model)  # flags only: no checkpoint needed on disk
    launch = server_spec(profile, models, speculative=True).speculative
    assert incident_spec() == launch
    assert "--speculative-num-steps" in server_spec(profile, models, speculative=True).argv()


def test_incident_prediction_is_calibrated_on_the_reported_rate_and_capped_under_speculation():
    pcie, h200 = predict_incident(accept_lengths=(1.0, 2.0, 4.0))
    assert pcie.single_stream_tok_s == pytest.approx(incident.SINGLE_STREAM.value, rel=1e-6)
    assert pcie.floor_single_stream_tok_s > pcie.single_stream_tok_s
    assert pcie.spec_max_batch == 48 < pcie.baseline_max_batch
    assert list(pcie.spec_peak_tok_s) == sorted(pcie.spec_peak_tok_s)
    assert h200.floor_single_stream_tok_s > pcie.floor_single_stream_tok_s  # 4.8 vs 1.79 TB/s, NVLink
    # the orchestration per cycle is fixed, so it weighs most at one request: the single-stream break-even need not be
    # the lowest; the one at the cap stays below the one at peak (the baseline still gains past the cap)
    assert 1 < pcie.break_even_single_stream < 4
    assert 1 < pcie.break_even_at_spec_max_batch < pcie.break_even_at_peak
    assert math.isfinite(pcie.baseline_peak_tok_s)


def test_break_even_at_peak_is_where_eagle3s_best_rate_meets_the_baselines():
    from eagle3lab.costmodel.perfmodel import plain_tok_s, predict_capacity_limited

    dep, spec = incident_deployment(), incident_spec()
    for cap in (None, 0):  # sglang's 48-request cap, and none (--max-running-requests set)
        p = predict_capacity_limited(dep, spec, 0.9, (2.0, 4.0), spec_max_running_requests=cap)
        assert spec_tok_s(dep, spec, p.spec_peak_batch, 1.0) * p.break_even_at_peak == \
            pytest.approx(p.baseline_peak_tok_s)
        assert p.baseline_peak_tok_s == pytest.approx(plain_tok_s(dep, p.baseline_peak_batch))
        best = max(range(1, p.spec_max_batch + 1), key=lambda b: spec_tok_s(dep, spec, b, 2.0))
        assert p.spec_peak_tok_s[0] == pytest.approx(spec_tok_s(dep, spec, best, 2.0))
        assert p.max_accept_length == spec.num_steps + 1
    capped = predict_capacity_limited(dep, spec, 0.9, (2.0,))
    free = predict_capacity_limited(dep, spec, 0.9, (2.0,), spec_max_running_requests=0)
    assert capped.spec_max_batch == 48 < free.spec_max_batch and free.break_even_at_peak < capped.break_even_at_peak


def test_the_context_matching_the_reported_peak_is_the_boundary_of_the_bisection():
    from eagle3lab.report.incident_model import _baseline_peak_at, context_matching_reported_peak

    match = context_matching_reported_peak()
    context = match["context_len"]
    assert _baseline_peak_at(context)[0] >= incident.PEAK.value > _baseline_peak_at(context + 1)[0]
    assert match["predicted"]["context_len"] == context and match["predicted"]["spec_max_batch"] == 48
    assert match["predicted_without_request_cap"]["spec_max_batch"] > 48
    assert context_matching_reported_peak(low=128, high=256) is None  # the reported peak lies outside


def test_sensitivity_labels_are_made_from_the_values_changed():
    from eagle3lab.report.incident_model import INCIDENT_VARIATIONS, describe_change, incident_sensitivity

    assert describe_change({}) == "as stated"
    assert describe_change({"allreduce_latency_s": 15e-6, "context_len": 512}) == \
        "all-reduce latency 15 us, context 512 tokens"
    assert describe_change({"spec_max_running_requests": 0}).startswith("no request cap")
    assert all(describe_change(change) == name for name, change in INCIDENT_VARIATIONS.items())
    rows = incident_sensitivity({"x": {"spec_max_running_requests": 0}})
    assert rows[0]["changed"] == {"spec_max_running_requests": 0} and rows[0]["spec_max_batch"] > 48


def test_incident_verify_touches_many_more_experts_than_a_plain_step():
    dep = incident_deployment()
    plain = plain_step(dep, 1).target
    verify = spec_cycle(dep, incident_spec(), 1).verify
    assert verify.distinct_experts == pytest.approx(expected_distinct_experts(4, 384, 8))
    # why verifying 4 tokens is far from free on this MoE: ~31 distinct experts per layer instead of 8
    m = dep.target
    expert_bytes = m.moe.layers * m.expert_params(8) * m.storage.expert
    assert verify.weight_bytes - plain.weight_bytes == pytest.approx((verify.distinct_experts - 8) * expert_bytes)
    assert verify.weight_bytes > 1.6 * plain.weight_bytes


def test_sensitivity_moves_the_way_the_physics_says():
    from eagle3lab.report.incident_model import incident_sensitivity

    rows = {r["variation"]: r for r in incident_sensitivity(
        {"base": {}, "slower all-reduce": {"allreduce_latency_s": 60e-6}, "longer context": {"context_len": 2048},
         "costlier cycle": {"spec_cycle_extra_s": 3e-3}}, accept_lengths=(3.0,))}
    assert rows["longer context"]["baseline_max_batch"] < rows["base"]["baseline_max_batch"]
    assert rows["costlier cycle"]["break_even_single_stream"] > rows["base"]["break_even_single_stream"]
    assert all(r["single_stream_tok_s"] == pytest.approx(incident.SINGLE_STREAM.value, rel=1e-6)
               for r in rows.values())
    with pytest.raises(PerfModelError) as err:
        incident_sensitivity({"typo": {"bandwith": 1.0}})
    assert (err.value.problem, err.value.parameter) == ("unknown_parameter", "bandwith")


def test_incident_report_is_json_keeps_reported_apart_and_cites_nothing_outside_the_repo():
    import json

    from eagle3lab.report.incident_model import incident_report

    text = json.dumps(incident_report())
    report = json.loads(text)
    assert {r["kind"] for r in report["reported"]} == {"reported"}
    assert report["side_by_side"]["peak_tok_s"]["reported"] == incident.PEAK.value
    assert "FINDINGS" not in text and "shared/" not in text
    assert report["predicted"]["rtx_pro_6000_x8"]["spec_max_batch"] == 48
    assert kimi_k25_eagle3_drafter().head_vocab == 32000


def test_incident_cycle_breakdown_is_consistent_with_the_cycle():
    from eagle3lab.report.incident_model import incident_cycle_breakdown

    rows = incident_cycle_breakdown(batches=(1, 48))
    for row in rows:
        parts = sum(v for k, v in row.items() if k.startswith("cycle_") and k.endswith("_ms") and k != "cycle_ms")
        assert parts == pytest.approx(row["cycle_ms"])
        assert row["cycle_over_plain_step"] == pytest.approx(row["cycle_ms"] / row["plain_step_ms"])
        assert row["verify_distinct_experts_per_layer"] > row["plain_distinct_experts_per_layer"]
    assert rows[0]["cycle_over_plain_step"] == pytest.approx(break_even_accept_length(
        incident_deployment(), incident_spec(), 1))


def test_run_break_even_for_a_profile_is_calibrated_on_its_own_measurement():
    from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
    from eagle3lab.bench.sweep import ARM_MEASURED, ArmResult, BenchReport, PointResult
    from eagle3lab.report.run_model import run_break_even, run_deployment
    from eagle3lab.runtime.profiles import load_profile

    def arm(name, concurrencies, step_s):
        points = []
        for conc in concurrencies:
            records = [RequestRecord(request_id=f"{name}{conc}-{i}", concurrency=conc, phase="measure", ok=True,
                                     t_scheduled=0.0, t_sent=0.0, token_times=[0.05 + k * step_s for k in range(9)],
                                     t_end=0.05 + 8 * step_s, prompt_len=32, prompt_tokens=32, completion_tokens=9,
                                     finish_reason="length") for i in range(conc)]
            points.append(PointResult(conc, "ok", None, compute_point_metrics(records), None, conc, 0, 0, True, "now"))
        return ArmResult(name=name, status=ARM_MEASURED, kind=name, points=points)

    report = BenchReport.create("cpu", [arm("baseline", (1, 4), 0.02), arm("eagle3", (1, 4), 0.04)])
    cpu = load_profile("cpu")
    dep, where = run_deployment(cpu, report, mem_bandwidth=5e9)
    assert plain_step(dep, 1).total_s == pytest.approx(0.02, rel=1e-6) and "measured" in where
    value, where = run_break_even(cpu, report, mem_bandwidth=5e9)
    assert value == pytest.approx(break_even_accept_length(dep, speculative_flags(
        cpu.speculative_num_steps, cpu.speculative_eagle_topk, cpu.speculative_num_draft_tokens), 4))
    assert "at 4 requests" in where and value > 1
    gpu_value, gpu_where = run_break_even(load_profile("blackwell-8x"))
    assert "reported 63.6" in gpu_where and 1 < gpu_value < 4
    with pytest.raises(PerfModelError) as err:
        run_deployment(cpu, BenchReport.create("cpu", [arm("baseline", (2,), 0.02)]), mem_bandwidth=5e9)
    assert (err.value.problem, err.value.parameter) == ("no_single_stream", "bench_concurrency")


def test_drafter_from_its_own_config():
    from eagle3lab.costmodel.perfmodel import drafter_from_config
    from eagle3lab.runtime.tinymodel.configs import draft_config

    d = drafter_from_config(draft_config(4), "tiny")
    assert (d.hidden, d.num_heads, d.num_kv_heads, d.head_dim, d.head_vocab) == (64, 4, 2, 16, 1024)
    assert d.attn_input == 128 and d.fc_input == 3 * 64
    with pytest.raises(PerfModelError) as err:
        drafter_from_config({"architectures": ["LlamaForCausalLM"]}, "x")
    assert (err.value.problem, err.value.parameter) == ("not_a_drafter", "architectures")


# ------------------------------------------------------------------ architectures users run EAGLE-3 on (issue 18.5)
@pytest.mark.parametrize("name, billions, moe_layers, dense_layers", [
    ("gpt-oss-120b", 117, 36, 0), ("gpt-oss-20b", 21, 24, 0), ("glm-4.5-air", 106, 45, 1), ("glm-4.6", 355, 89, 3),
    ("llama-4-scout", 109, 48, 0), ("llama-4-maverick", 400, 24, 24), ("minimax-m2", 230, 62, 0)])
def test_new_stored_configs_match_their_published_sizes_and_layouts(name, billions, moe_layers, dense_layers):
    from eagle3lab.costmodel.presets import load_config, stored_model

    m = stored_model(name)
    assert m.total_params() / 1e9 == pytest.approx(billions, rel=0.04)
    assert (m.moe.layers, m.dense_layers) == (moe_layers, dense_layers)
    assert load_config(name)[1].startswith("https://huggingface.co/")


def test_gpt_oss_experts_are_mxfp4_and_sliding_layers_read_only_their_window():
    from eagle3lab.costmodel.arch import MXFP4_BYTES
    from eagle3lab.costmodel.presets import stored_model

    m = stored_model("gpt-oss-120b")
    assert m.storage.expert == MXFP4_BYTES and m.storage.linear == 2.0 and m.storage.lm_head == 2.0
    assert m.sliding_layers == 18 and m.sliding_window == 128
    assert m.effective_context(100) == 100  # inside the window every layer reads everything
    assert m.effective_context(4096) == pytest.approx((18 * 4096 + 18 * 128) / 36)
    hw, eng = hardware_preset("h100-sxm"), engine_preset("sglang-0.5")
    short = forward_cost(m, hw, 1, eng, Pass(1, 1, 128)).kv_bytes
    long = forward_cost(m, hw, 1, eng, Pass(1, 1, 128 + 1000)).kv_bytes
    assert long - short == pytest.approx(1000 * m.kv_bytes_per_token(1) * 18 / 36)  # only full layers grow


def test_unknown_architecture_is_one_clear_refusal():
    from eagle3lab.errors import UnsupportedArchitectureError

    with pytest.raises(UnsupportedArchitectureError) as err:
        model_from_config({"architectures": ["FooForCausalLM"], "num_hidden_layers": 1}, source="x")
    assert err.value.architecture == "FooForCausalLM" and "GptOssForCausalLM" in err.value.supported


def test_incident_break_even_update_shows_how_the_break_evens_moved_with_provenance():
    """Old (no orchestration) vs new (frozen orchestration): the new cycle costs more, so every break-even rises by
    exactly what the engine terms add; verdicts are made from the numbers; the CPU entry says whether measured."""
    from eagle3lab.costmodel.validation import load_dataset
    from eagle3lab.report.incident_model import incident_break_even_update

    d = incident_break_even_update()
    frozen = load_dataset().protocol.current  # the newest freeze is what the model predicts with
    assert d["old"]["spec_cycle_extra_s"] == 0.0
    assert d["new"]["spec_cycle_extra_s"] == frozen.engines["sglang-0.5"]["spec_cycle_extra_s"]
    assert d["new"]["spec_tp_extra_s"] == frozen.engines["sglang-0.5"].get("spec_tp_extra_s", 0.0)
    assert frozen.date in d["new"]["provenance"] and frozen.date in d["new"]["engine_sources"]["spec_cycle_extra_s"]
    for key, moved in d["moved"].items():
        assert moved == pytest.approx(d["new"][key] - d["old"][key]) and moved > 0
    for label in ("old", "new"):
        assert f"{d[label]['break_even_single_stream']:.2f}" in d[label]["verdict"]["single_stream"]
        assert f"{d[label]['break_even_at_peak']:.2f}" in d[label]["verdict"]["at_peak"]
    assert d["measured_cpu_cycle"]["status"] in ("measured", "not measured")
    json.dumps(d)


def test_every_cycle_parameter_has_a_value_and_a_source():
    from eagle3lab.costmodel.cycle import cycle_parameters

    dep = incident_deployment()
    rows = {r["parameter"]: r for r in cycle_parameters(dep, incident_spec())}
    assert all(str(r["source"]).strip() for r in rows.values())
    assert rows["drafter head vocabulary (draft_vocab_size)"]["value"] == 32000
    assert rows["verify tokens per request (tree size)"]["value"] == incident_spec().verify_tokens
    assert rows["draft forwards per cycle"]["value"] == incident_spec().num_steps - 1


def test_the_incident_is_predicted_with_the_validated_engine_and_the_old_model_is_a_sensitivity_row():
    """The report's verdict rests on the constants the newest held-out set was scored with; dropping the
    orchestration in the sensitivity table gives back exactly the model before it (the update's ``old``)."""
    from eagle3lab.costmodel.validation import load_dataset
    from eagle3lab.report.incident_model import incident_break_even_update, incident_sensitivity

    frozen = load_dataset().protocol.current.engines["sglang-0.5"]
    engine = incident_deployment().engine
    assert engine.spec_cycle_extra_s == frozen["spec_cycle_extra_s"]
    assert engine.spec_tp_extra_s == frozen.get("spec_tp_extra_s", 0.0)
    none = {"spec_cycle_extra_s": 0.0, "spec_step_extra_s": 0.0, "spec_tp_extra_s": 0.0}
    rows = {r["variation"]: r for r in incident_sensitivity({"stated": {}, "none": none, "no tp": {"spec_tp_extra_s": 0.0}})}
    update = incident_break_even_update()
    for key in ("break_even_single_stream", "break_even_at_spec_max_batch", "break_even_at_peak"):
        assert rows["stated"][key] == pytest.approx(update["new"][key])
        assert rows["none"][key] == pytest.approx(update["old"][key])
        if engine.spec_tp_extra_s:
            assert rows["none"][key] < rows["no tp"][key] < rows["stated"][key]


def test_the_tp_term_condition_says_when_the_incident_extrapolates():
    from eagle3lab.report.incident_model import incident_setup, tp_term_condition

    cond = tp_term_condition()
    assert cond["incident_tp"] == incident_setup().tp == 8
    assert cond["fitted_tp"] and cond["extrapolated"] == (not min(cond["fitted_tp"]) <= 8 <= max(cond["fitted_tp"]))
    assert cond["per_cycle_at_incident_tp_ms"] == pytest.approx(cond["spec_tp_extra_ms"] * 7)


def test_host_work_per_running_request_grows_every_pass_by_its_layers_and_calibration_still_holds():
    """A measured per-request per-layer term (the CPU harness's torch_native attention loops over the batch's
    sequences): each pass pays requests x layers x term, the target's 12 layers and the drafter's one alike; the
    single-stream calibration still reproduces its measured step, and the term makes larger batches slower."""
    from eagle3lab.costmodel.forward import forward_cost
    from eagle3lab.costmodel.perfmodel import calibrate_baseline, plain_step, plain_tok_s
    from eagle3lab.report.run_model import run_models
    from eagle3lab.costmodel.presets import cpu_hardware
    from eagle3lab.runtime.profiles import load_profile

    target, drafter = run_models(load_profile("cpu"))
    plain = sglang_engine()
    host = plain.with_("measured here: test", pass_per_request_layer_s=0.1e-3)
    for arch in (target, drafter):
        with_host = forward_cost(arch, cpu_hardware(5e9), 1, host, Pass(4, 1, 48, 1))
        without = forward_cost(arch, cpu_hardware(5e9), 1, plain, Pass(4, 1, 48, 1))
        assert with_host.per_request_host == pytest.approx(4 * arch.num_layers * 0.1e-3)
        assert with_host.total_s - without.total_s == pytest.approx(with_host.per_request_host)
    deps = [calibrate_baseline(Deployment(target, drafter, cpu_hardware(5e9), 1, engine, 48), 50.0, "test")
            for engine in (plain, host)]
    assert [plain_step(d, 1).total_s for d in deps] == pytest.approx([0.02, 0.02])
    assert plain_tok_s(deps[1], 4) < plain_tok_s(deps[0], 4)
    with pytest.raises(PerfModelError, match="pass_per_request_layer_s has no source"):
        replace(plain, pass_per_request_layer_s=1e-4)
