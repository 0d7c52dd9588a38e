"""Tiny configs of other multimodal wrappers, for the capture check of the generated delegation fixes.

One per inner-model family the fixes are verified on: LLaVA over Qwen2 (``LlavaQwenForCausalLM``), LLaVA over
Llama (``LlavaLlamaForCausalLM``) and Kimi-VL over DeepSeek-V2 (``KimiVLForConditionalGeneration``). Each has the
text shape of the tiny Kimi-K2.5 target (hidden 64, vocabulary 1024, ``num_layers`` decoder layers), so the tiny
EAGLE-3 drafter (three aux layer ids) fits all of them. Only ``config.json`` is written: the check loads them with
sglang's own ``--load-format dummy`` loader, since these wrappers' checkpoints would need a tensor list each.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from eagle3lab.atomic import building_dir
from eagle3lab.errors import TinyModelError
from eagle3lab.paths import cache_dir
from eagle3lab.runtime.tinymodel.configs import BOS_ID, EOS_ID, HIDDEN_SIZE, MEDIA_PAD_ID, VOCAB_SIZE, text_config

WRAPPER_VERSION = "1"


def _dense_text(model_type: str, num_layers: int) -> dict[str, Any]:
    """A Llama/Qwen2-shaped decoder of the tiny target's width."""
    return {
        "model_type": model_type, "vocab_size": VOCAB_SIZE, "hidden_size": HIDDEN_SIZE, "intermediate_size": 128,
        "num_hidden_layers": num_layers, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "hidden_act": "silu", "max_position_embeddings": 4096, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
        "attention_dropout": 0.0, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": num_layers,
        "initializer_range": 0.02, "tie_word_embeddings": False, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID,
        "torch_dtype": "bfloat16",
    }


def _llava(architecture: str, model_type: str, num_layers: int) -> dict[str, Any]:
    """LLaVA-NeXT style: the wrapper hands its top-level config to the inner model, so the text fields sit both
    at the top level and in ``text_config``; the CLIP tower is only built from a checkpoint (load_weights)."""
    text = _dense_text(model_type, num_layers)
    return {
        **{k: v for k, v in text.items() if k != "model_type"},
        "architectures": [architecture],
        "model_type": "llava",
        "text_config": text,
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14,
                          "projection_dim": 32},
        "mm_hidden_size": 32,
        "mm_vision_tower": "openai/clip-vit-large-patch14-336",  # read only by load_weights, never with dummy
        "mm_projector_type": "mlp2x_gelu",
        "image_token_index": VOCAB_SIZE - 24,
        "projector_hidden_act": "gelu",
    }


def llava_qwen(num_layers: int) -> dict[str, Any]:
    return _llava("LlavaQwenForCausalLM", "qwen2", num_layers)


def llava_llama(num_layers: int) -> dict[str, Any]:
    return _llava("LlavaLlamaForCausalLM", "llama", num_layers)


def kimi_vl(num_layers: int) -> dict[str, Any]:
    """Kimi-VL: a one-block MoonViT tower over the tiny target's DeepSeek text model (MLA + MoE)."""
    text = copy.deepcopy(text_config(num_layers))
    text.update({"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2"})
    return {
        "architectures": ["KimiVLForConditionalGeneration"], "model_type": "kimi_vl", "text_config": text,
        "vision_config": {"model_type": "moonvit", "patch_size": 14, "init_pos_emb_height": 8,
                          "init_pos_emb_width": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
                          "hidden_size": 32, "intermediate_size": 64, "merge_kernel_size": [2, 2]},
        "media_placeholder_token_id": MEDIA_PAD_ID, "pad_token_id": 0, "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }


# entry class -> config builder; the inner attribute and the patch come from the audit, not from here
WRAPPER_CONFIGS: dict[str, Callable[[int], dict[str, Any]]] = {
    "LlavaQwenForCausalLM": llava_qwen,
    "LlavaLlamaForCausalLM": llava_llama,
    "KimiVLForConditionalGeneration": kimi_vl,
}


def build_wrapper_model(entry: str, num_layers: int = 4, cache_root: Path | None = None) -> Path:
    """A folder with the tiny ``config.json`` of ``entry``, built once into the cache (atomically)."""
    if entry not in WRAPPER_CONFIGS:
        raise TinyModelError(f"no tiny config for {entry}; known: {', '.join(sorted(WRAPPER_CONFIGS))}",
                             parameter="entry", value=entry, problem="unknown")
    config = WRAPPER_CONFIGS[entry](num_layers)
    key = hashlib.sha256(json.dumps({"v": WRAPPER_VERSION, "config": config}, sort_keys=True).encode()).hexdigest()
    base = Path(cache_root) if cache_root is not None else cache_dir("wrapper-models")
    root = base / f"{entry}-{key[:12]}"
    if (root / "config.json").is_file():
        return root
    with building_dir(root) as staging:
        (staging / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    return root
