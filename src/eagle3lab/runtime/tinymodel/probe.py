"""Run in a subprocess: instantiate the real model classes on the meta device and print checkpoint tensor specs.

Why a subprocess: sglang's layers need its global server args and a (one-process, gloo) distributed group before
they can even be constructed; doing that in the caller (a notebook kernel, a test) would leave global state behind.
Why the real classes: the tiny checkpoint must carry exactly the tensors the real loader expects, derived from the
installed sglang/transformers instead of a hand-kept list that drifts.

Specs (default): stdin {"target": <config.json dict>, "draft": <config.json dict>}; stdout, last line:
{"target": {name: [shape, dtype]}, "draft": {...}} in Hugging Face checkpoint naming.
Verify (``verify <model root> [tensor names to leave out ...]``): build both models on CPU with every parameter NaN,
run sglang's own ``load_weights`` over the checkpoint, print {"target": [params still NaN], "draft": [...]}.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from eagle3lab.childjson import emit
from eagle3lab.runtime.server import free_port

Specs = dict[str, tuple[list[int], str]]


def _init_sglang_single_process() -> None:
    """The minimum of sglang's global state that layer constructors read (default ServerArgs, tp=1 on gloo)."""
    from sglang.srt.distributed import init_distributed_environment, initialize_model_parallel
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    args = ServerArgs.__new__(ServerArgs)  # defaults only: __post_init__ would probe the model path and hardware
    for field in dataclasses.fields(ServerArgs):
        if field.default is not dataclasses.MISSING:
            setattr(args, field.name, field.default)
        elif field.default_factory is not dataclasses.MISSING:
            setattr(args, field.name, field.default_factory())
    args.device = "cpu"
    set_global_server_args_for_scheduler(args)
    init_distributed_environment(backend="gloo", world_size=1, rank=0, local_rank=0,
                                 distributed_init_method=f"tcp://127.0.0.1:{free_port()}")
    initialize_model_parallel(tensor_model_parallel_size=1)


def _spec(tensor: torch.Tensor) -> tuple[list[int], str]:
    return list(tensor.shape), str(tensor.dtype).removeprefix("torch.")


def language_model_specs(text_config: dict[str, Any]) -> Specs:
    """The HF DeepSeek-V3 state dict (``model.layers.N.self_attn.q_a_proj.weight``, per-expert MLPs, ...)."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    with torch.device("meta"):
        model = DeepseekV3ForCausalLM(DeepseekV3Config(**text_config))
    return {name: _spec(t) for name, t in model.state_dict().items()}


# sglang's KimiK25ForConditionalGeneration.load_weights renames HF vision names to its modules; invert it.
_VISION_SGLANG_TO_HF = (("attn.qkv_proj.", "wqkv."), ("attn.proj.", "wo."), ("linear_1.", "proj.0."),
                        ("linear_2.", "proj.2."))


def vision_specs(vision_config: dict[str, Any]) -> Specs:
    """sglang's own MoonViT tower and projector, under the HF names (``vision_tower.*``, ``mm_projector.*``)."""
    from sglang.srt.configs.kimi_k25 import KimiK25VisionConfig
    from sglang.srt.models.kimi_k25 import K2VLMultiModalProjector, MoonViT3dPretrainedModel

    config = KimiK25VisionConfig(**vision_config)
    with torch.device("meta"):
        parts = {"vision_tower": MoonViT3dPretrainedModel(config), "mm_projector": K2VLMultiModalProjector(config)}
    specs: Specs = {}
    for prefix, module in parts.items():
        for name, tensor in module.named_parameters():
            for ours, theirs in _VISION_SGLANG_TO_HF:
                name = name.replace(ours, theirs)
            specs[f"{prefix}.{name}"] = _spec(tensor)
    return specs


def target_specs(config: dict[str, Any]) -> Specs:
    """Every tensor of the Kimi-K2.5 checkpoint: ``language_model.*``, ``vision_tower.*``, ``mm_projector.*``."""
    specs = {f"language_model.{k}": v for k, v in language_model_specs(config["text_config"]).items()}
    specs.update(vision_specs(config["vision_config"]))
    return specs


def draft_specs(config: dict[str, Any]) -> Specs:
    """sglang's LlamaForCausalLMEagle3 under the EAGLE-3 checkpoint names (``midlayer.*``, ``fc``, ``d2t``, ...).

    Inverts load_weights' stacked mapping (q/k/v -> qkv_proj, gate/up -> gate_up_proj) and its ``model.`` prefix,
    and adds the vocabulary maps it reads (``d2t``: draft id -> target id offset; ``t2d``: target id in draft vocab).
    """
    from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
    from transformers import LlamaConfig

    hf_config = LlamaConfig(**config)
    with torch.device("meta"):
        model = LlamaForCausalLMEagle3(hf_config)
    head_dim = config["head_dim"]
    q_rows = config["num_attention_heads"] * head_dim
    kv_rows = config["num_key_value_heads"] * head_dim
    specs: Specs = {}
    for name, tensor in model.named_parameters():
        name = name.removeprefix("model.")
        shape, dtype = _spec(tensor)
        if ".qkv_proj." in name:
            for part, rows in (("q_proj", q_rows), ("k_proj", kv_rows), ("v_proj", kv_rows)):
                specs[name.replace("qkv_proj", part)] = ([rows, *shape[1:]], dtype)
        elif ".gate_up_proj." in name:
            for part in ("gate_proj", "up_proj"):
                specs[name.replace("gate_up_proj", part)] = ([shape[0] // 2, *shape[1:]], dtype)
        else:
            specs[name] = (shape, dtype)
    specs["d2t"] = ([config["draft_vocab_size"]], "int64")
    specs["t2d"] = ([config["vocab_size"]], "bool")
    return specs


def unloaded_parameters(root: str, leave_out: Sequence[str] = ()) -> dict[str, list[str]]:
    """Parameters that sglang's real ``load_weights`` does not fill from the tiny checkpoint (should be none)."""
    from types import SimpleNamespace

    from safetensors.torch import load_file
    from sglang.srt.configs.kimi_k25 import KimiK25Config
    from sglang.srt.layers.dp_attention import initialize_dp_attention
    from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration
    from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
    from sglang.srt.server_args import get_global_server_args
    from transformers import LlamaConfig

    parts = {"target": (KimiK25ForConditionalGeneration, KimiK25Config), "draft": (LlamaForCausalLMEagle3, LlamaConfig)}
    report: dict[str, list[str]] = {}
    for part, (model_class, config_class) in parts.items():
        config = config_class(**json.loads((Path(root) / part / "config.json").read_text(encoding="utf-8")))
        if part == "target":
            initialize_dp_attention(get_global_server_args(),
                                    SimpleNamespace(hidden_size=config.hidden_size, dtype=torch.bfloat16))
        model = model_class(config)
        with torch.no_grad():
            for param in model.parameters():
                param.fill_(float("nan"))
        tensors = load_file(str(Path(root) / part / "model.safetensors"))
        model.load_weights([(name, t) for name, t in tensors.items() if name not in leave_out])
        report[part] = sorted(n for n, p in model.named_parameters() if torch.isnan(p.float()).any())
    return report


def main() -> None:
    _init_sglang_single_process()
    if sys.argv[1:2] == ["verify"]:
        result: dict[str, Any] = unloaded_parameters(sys.argv[2], sys.argv[3:])
    else:
        request = json.load(sys.stdin)
        result = {"target": target_specs(request["target"]), "draft": draft_specs(request["draft"])}
    emit(result)


if __name__ == "__main__":
    main()
