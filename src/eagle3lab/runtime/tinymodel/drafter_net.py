"""sglang's ``LlamaForCausalLMEagle3`` forward, written out in torch for training with training-time test (TTT).

The arithmetic mirrors sglang 0.5.9 ``models/llama_eagle3.py`` so that weights trained here act the same when
sglang loads them: ``fc`` maps the three concatenated aux states to the hidden size (only when the input is that
wide), the one ``midlayer`` normalises the token embedding (``input_layernorm``) and the hidden state
(``hidden_norm``) and attends over their concatenation (q/k/v read 2 x hidden), the residual is the un-normalised
hidden state, and the state handed to the next draft step is ``midlayer output + residual`` before the final norm.
The token embedding is the target's (sglang's EAGLE worker calls ``set_embed`` with the target's table), so it is
frozen here.

Positions follow sglang's EAGLE worker: the drafter's extend pass puts pair ``j`` (token ``x[j+1]``, target state
at ``j``) at position ``j``; draft step ``s >= 2`` of a chain anchored at pair ``j`` runs at position ``j + s``
(``spec_info.positions = seq_lens`` then ``positions.add_(1)`` before each draft forward, eagle_worker.py), and
attends to the extend keys ``0..j`` plus the keys its own chain wrote at steps ``2..s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

# sglang: positions = seq_lens (the bonus token's index), then += 1 before each draft forward, so step s of a
# chain anchored at pair j runs at j + s - 1 + DRAFT_POSITION_OFFSET.
DRAFT_POSITION_OFFSET = 1


@dataclass(frozen=True)
class DrafterShape:
    """The sizes the drafter's config.json fixes."""

    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    draft_vocab: int
    num_aux: int
    rope_theta: float
    eps: float

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DrafterShape:
        ids = config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        return cls(hidden=config["hidden_size"], intermediate=config["intermediate_size"],
                   heads=config["num_attention_heads"], kv_heads=config["num_key_value_heads"],
                   head_dim=config["head_dim"], vocab=config["vocab_size"], draft_vocab=config["draft_vocab_size"],
                   num_aux=len(ids), rope_theta=float(config["rope_theta"]), eps=float(config["rms_norm_eps"]))


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Eagle3Drafter(nn.Module):
    """One EAGLE-3 decoder layer over [target embedding ; fused aux state], with sglang's parameter names."""

    # the buffers ``register_buffer`` adds, declared so they read as tensors (nn.Module's __getattr__ is untyped)
    embed_tokens: torch.Tensor
    inv_freq: torch.Tensor

    def __init__(self, shape: DrafterShape, embedding: torch.Tensor):
        super().__init__()
        self.shape = shape
        h, hd = shape.hidden, shape.head_dim
        self.register_buffer("embed_tokens", embedding.detach().float().clone(), persistent=False)
        self.fc = nn.Linear(shape.num_aux * h, h, bias=False)
        self.input_layernorm = RMSNorm(h, shape.eps)
        self.hidden_norm = RMSNorm(h, shape.eps)
        self.q_proj = nn.Linear(2 * h, shape.heads * hd, bias=False)
        self.k_proj = nn.Linear(2 * h, shape.kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(2 * h, shape.kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(shape.heads * hd, h, bias=False)
        self.post_attention_layernorm = RMSNorm(h, shape.eps)
        self.gate_proj = nn.Linear(h, shape.intermediate, bias=False)
        self.up_proj = nn.Linear(h, shape.intermediate, bias=False)
        self.down_proj = nn.Linear(shape.intermediate, h, bias=False)
        self.norm = RMSNorm(h, shape.eps)
        self.lm_head = nn.Linear(h, shape.draft_vocab, bias=False)
        inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    # --- pieces ---------------------------------------------------------------------------------------------
    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Neox-style rotary embedding (sglang ``get_rope(..., is_neox_style=True)``); x: [B, heads, T, hd]."""
        freqs = positions.float().unsqueeze(-1) * self.inv_freq  # [T, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + _rotate_half(x) * emb.sin()

    def _qkv(self, tokens: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor):
        batch, length = tokens.shape
        x = torch.cat([self.input_layernorm(F.embedding(tokens, self.embed_tokens)), self.hidden_norm(hidden)], -1)
        hd = self.shape.head_dim
        q = self.q_proj(x).view(batch, length, self.shape.heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.shape.kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.shape.kv_heads, hd).transpose(1, 2)
        q, k = self._rope(q, positions), self._rope(k, positions)
        repeat = self.shape.heads // self.shape.kv_heads
        return q, k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)

    def _finish(self, attn: torch.Tensor, residual: torch.Tensor):
        """o_proj, post-attention norm with residual, MLP; returns (logits, state for the next step)."""
        batch, _, length, _ = attn.shape
        attn = self.o_proj(attn.transpose(1, 2).reshape(batch, length, -1))
        residual = attn + residual
        normed = self.post_attention_layernorm(residual)
        mlp = self.down_proj(F.silu(self.gate_proj(normed)) * self.up_proj(normed))
        state = mlp + residual
        return self.lm_head(self.norm(state)), state

    # --- the TTT forward ------------------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, aux: torch.Tensor, first_anchor: int = 0, steps: int = 3,
                position_offset: int = DRAFT_POSITION_OFFSET) -> list[torch.Tensor]:
        """Logits of every draft step at every anchor pair from ``first_anchor`` on, as sglang's chain computes them.

        ``tokens``: [B, S] (prompt + greedy continuation); ``aux``: [B, S, num_aux * hidden] target aux states.
        Pair ``j`` (0 <= j < S - 1) holds token ``x[j+1]`` and the target state at ``j``; every pair is a key of the
        extend pass. Step ``s`` (1-based) at anchor ``j`` reads the true token ``x[j+s]`` (a chain only matters
        while its drafts are right) and the previous step's state, and predicts ``x[j+s+1]``. Returns ``steps``
        tensors [B, S - 1 - first_anchor, draft_vocab]; rows whose label lies beyond the sequence are meaningless.
        Anchors before ``first_anchor`` (the prompt, whose next tokens are random) are keys only, never queried.
        """
        pairs = tokens.shape[1] - 1
        if not 0 <= first_anchor < pairs:
            raise ValueError(f"first_anchor must lie in 0..{pairs - 1}, got {first_anchor}")
        scale = self.shape.head_dim ** -0.5
        pair_positions = torch.arange(pairs, device=tokens.device)
        anchors = pair_positions[first_anchor:]
        causal = (pair_positions.unsqueeze(0) <= anchors.unsqueeze(1))  # [anchors, pairs]

        hidden = self.fc(aux[:, :pairs].to(self.fc.weight.dtype))
        q, k1, v1 = self._qkv(tokens[:, 1:], hidden, pair_positions)
        attn = F.scaled_dot_product_attention(q[:, :, first_anchor:], k1, v1, attn_mask=causal)
        logits, state = self._finish(attn, hidden[:, first_anchor:])
        outputs = [logits]
        chain_keys: list[tuple[torch.Tensor, torch.Tensor]] = []
        for step in range(2, steps + 1):
            # token x[j + step] for anchor j; anchors near the end get a dummy token (their labels are masked)
            step_tokens = F.pad(tokens[:, first_anchor + step:], (0, step - 1), value=0)
            q, k, v = self._qkv(step_tokens, state, anchors + step - 1 + position_offset)
            chain_keys.append((k, v))
            main = (torch.matmul(q, k1.transpose(-1, -2)) * scale).masked_fill(~causal, float("-inf"))
            diag = torch.stack([(q * ck).sum(-1) for ck, _ in chain_keys], dim=-1) * scale  # [B, h, A, s-1]
            weights = torch.softmax(torch.cat([main, diag], dim=-1), dim=-1)
            attn = torch.matmul(weights[..., :pairs], v1)
            for index, (_, cv) in enumerate(chain_keys):
                attn = attn + weights[..., pairs + index].unsqueeze(-1) * cv
            logits, state = self._finish(attn, state)
            outputs.append(logits)
        return outputs

    # --- checkpoint naming ----------------------------------------------------------------------------------
    def checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        """The weights under the EAGLE-3 checkpoint names sglang's ``load_weights`` reads (``midlayer.*``, ...)."""
        mid = ("input_layernorm", "hidden_norm", "post_attention_layernorm")
        attn = ("q_proj", "k_proj", "v_proj", "o_proj")
        mlp = ("gate_proj", "up_proj", "down_proj")
        tensors = {"fc.weight": self.fc.weight, "norm.weight": self.norm.weight,
                   "lm_head.weight": self.lm_head.weight, "embed_tokens.weight": self.embed_tokens}
        tensors.update({f"midlayer.{name}.weight": getattr(self, name).weight for name in mid})
        tensors.update({f"midlayer.self_attn.{name}.weight": getattr(self, name).weight for name in attn})
        tensors.update({f"midlayer.mlp.{name}.weight": getattr(self, name).weight for name in mlp})
        return {name: t.detach().to(torch.bfloat16).contiguous() for name, t in tensors.items()}

    def load_checkpoint_tensors(self, tensors: Mapping[str, torch.Tensor]) -> None:
        """Inverse of ``checkpoint_tensors`` (the frozen embedding is the target's and is not read back)."""
        own = {name: t for name, t in self.checkpoint_tensors().items() if name != "embed_tokens.weight"}
        with torch.no_grad():
            for name in own:
                module_path = name.removesuffix(".weight").split(".")[-1]
                getattr(self, module_path).weight.copy_(tensors[name].float())
