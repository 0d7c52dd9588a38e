"""The tiny Kimi-K2.5-shaped target and EAGLE-3 drafter: shape, naming, determinism, caching, loadability."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from safetensors import safe_open
from transformers import AutoTokenizer

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel import build_tiny_models, cache_key, scale_aux_layer_ids, tiny_model_inputs
from eagle3lab.runtime.tinymodel.configs import REAL_AUX_LAYER_IDS, REAL_NUM_LAYERS


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_tiny_models(cache_root=tmp_path_factory.mktemp("models"), seed=0, num_layers=4)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tensor_names(model_dir: Path) -> dict[str, str]:
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as handle:
        return {name: str(handle.get_slice(name).get_dtype()) for name in handle.keys()}  # noqa: SIM118 (safe_open is not a dict)


# --- aux layer ids ------------------------------------------------------------------------------------------

def test_aux_layer_ids_at_real_depth_are_the_real_drafters():
    assert scale_aux_layer_ids(REAL_NUM_LAYERS) == list(REAL_AUX_LAYER_IDS)


def test_aux_layer_ids_for_four_layers_match_the_verified_setup():
    assert scale_aux_layer_ids(4) == [0, 1, 2]  # the 4-layer tiny drafter sglang 0.5.9 accepted


@pytest.mark.parametrize("num_layers", range(4, 130))
def test_aux_layer_ids_are_distinct_increasing_and_capturable(num_layers):
    ids = scale_aux_layer_ids(num_layers)
    assert len(ids) == len(REAL_AUX_LAYER_IDS) and ids == sorted(set(ids))
    # sglang captures id i before layer i + 1, which must exist
    assert ids[0] >= 0 and ids[-1] + 1 <= num_layers - 1


@pytest.mark.parametrize("num_layers", range(5, 130))
def test_aux_layer_ids_leave_room_for_the_one_layer_early_set(num_layers):
    """sglang 0.5.9's CUDA-graph capture hands the drafter each state one layer early: ids - 1 must stay >= 0."""
    assert scale_aux_layer_ids(num_layers)[0] >= 1


def test_small_depths_give_the_documented_ids():
    assert [scale_aux_layer_ids(n) for n in (5, 6, 8)] == [[1, 2, 3], [1, 2, 4], [1, 4, 6]]


def test_too_shallow_target_is_one_line():
    with pytest.raises(TinyModelError) as err:
        build_tiny_models(num_layers=3)
    assert (err.value.problem, err.value.parameter, err.value.value) == ("too_shallow", "num_layers", 3)
    assert "\n" not in str(err.value)


def test_negative_seed_is_rejected():
    with pytest.raises(TinyModelError) as err:
        build_tiny_models(seed=-1)
    assert (err.value.parameter, err.value.value) == ("seed", -1)


def test_cache_key_follows_every_input():
    base = cache_key(tiny_model_inputs(seed=0, num_layers=4))
    assert cache_key(tiny_model_inputs(seed=0, num_layers=4)) == base
    assert cache_key(tiny_model_inputs(seed=1, num_layers=4)) != base
    assert cache_key(tiny_model_inputs(seed=0, num_layers=5)) != base


# --- the generated files ------------------------------------------------------------------------------------

