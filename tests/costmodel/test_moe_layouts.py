"""gpt-oss and GLM-4.x MoE from their published config.json files (tests/costmodel/fixtures, sources in its README):
``predict --json`` answers, the layouts match the published sizes, sliding-window layers read only their window,
and anything else is still one line naming what is supported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3lab.commands.cli import main
from eagle3lab.costmodel.arch import MXFP4_BYTES, model_from_config
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.forward import Pass, forward_cost
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.costmodel.presets import hardware_preset
from eagle3lab.errors import PerfModelError

FIXTURES = Path(__file__).parent / "fixtures"
GPT_OSS = FIXTURES / "gpt-oss-120b"
GLM_AIR = FIXTURES / "GLM-4.5-Air"
PREDICT = ["predict", "--hardware", "h100-sxm", "--steps", "3", "--topk", "1", "--draft-tokens", "4",
           "--accept", "2.5", "--context", "4096", "--batch", "1,8,64", "--json"]


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _predict_json(capsys, config: str, tp: int) -> dict:
    assert main(PREDICT + ["--config", config, "--tp", str(tp)]) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------------------------------------ predict --json
@pytest.mark.parametrize("folder, tp", [(GPT_OSS, 1), (GLM_AIR, 4)])
def test_predict_json_on_the_published_configs_has_the_shape_of_a_dense_model(capsys, folder, tp):
    reference = _predict_json(capsys, "llama-3.1-8b-instruct", 1)
    data = _predict_json(capsys, str(folder), tp)
    assert set(data) == set(reference)
    assert [set(p) for p in data["points"]] == [set(p) for p in reference["points"]]
    assert data["model"] == folder.name and data["tp"] == tp
    assert [p["batch"] for p in data["points"]] == [1, 8, 64]
    for point in data["points"]:
        assert point["baseline_tok_s"] > 0 and point["eagle3_tok_s"] > 0
        assert point["speedup"] == pytest.approx(point["eagle3_tok_s"] / point["baseline_tok_s"])


def test_an_unknown_architecture_is_one_line_naming_it_and_the_new_layouts(tmp_path, capsys):
    cfg = {**_config(GLM_AIR), "architectures": ["Glm4vMoeForConditionalGeneration"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(PREDICT + ["--config", str(tmp_path), "--tp", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "Glm4vMoeForConditionalGeneration is not modelled" in err
    assert "GptOssForCausalLM" in err and "Glm4MoeForCausalLM" in err


# ------------------------------------------------------------------------------------------ published sizes
def test_gpt_oss_120b_has_its_published_parameter_counts_and_layout():
    m = model_from_config(_config(GPT_OSS), "gpt-oss-120b")
    assert m.total_params() == pytest.approx(116.8e9, rel=0.02)  # OpenAI: 116.8B total
    assert m.active_params() == pytest.approx(5.1e9, rel=0.03)  # 5.1B active, the unembedding counted
    assert (m.num_layers, m.dense_layers, m.moe.layers) == (36, 0, 36)
    assert (m.moe.n_experts, m.moe.top_k, m.moe.expert_intermediate, m.moe.shared_intermediate) == (128, 4, 2880, 0)
    assert (m.num_heads, m.num_kv_heads, m.head_dim) == (64, 8, 64)
    assert (m.sliding_layers, m.sliding_window) == (18, 128)
    # MXFP4 experts: 4 bits plus an 8-bit scale per 32 = 4.25 bits; attention, router, lm_head stay BF16 (the config
    # has no torch_dtype: BF16 is the default)
    assert m.storage.expert * 8 == 4.25 and m.storage.expert == MXFP4_BYTES
    assert (m.storage.linear, m.storage.lm_head) == (2.0, 2.0)
    # OpenAI: the MXFP4 checkpoint fits one 80 GB GPU; the same weights in BF16 would not
    unquantised = model_from_config({k: v for k, v in _config(GPT_OSS).items() if k != "quantization_config"})
    assert m.resident_weight_bytes(1) < 80e9 < unquantised.resident_weight_bytes(1)


def test_glm_45_air_has_its_published_parameter_counts_and_layout():
    m = model_from_config(_config(GLM_AIR), "GLM-4.5-Air")
    assert m.total_params() == pytest.approx(106e9, rel=0.02)  # Z.ai: 106B total (the MTP layer not counted)
    assert m.active_params() - m.lm_head_params(1) == pytest.approx(12e9, rel=0.03)  # 12B active, no lm_head
    assert (m.num_layers, m.dense_layers, m.moe.layers) == (46, 1, 45)
    assert (m.moe.n_experts, m.moe.top_k, m.moe.expert_intermediate, m.moe.shared_intermediate) == (128, 8, 1408, 1408)
    assert m.dense_intermediate == 10944
    # explicit head_dim: 96 heads of 128 (12288 wide) on a 4096-wide stream, 8 KV heads
    assert (m.num_heads, m.num_kv_heads, m.head_dim) == (96, 8, 128)
    assert m.kv_bytes_per_token(1) == 46 * 2 * 8 * 128 * 2
    assert m.sliding_layers == 0 and m.effective_context(100_000) == 100_000


def test_glm_fp8_checkpoint_stores_about_one_byte_per_weight():
    fp8 = {**_config(GLM_AIR), "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
                                                        "fmt": "e4m3", "weight_block_size": [128, 128]}}
    bf16, m = model_from_config(_config(GLM_AIR)), model_from_config(fp8)
    assert m.storage.expert == m.storage.linear == pytest.approx(1.0, abs=1e-3) and m.storage.lm_head == 2.0
    assert 0.5 < m.resident_weight_bytes(4) / bf16.resident_weight_bytes(4) < 0.51
    assert m.total_params() == bf16.total_params()


# ---------------------------------------------------------------------------------------- sliding windows
def _all_full_attention(cfg: dict) -> dict:
    return {**cfg, "layer_types": ["full_attention"] * cfg["num_hidden_layers"]}


def test_sliding_window_layers_read_less_kv_per_token_at_long_context():
    cfg = _config(GPT_OSS)
    swa, full = model_from_config(cfg), model_from_config(_all_full_attention(cfg))
    assert full.sliding_layers == 0
    assert swa.kv_bytes_per_token(1) == full.kv_bytes_per_token(1)  # the same cache layout per layer
    long = 32768
    per_token_swa = swa.kv_read_bytes(1, long) / long
    per_token_full = full.kv_read_bytes(1, long) / long
    assert per_token_swa < per_token_full
    assert per_token_swa / per_token_full == pytest.approx((18 * long + 18 * 128) / (36 * long))
    assert swa.kv_read_bytes(1, 100) == full.kv_read_bytes(1, 100)  # inside the window nothing is skipped


def test_a_decode_step_at_long_context_is_cheaper_with_sliding_windows_and_the_same_inside_the_window():
    cfg = _config(GPT_OSS)
    swa, full = model_from_config(cfg), model_from_config(_all_full_attention(cfg))
    hw, eng = hardware_preset("h100-sxm"), engine_preset("sglang-0.5")
    a, b = (forward_cost(m, hw, 1, eng, Pass(16, 1, 32768)) for m in (swa, full))
    assert a.kv_bytes < b.kv_bytes and a.attention_flops < b.attention_flops
    configs = (cfg, _all_full_attention(cfg))
    args = ("h100-sxm", 1, 3, 1, 4, 2.5)
    long_swa, long_full = (predict_from_config(c, *args, 32768, [64]).points[0] for c in configs)
    assert long_swa.baseline_tok_s > long_full.baseline_tok_s
    short_swa, short_full = (predict_from_config(c, *args, 64, [64]).points[0] for c in configs)
    assert short_swa.baseline_tok_s == pytest.approx(short_full.baseline_tok_s)


@pytest.mark.parametrize("change, parameter, problem", [
    ({"sliding_window": None}, "sliding_window", "missing"),
    ({"layer_types": ["sliding_attention", "full_attention"] * 17}, "layer_types", "wrong_length"),
])
def test_a_sliding_window_config_that_cannot_be_read_is_one_clear_error(change, parameter, problem):
    with pytest.raises(PerfModelError) as err:
        model_from_config({**_config(GPT_OSS), **change}, source="x")
    assert (err.value.parameter, err.value.problem) == (parameter, problem)


def test_sglang_runs_glm_with_full_attention_whatever_its_config_says():
    """Only gpt-oss's sglang model reads layer_types; a GLM config listing sliding layers is still full attention."""
    cfg = {**_config(GLM_AIR), "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 23}
    assert model_from_config(cfg).sliding_layers == 0
