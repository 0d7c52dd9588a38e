"""Config dictionaries (config.json contents) of the tiny Kimi-K2.5-shaped target and its EAGLE-3 drafter.

The shapes keep every structural feature the bug and the harness touch: the multimodal wrapper
(``KimiK25ForConditionalGeneration``, model_type ``kimi_k25``), a DeepSeek-V3 text model with MLA (q/kv LoRA ranks,
rope/nope split, yarn) and MoE (a dense first layer, routed + shared experts, noaux_tc sigmoid routing), a MoonViT
vision tower with a patch-merger projector, and a one-layer ``LlamaForCausalLMEagle3`` drafter that reads three aux
hidden states of the target. Everything is tiny so that sglang loads and serves it on two CPU cores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eagle3lab.errors import TinyModelError

# The real deployment: Kimi-K2.5 has 61 decoder layers; AQ-MedAI/Kimi-K25-eagle3 reads layers [2, 30, 58].
REAL_NUM_LAYERS = 61
REAL_AUX_LAYER_IDS = (2, 30, 58)
MIN_LAYERS = 4  # three distinct capture points need ids 0..n-2 to hold at least three values

VOCAB_SIZE = 1024
HIDDEN_SIZE = 64
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_end|>",
                  "<|media_pad|>")
BOS_ID, EOS_ID = 1, 2
MEDIA_PAD_ID = SPECIAL_TOKENS.index("<|media_pad|>")


def scale_aux_layer_ids(
    num_layers: int, real_ids: Sequence[int] = REAL_AUX_LAYER_IDS, real_num_layers: int = REAL_NUM_LAYERS
) -> list[int]:
    """Scale the drafter's aux layer ids from the real depth to ``num_layers``, keeping them distinct and valid.

    sglang captures aux layer id ``i`` at the *input* of layer ``i + 1`` (``layers_to_capture = [i + 1 ...]`` in
    DeepseekV2ForCausalLM), so a usable id lies in ``0 .. num_layers - 2``. The ids are scaled linearly from the
    real span ``1 .. 59`` onto ``1 .. num_layers - 2`` and rounded, which keeps the real ids at 61 layers and keeps
    every id at least 1 where the depth allows: the set one layer early (what sglang 0.5.9's CUDA-graph capture
    hands the drafter) then stays capturable too. Collisions are pushed up to the next free id; a target too
    shallow for that is packed down against the last valid id (4 layers -> [0, 1, 2], 5 -> [1, 2, 3],
    6 -> [1, 2, 4], 8 -> [1, 4, 6]).
    """
    if num_layers < MIN_LAYERS:
        raise TinyModelError(f"num_layers={num_layers} is too shallow: the tiny target needs at least {MIN_LAYERS} "
                             f"layers for {len(real_ids)} distinct EAGLE-3 capture points", parameter="num_layers",
                             value=num_layers, problem="too_shallow")
    real_low, real_high, high = 1, real_num_layers - 2, num_layers - 2
    scaled: list[int] = []
    for real_id in sorted(real_ids):
        position = 1 + (real_id - real_low) * (high - 1) / (real_high - real_low)
        scaled.append(max(round(position), scaled[-1] + 1 if scaled else 0))
    if scaled[-1] > high:  # pushed past the end: pack the tail down against the last valid id
        scaled = [min(value, high - (len(scaled) - 1 - i)) for i, value in enumerate(scaled)]
    return scaled


def text_config(num_layers: int) -> dict[str, Any]:
    """DeepSeek-V3 text model (MLA + MoE), the ``text_config`` of the Kimi-K2.5 config."""
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": num_layers,
        "num_nextn_predict_layers": 0,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_shared_experts": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "routed_scaling_factor": 2.5,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "q_lora_rank": 32,
        "kv_lora_rank": 32,
        "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 16,
        "v_head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "torch_dtype": "bfloat16",
    }


def vision_config() -> dict[str, Any]:
    """A one-block MoonViT tower and patch-merger projector; ``vt_*`` mirror the sizes (the projector reads them)."""
    hidden, intermediate, heads, layers = 32, 64, 2, 1
    return {
        "patch_size": 14,
        "init_pos_emb_height": 8,
        "init_pos_emb_width": 8,
        "init_pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "merge_kernel_size": [2, 2],
        "video_attn_type": "spatial_temporal",
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": hidden,
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-5,
        "text_hidden_size": HIDDEN_SIZE,
        "vt_hidden_size": hidden,
        "vt_intermediate_size": intermediate,
        "vt_num_attention_heads": heads,
        "vt_num_hidden_layers": layers,
    }


def target_config(num_layers: int) -> dict[str, Any]:
    """config.json of the tiny ``KimiK25ForConditionalGeneration``."""
    scale_aux_layer_ids(num_layers)  # validates the depth
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "text_config": text_config(num_layers),
        "vision_config": vision_config(),
        "media_placeholder_token_id": MEDIA_PAD_ID,
        "pad_token_id": 0,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def check_aux_layer_ids(num_layers: int, ids: Sequence[int]) -> list[int]:
    """Explicit drafter ids (a profile's ``tiny_aux_layer_ids``): distinct, sorted, each in ``0 .. num_layers - 2``
    (sglang captures id ``i`` at the input of layer ``i + 1``)."""
    ids = list(ids)
    if len(set(ids)) != len(ids) or ids != sorted(ids) or not all(0 <= i <= num_layers - 2 for i in ids):
        raise TinyModelError(f"tiny_aux_layer_ids {ids} must be distinct, ascending and within 0..{num_layers - 2} "
                             f"for a {num_layers}-layer tiny target; fix the profile")
    return ids


def draft_config(num_layers: int, aux_layer_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """config.json of the tiny ``LlamaForCausalLMEagle3`` drafter for a target of ``num_layers`` layers; its aux
    ids are ``aux_layer_ids`` when given (checked), else the real drafter's scaled to this depth."""
    ids = check_aux_layer_ids(num_layers, aux_layer_ids) if aux_layer_ids is not None \
        else scale_aux_layer_ids(num_layers)
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "vocab_size": VOCAB_SIZE,
        "draft_vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "target_hidden_size": HIDDEN_SIZE,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rope_theta": 50000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "torch_dtype": "bfloat16",
        "eagle_config": {
            "eagle_aux_hidden_state_layer_ids": ids,
            "use_aux_hidden_state": True,
        },
    }