def test_configs_are_kimi_k25_and_an_eagle3_drafter_reading_the_scaled_layers(built):
    target = json.loads((built.target_dir / "config.json").read_text())
    draft = json.loads((built.draft_dir / "config.json").read_text())
    assert target["architectures"] == ["KimiK25ForConditionalGeneration"] and target["model_type"] == "kimi_k25"
    text = target["text_config"]
    assert text["model_type"] == "deepseek_v3" and text["num_hidden_layers"] == built.num_layers == 4
    assert text["kv_lora_rank"] and text["q_lora_rank"] and text["n_routed_experts"] > text["num_experts_per_tok"]
    assert target["vision_config"]["vt_hidden_size"] == target["vision_config"]["hidden_size"]
    assert draft["architectures"] == ["LlamaForCausalLMEagle3"]
    assert draft["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == built.aux_layer_ids == [0, 1, 2]
    assert draft["hidden_size"] == text["hidden_size"] and draft["vocab_size"] == text["vocab_size"]


def test_checkpoint_uses_the_real_hf_naming(built):
    target = tensor_names(built.target_dir)
    prefixes = {name.split(".")[0] for name in target}
    assert prefixes == {"language_model", "vision_tower", "mm_projector"}
    assert "language_model.model.layers.1.mlp.experts.0.gate_proj.weight" in target  # per-expert, as on the hub
    assert "language_model.model.layers.0.self_attn.kv_a_proj_with_mqa.weight" in target
    assert any(".wqkv." in name for name in target) and not any("qkv_proj" in name for name in target)
    draft = tensor_names(built.draft_dir)
    assert {"fc.weight", "d2t", "t2d", "midlayer.self_attn.q_proj.weight", "midlayer.hidden_norm.weight"} <= set(draft)
    assert not any(name.startswith("model.") for name in draft)
    assert {dtype for name, dtype in draft.items() if name not in ("d2t", "t2d")} == {"BF16"}
    assert set(target.values()) == {"BF16"}


def test_tokenizer_has_inline_chat_template_and_the_media_token(built):
    config = json.loads((built.target_dir / "tokenizer_config.json").read_text())
    assert "chat_template" in config and "\n" not in config["chat_template"]
    assert not (built.target_dir / "chat_template.jinja").exists()
    tokenizer = AutoTokenizer.from_pretrained(str(built.target_dir))
    target = json.loads((built.target_dir / "config.json").read_text())
    assert tokenizer.convert_ids_to_tokens(target["media_placeholder_token_id"]) == "<|media_pad|>"
    assert tokenizer.eos_token_id == target["eos_token_id"] and len(tokenizer) == target["text_config"]["vocab_size"]
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "a b"}], tokenize=False,
                                             add_generation_prompt=True)
    assert "a b" in rendered and rendered.endswith("<|im_assistant|>")


def test_second_build_comes_from_the_cache(built):
    checkpoint = built.target_dir / "model.safetensors"
    mtime = checkpoint.stat().st_mtime_ns
    again = build_tiny_models(cache_root=built.target_dir.parents[1], seed=0, num_layers=4)
    assert again.cache_key == built.cache_key and again.build_seconds is None
    assert checkpoint.stat().st_mtime_ns == mtime and again.checkpoint_bytes == built.checkpoint_bytes


def test_same_seed_same_bytes_other_seed_other_bytes(built, tmp_path):
    twin = build_tiny_models(cache_root=tmp_path / "twin", seed=0, num_layers=4)
    assert sha256(twin.target_dir / "model.safetensors") == sha256(built.target_dir / "model.safetensors")
    assert sha256(twin.draft_dir / "model.safetensors") == sha256(built.draft_dir / "model.safetensors")
    other = build_tiny_models(cache_root=tmp_path / "other", seed=1, num_layers=4)
    assert other.cache_key != built.cache_key
    assert sha256(other.target_dir / "model.safetensors") != sha256(built.target_dir / "model.safetensors")


# --- sglang's real loader -----------------------------------------------------------------------------------

def unloaded(root: Path, leave_out: tuple[str, ...] = ()) -> dict[str, list[str]]:
    from eagle3lab.runtime.cpu_harness import cpu_environment

    from eagle3lab.childjson import ask_child

    answer = ask_child("eagle3lab.runtime.tinymodel.probe", ["verify", str(root), *leave_out],
                       env={**os.environ, **cpu_environment(shims=())}, timeout_s=600)
    assert answer.ok, answer.failure()
    return answer.payload


@pytest.mark.server
def test_sglang_load_weights_fills_every_parameter(built):
    """sglang's own KimiK25 / LlamaForCausalLMEagle3 load_weights, starting from all-NaN parameters."""
    assert unloaded(built.target_dir.parent) == {"target": [], "draft": []}


@pytest.mark.server
def test_the_loader_check_notices_a_missing_tensor(built):
    report = unloaded(built.target_dir.parent, ("language_model.model.norm.weight", "midlayer.hidden_norm.weight"))
    assert report == {"target": ["language_model.model.norm.weight"], "draft": ["model.midlayer.hidden_norm.weight"]}
