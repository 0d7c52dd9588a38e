"""The tiny target's greedy continuations and its aux hidden states, computed offline to train the drafter.

Why transformers: its ``DeepseekV3ForCausalLM`` is the public reference implementation of the text model inside
Kimi-K2.5, and the tiny checkpoint's ``language_model.*`` tensors load into it with nothing missing or left over.
Why the expert mixture is replaced: transformers loops over experts with index_add (about 1 s per decode step at
batch 1024 on 2 cores); a dense einsum over all 8 tiny experts, weighted by the same router, gives the same
values (a test checks it) in a fraction of the time.

Where the aux states come from: sglang captures drafter id ``i`` at the input of decoder layer ``i + 1``
(``layers_to_capture = [i + 1 for i in ids]`` in ``DeepseekV2ForCausalLM.set_eagle3_layers_to_capture``), i.e. the
residual stream after layer ``i``; that is transformers' ``hidden_states[i + 1]`` for ``i <= L - 2``.
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from eagle3lab.errors import TinyModelError

if TYPE_CHECKING:  # imported where it runs only: transformers costs seconds to import
    from transformers import DeepseekV3ForCausalLM

LANGUAGE_PREFIX = "language_model."


def _dense_experts(self, hidden_states: torch.Tensor, topk_indices: torch.Tensor,
                   topk_weights: torch.Tensor) -> torch.Tensor:
    """Drop-in for ``DeepseekV3MoE.moe``: every expert on every token, zero weight where the router said no."""
    gate, up, down = self._eagle3lab_stacked
    weights = torch.zeros(hidden_states.shape[0], gate.shape[0], dtype=topk_weights.dtype,
                          device=hidden_states.device).scatter_(1, topk_indices, topk_weights)
    inner = torch.nn.functional.silu(torch.einsum("td,eid->tei", hidden_states, gate))
    inner = inner * torch.einsum("td,eid->tei", hidden_states, up)
    out = torch.einsum("tei,edi->ted", inner, down)
    return (out * weights.unsqueeze(-1).to(out.dtype)).sum(1).to(hidden_states.dtype)


def vectorise_experts(model: DeepseekV3ForCausalLM) -> DeepseekV3ForCausalLM:
    """Swap every MoE layer's expert loop for the dense computation (in place; returns the model)."""
    for layer in model.model.layers:
        mlp = layer.mlp
        if hasattr(mlp, "experts"):
            mlp._eagle3lab_stacked = tuple(torch.stack([getattr(e, name).weight for e in mlp.experts]).detach()
                                           for name in ("gate_proj", "up_proj", "down_proj"))
            mlp.moe = types.MethodType(_dense_experts, mlp)
    return model


def load_text_model(target_dir: Path | str, dtype: torch.dtype = torch.float32,
                    vectorised: bool = True) -> DeepseekV3ForCausalLM:
    """The target's DeepSeek-V3 text model from the tiny Kimi-K2.5 checkpoint, in eval mode."""
    from safetensors.torch import load_file
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    target_dir = Path(target_dir)
    try:
        text_config = json.loads((target_dir / "config.json").read_text(encoding="utf-8"))["text_config"]
        tensors = load_file(str(target_dir / "model.safetensors"))
    except (OSError, KeyError, ValueError) as exc:
        raise TinyModelError(f"cannot read the tiny target at {target_dir} ({type(exc).__name__}); "
                             "rebuild it with build_tiny_models()", path=Path(target_dir), problem="unreadable") from None
    model = DeepseekV3ForCausalLM(DeepseekV3Config(**text_config))
    state = {name.removeprefix(LANGUAGE_PREFIX): t for name, t in tensors.items() if name.startswith(LANGUAGE_PREFIX)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise TinyModelError(f"the target checkpoint at {target_dir} does not match transformers' DeepseekV3 "
                             f"({len(missing)} missing, {len(unexpected)} unexpected tensors); rebuild it",
                             path=Path(target_dir), problem="mismatch")
    # transformers wraps PreTrainedModel.to in functools.wraps, whose typeshed type is not a method: mypy reads
    # the call as unbound (the dtype as ``self``)
    model = model.to(dtype).eval()  # type: ignore[arg-type]
    return vectorise_experts(model) if vectorised else model


@dataclass
class TargetRollout:
    """Prompts with their greedy continuations and the target's residual stream at every capturable layer.

    ``tokens``: [B, n + T] (prompt, then T greedy tokens). ``layer_states``: [B, n + T, L - 1, hidden] in bfloat16
    (the dtype sglang hands the drafter), entry ``i`` being the state sglang captures for drafter id ``i``.
    Keeping every layer lets one rollout feed both the aligned and the shifted id sets.
    """

    tokens: torch.Tensor
    layer_states: torch.Tensor
    prompt_len: int

    @property
    def output_len(self) -> int:
        return self.tokens.shape[1] - self.prompt_len

    def aux(self, aux_layer_ids: Sequence[int], rows: slice | torch.Tensor = slice(None)) -> torch.Tensor:
        """The drafter's input for these ids: the chosen layers concatenated in id order, [B, S, ids * hidden]."""
        capturable = self.layer_states.shape[2]
        bad = [i for i in aux_layer_ids if not 0 <= i < capturable]
        if bad:
            raise TinyModelError(f"aux layer ids {bad} are outside 0..{capturable - 1} for a {capturable + 1}-layer "
                                 "target (sglang captures id i at the input of layer i + 1)",
                                 parameter="aux_layer_ids", value=list(aux_layer_ids), problem="out_of_range")
        states = self.layer_states[rows][:, :, list(aux_layer_ids)]
        return states.reshape(*states.shape[:2], -1)


@torch.no_grad()
def greedy_tokens(model: torch.nn.Module, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding with a KV cache, EOS ignored (as the benchmark's ``ignore_eos``): [B, n + new_tokens]."""
    out = model(prompts, use_cache=True)
    cache, step = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
    generated = [step]
    for _ in range(new_tokens - 1):
        out = model(step, past_key_values=cache, use_cache=True)
        cache, step = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        generated.append(step)
    return torch.cat([prompts, *generated], dim=1)


@torch.no_grad()
def layer_states(model: DeepseekV3ForCausalLM, tokens: torch.Tensor) -> torch.Tensor:
    """[B, S, L - 1, hidden]: the residual stream after layers 0..L-2 (transformers' ``hidden_states[1:L]``)."""
    hidden = model(tokens, output_hidden_states=True).hidden_states
    return torch.stack(hidden[1:model.config.num_hidden_layers], dim=2)


def rollout(model: DeepseekV3ForCausalLM, prompts: Sequence[Sequence[int]], new_tokens: int,
            batch_size: int = 512, progress=None) -> TargetRollout:
    """Greedy continuations and layer states for ``prompts`` (all of one length), in batches."""
    if not prompts or len({len(p) for p in prompts}) != 1:
        raise TinyModelError("rollout needs prompts, all of the same length (the benchmark's are)",
                             parameter="prompts", problem="ragged")
    tokens, states = [], []
    for start in range(0, len(prompts), batch_size):
        chunk = torch.tensor([list(p) for p in prompts[start:start + batch_size]], dtype=torch.long)
        full = greedy_tokens(model, chunk, new_tokens)
        tokens.append(full)
        states.append(layer_states(model, full).to(torch.bfloat16))
        if progress is not None:
            progress.update(len(chunk))
    return TargetRollout(tokens=torch.cat(tokens), layer_states=torch.cat(states), prompt_len=len(prompts[0]))
