"""What a model is, for the cost model: weight and KV-cache bytes one GPU holds and reads under tensor parallelism.

Built from a Hugging Face ``config.json`` (Llama, Qwen2/3, Qwen2/3-MoE, gpt-oss, GLM-4.x MoE, GLM-4.7-Flash, Llama-4,
MiniMax-M2, DeepSeek-V2/V3; a Kimi-K2.5 config is read through its DeepSeek-V3-shaped ``text_config``) or as the EAGLE-3
drafter that sglang pairs with a target.

Tensor parallelism follows sglang's layouts: attention heads and MLP widths are split across the TP group; a GQA
KV cache is split by KV head (replicated once TP exceeds the KV-head count); an MLA latent cache has one latent
"head", so every GPU holds and reads all of it (DeepseekV2AttentionMLA). Routed experts are split along their
intermediate width on every GPU (no expert parallelism), so each expert a batch touches costs 1/tp of its bytes
on every GPU.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional, TypedDict

from eagle3lab.errors import PerfModelError, UnsupportedArchitectureError

# sglang's EAGLE-3 drafters (SpecForge) keep a 32000-token draft vocabulary by default (draft_vocab_size).
DEFAULT_DRAFT_VOCAB = 32000
EAGLE3_AUX_LAYERS = 3  # the drafter fuses three target hidden states (eagle_aux_hidden_state_layer_ids)

DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0, "float8_e4m3fn": 1.0}


@dataclass(frozen=True)
class MLA:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): low-rank q and a compressed KV latent."""

    q_lora_rank: Optional[int]
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class MoE:
    """Routed experts (top-k of n) plus optional always-on shared experts, in ``layers`` of the decoder."""

    n_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int  # total width of the shared expert(s); 0 if none
    layers: int
    # routing concentration: tokens spread as if over this many equally likely experts (0: all n_experts, the
    # uniform bound); fitted only from a user's measured plain-decode curve (costmodel.curve)
    effective_experts: float = 0.0

    def distinct(self, tokens: float) -> float:
        """Expected distinct experts ``tokens`` tokens touch in one layer (never more than n_experts)."""
        pool = self.effective_experts or self.n_experts
        return min(float(self.n_experts), expected_distinct_experts(tokens, pool, self.top_k))


@dataclass(frozen=True)
class Storage:
    """Bytes per stored element. ``expert`` covers routed experts (including per-group scales of a quantised
    checkpoint); ``linear`` every other projection; ``kv`` one cached key/value/latent element."""

    linear: float = 2.0
    expert: float = 2.0
    lm_head: float = 2.0
    kv: float = 2.0
    activation: float = 2.0


@dataclass(frozen=True)
class ModelArch:
    """One decoder stack (a target, or an EAGLE-3 drafter) reduced to what decode time depends on."""

    name: str
    family: str
    num_layers: int
    hidden: int
    vocab: int
    head_vocab: int  # rows of the lm_head: the vocabulary a forward computes logits over
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dense_intermediate: int
    dense_layers: int  # decoder layers with a dense MLP (all of a dense model; DeepSeek's first_k_dense_replace)
    moe: Optional[MoE]
    mla: Optional[MLA]
    storage: Storage
    source: str
    attn_input: int = 0  # width feeding q/k/v: hidden, or 2*hidden in an EAGLE-3 drafter layer
    fc_input: int = 0  # a drafter's fc input: 3*hidden (EAGLE-3 fused aux states), 2*hidden (EAGLE-1/2); 0 otherwise
    fc_every_pass: bool = False  # EAGLE-1/2 run fc on every draft token; EAGLE-3 only on the target's states
    sliding_layers: int = 0  # layers attending over the last ``sliding_window`` tokens only (config layer_types)
    sliding_window: int = 0  # tokens such a layer reads (0: no sliding-window layers)

    def __post_init__(self) -> None:
        ints = {"num_layers": self.num_layers, "hidden": self.hidden, "vocab": self.vocab,
                "head_vocab": self.head_vocab, "num_heads": self.num_heads, "num_kv_heads": self.num_kv_heads,
                "head_dim": self.head_dim}
        bad = [k for k, v in ints.items() if not isinstance(v, int) or v < 1]
        if bad:
            raise PerfModelError(f"model '{self.name}': {', '.join(bad)} must be positive integers ({self.source})")
        if self.dense_layers + (self.moe.layers if self.moe else 0) != self.num_layers:
            raise PerfModelError(f"model '{self.name}': dense layers + MoE layers must equal num_layers "
                                 f"({self.num_layers}) ({self.source})")
        if self.moe and not 0 < self.moe.top_k <= self.moe.n_experts:
            raise PerfModelError(f"model '{self.name}': need 0 < num_experts_per_tok <= num experts ({self.source})")
        if not 0 <= self.sliding_layers <= self.num_layers or (self.sliding_layers and self.sliding_window < 1):
            raise PerfModelError(f"model '{self.name}': sliding-window layers need 0 <= count <= num_layers and a "
                                 f"window >= 1 ({self.source})")

    def effective_context(self, context: float) -> float:
        """Cached tokens a layer reads on average: full-attention layers read the whole context, sliding-window
        layers at most their window (gpt-oss alternates the two)."""
        if not self.sliding_layers:
            return context
        full = self.num_layers - self.sliding_layers
        return (full * context + self.sliding_layers * min(context, self.sliding_window)) / self.num_layers

    # ------------------------------------------------------------------ attention
    @property
    def q_input(self) -> int:
        return self.attn_input or self.hidden

    @property
    def kv_split_under_tp(self) -> bool:
        """GQA caches keys and values per KV head, which TP splits; MLA caches one latent that every GPU needs."""
        return self.mla is None

    def kv_heads_per_gpu(self, tp: int) -> int:
        """KV heads a GPU holds: split while tp <= num_kv_heads, then one replicated head per GPU (sglang)."""
        return max(1, self.num_kv_heads // tp) if self.mla is None else 1

    def heads_per_gpu(self, tp: int) -> float:
        return self.num_heads / tp

    def kv_bytes_per_token(self, tp: int) -> float:
        """KV-cache bytes one GPU stores per cached token, all layers (what a pool sized for full attention in
        every layer holds; ``kv_read_bytes`` is what a decode step reads)."""
        if self.mla is not None:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            per_layer = 2 * self.kv_heads_per_gpu(tp) * self.head_dim
        return self.num_layers * per_layer * self.storage.kv

    def kv_read_bytes(self, tp: int, context: float) -> float:
        """KV-cache bytes one GPU reads for one request's decode step over ``context`` cached tokens: full-attention
        layers read every cached token, sliding-window layers at most their window (their keys beyond it are
        masked out, so kernels skip them)."""
        return self.kv_bytes_per_token(tp) * self.effective_context(context)

    def attention_flops_per_pair(self, tp: int) -> float:
        """FLOPs one GPU spends per (query token, cached token) pair, all layers: scores plus weighted values.

        MLA runs absorbed in decode: every head scores against the latent plus rope key and reads the latent back.
        """
        h = self.heads_per_gpu(tp)
        if self.mla is not None:
            m = self.mla
            per_layer = h * (2 * (m.kv_lora_rank + m.qk_rope_head_dim) + 2 * m.kv_lora_rank)
        else:
            per_layer = h * 4 * self.head_dim
        return self.num_layers * per_layer

    def queries_per_kv_head(self, tp: int) -> float:
        """Query heads that share one cached KV head on a GPU: the M dimension of a decode attention kernel."""
        if self.mla is not None:
            return self.heads_per_gpu(tp)
        return max(1.0, self.heads_per_gpu(tp) / self.kv_heads_per_gpu(tp))

    def attention_params(self, tp: int) -> tuple[float, float]:
        """(replicated, per-GPU split) projection weights of one attention layer.

        MLA: fused q_a/kv_a (with the rope key) is replicated, q_b/kv_b/o split (sglang DeepseekV2AttentionMLA).
        GQA: q/o split by heads, k/v by KV head (replicated past num_kv_heads).
        """
        if self.mla is not None:
            m = self.mla
            q_a = self.hidden * m.q_lora_rank if m.q_lora_rank else 0
            replicated = q_a + self.hidden * (m.kv_lora_rank + m.qk_rope_head_dim)
            q_in = m.q_lora_rank or self.hidden
            q_b = q_in * self.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
            kv_b = m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            o = self.num_heads * m.v_head_dim * self.hidden
            return float(replicated), (q_b + kv_b + o) / tp
        q = self.q_input * self.num_heads * self.head_dim / tp
        kv = 2 * self.q_input * self.kv_heads_per_gpu(tp) * self.head_dim
        out = self.num_heads * self.head_dim * self.hidden / tp
        return 0.0, q + kv + out

    def attention_out_width(self) -> int:
        """Width of q (and of the attention output) per layer, for activation traffic."""
        if self.mla is not None:
            return self.num_heads * (self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim)
        return self.num_heads * self.head_dim

    # ------------------------------------------------------------------ MLP
    def dense_mlp_params(self, tp: int) -> float:
        """Gate, up and down projections of one dense MLP layer on one GPU."""
        return 3 * self.hidden * self.dense_intermediate / tp

    def expert_params(self, tp: int) -> float:
        """One routed expert's slice on one GPU."""
        return 3 * self.hidden * self.moe.expert_intermediate / tp if self.moe else 0.0

    def shared_expert_params(self, tp: int) -> float:
        return 3 * self.hidden * self.moe.shared_intermediate / tp if self.moe else 0.0

    def router_params(self) -> float:
        return float(self.hidden * self.moe.n_experts) if self.moe else 0.0

    def active_intermediate(self, tp: int, layer: str) -> float:
        """MLP width one token activates on one GPU in a 'dense' or 'moe' layer (for activation traffic)."""
        if layer == "dense":
            return self.dense_intermediate / tp
        if self.moe is None:
            raise PerfModelError(f"{self.name} has no MoE layer to take the active MLP width of", parameter="layer",
                                 value=layer)
        return (self.moe.top_k * self.moe.expert_intermediate + self.moe.shared_intermediate) / tp

    def lm_head_params(self, tp: int) -> float:
        return self.head_vocab * self.hidden / tp

    def fc_params(self) -> float:
        """The EAGLE-3 drafter's fused-aux projection (a plain, replicated nn.Linear in sglang's llama_eagle3)."""
        return float(self.fc_input * self.hidden)

    # ------------------------------------------------------------------ totals
    def resident_weight_bytes(self, tp: int) -> float:
        """Weights one GPU stores: every layer's slice, every expert's slice, embedding and lm_head slices."""
        s = self.storage
        rep, split = self.attention_params(tp)
        total = self.num_layers * (rep + split) * s.linear
        total += self.dense_layers * self.dense_mlp_params(tp) * s.linear
        if self.moe:
            total += self.moe.layers * (self.router_params() + self.shared_expert_params(tp)) * s.linear
            total += self.moe.layers * self.moe.n_experts * self.expert_params(tp) * s.expert
        total += self.lm_head_params(tp) * s.lm_head + self.vocab * self.hidden / tp * s.linear
        return total + self.fc_params() * s.linear

    def total_params(self) -> float:
        """All parameters (TP 1), for a sanity check against a checkpoint's stated size."""
        rep, split = self.attention_params(1)
        n = self.num_layers * (rep + split) + self.dense_layers * self.dense_mlp_params(1)
        if self.moe:
            n += self.moe.layers * (self.router_params() + self.shared_expert_params(1)
                                    + self.moe.n_experts * self.expert_params(1))
        return n + self.lm_head_params(1) + self.vocab * self.hidden + self.fc_params()

    def active_params(self) -> float:
        """Parameters one token's forward multiplies by (TP 1): attention, dense MLPs, the router, shared experts
        and top_k routed experts per MoE layer, and the lm_head; not the embedding (a row lookup). Publishers
        differ on the lm_head: OpenAI's 5.1B for gpt-oss-120b counts it, Z.ai's 12B for GLM-4.5-Air does not."""
        rep, split = self.attention_params(1)
        n = self.num_layers * (rep + split) + self.dense_layers * self.dense_mlp_params(1)
        if self.moe:
            n += self.moe.layers * (self.router_params() + self.shared_expert_params(1)
                                    + self.moe.top_k * self.expert_params(1))
        return n + self.lm_head_params(1) + self.fc_params()


def expected_distinct_experts(tokens: float, n_experts: float, top_k: int) -> float:
    """Expected distinct experts a MoE layer touches for ``tokens`` tokens routed uniformly and independently.

    Each expert is missed by one token with probability 1 - k/E, so by all T tokens with (1 - k/E)^T. Real routers
    are skewed, so this is an upper bound on the experts (and bytes) a batch touches.
    """
    if tokens < 0 or n_experts <= 0 or not 0 < top_k <= n_experts:
        raise PerfModelError(f"distinct experts: need tokens >= 0 and 0 < k <= E, got T={tokens}, E={n_experts}, "
                             f"k={top_k}")
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


# ---------------------------------------------------------------------------------------------- config.json
DENSE_ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
               "Qwen3ForCausalLM": "qwen3"}
MOE_ARCHS = {"Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3MoeForCausalLM": "qwen3_moe",
             "GptOssForCausalLM": "gpt_oss", "Glm4MoeForCausalLM": "glm4_moe", "Llama4ForCausalLM": "llama4",
             "MiniMaxM2ForCausalLM": "minimax_m2"}
# DeepSeek-style MLA + routed experts; GLM-4.7-Flash (Glm4MoeLiteForCausalLM) uses the same keys and layout
MLA_ARCHS = {"DeepseekV3ForCausalLM": "deepseek_v3", "DeepseekV2ForCausalLM": "deepseek_v2",
             "Glm4MoeLiteForCausalLM": "glm4_moe_lite"}
# multimodal wrappers whose text_config holds the decoder: (inner architecture, where the quantisation config is)
WRAPPER_ARCHS = {"KimiK25ForConditionalGeneration": "DeepseekV3ForCausalLM",
                 "Llama4ForConditionalGeneration": "Llama4ForCausalLM"}
SUPPORTED = sorted([*DENSE_ARCHS, *MOE_ARCHS, *MLA_ARCHS, *WRAPPER_ARCHS])
# sglang models that read layer_types/sliding_window (srt/models/gpt_oss.py: window attention on sliding_attention
# layers); the Llama-4 chunked attention is not modelled
SLIDING_WINDOW_ARCHS = {"GptOssForCausalLM"}
MXFP4_BYTES = 0.5 + 1.0 / 32  # OCP MX FP4: 4-bit elements plus one 8-bit (E8M0) scale per block of 32


def _require(cfg: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if cfg.get(k) is None]
    if missing:
        raise PerfModelError(f"{where}: config lacks {', '.join(missing)}; pass the model's own config.json",
                             parameter=missing[0], problem="missing")


def _module_is_quantised(quant: Mapping[str, Any], module: str) -> bool:
    """Whether a compressed-tensors/AWQ/GPTQ config leaves ``module`` (a representative weight name) quantised."""
    for pattern in quant.get("ignore") or quant.get("modules_to_not_convert") or []:
        pattern = str(pattern)
        if pattern.startswith("re:"):
            if re.match(pattern[3:], module):
                return False
        elif pattern == module or pattern in module:
            return False
    return True


def storage_from_config(cfg: Mapping[str, Any], quant: Optional[Mapping[str, Any]], where: str) -> Storage:
    """Bytes per weight from ``torch_dtype`` and ``quantization_config`` (compressed-tensors, fp8, awq, gptq).

    A group-quantised weight costs bits/8 plus one 16-bit scale per group. Which parts are quantised follows the
    config's ignore list, tested on representative module names of each part.
    """
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").replace("torch.", "")
    if dtype not in DTYPE_BYTES:
        raise PerfModelError(f"{where}: unknown torch_dtype '{dtype}'; expected one of {sorted(DTYPE_BYTES)}",
                             parameter="torch_dtype", value=dtype, problem="unknown")
    base = DTYPE_BYTES[dtype]
    if not quant:
        return Storage(linear=base, expert=base, lm_head=base, kv=base if base <= 2 else 2.0)
    method = str(quant.get("quant_method", "")).lower()
    if method == "mxfp4":  # gpt-oss: routed experts in MXFP4, modules_to_not_convert (attention, router, head) BF16
        return Storage(linear=base, expert=MXFP4_BYTES,
                       lm_head=MXFP4_BYTES if _module_is_quantised(quant, "lm_head") else base, kv=2.0)
    if method == "fp8":
        block = quant.get("weight_block_size") or [128, 128]
        per = 1.0 + 4.0 / (block[0] * block[1])  # one fp32 scale per block
        return Storage(linear=per, expert=per, lm_head=base, kv=2.0)
    if method in ("awq", "gptq"):
        bits, group = float(quant.get("bits", 4)), float(quant.get("group_size", 128))
        per = bits / 8 + 2.0 / group
        return Storage(linear=per, expert=per, lm_head=base, kv=2.0)
    if method == "compressed-tensors":
        groups = list((quant.get("config_groups") or {}).values())
        if not groups or "weights" not in groups[0]:
            raise PerfModelError(f"{where}: compressed-tensors quantization_config has no config_groups.weights")
        weights = groups[0]["weights"]
        bits, group = float(weights.get("num_bits", 8)), weights.get("group_size")
        per = bits / 8 + (2.0 / float(group) if group else 0.0)
        return Storage(
            linear=per if _module_is_quantised(quant, "model.layers.0.self_attn.o_proj") else base,
            expert=per if _module_is_quantised(quant, "model.layers.1.mlp.experts.0.down_proj") else base,
            lm_head=per if _module_is_quantised(quant, "lm_head") else base, kv=2.0)
    raise PerfModelError(f"{where}: quantization method '{method}' is not modelled; supported: compressed-tensors, "
                         "fp8, awq, gptq, mxfp4", parameter="quant_method", value=method, problem="unsupported")


class _Common(TypedDict):
    """The ``ModelArch`` fields every family reads from the config alike (passed on as ``**common``)."""

    name: str
    num_layers: int
    hidden: int
    vocab: int
    head_vocab: int
    num_heads: int
    storage: Storage
    source: str


def model_from_config(cfg: Mapping[str, Any], name: Optional[str] = None, source: str = "config.json") -> ModelArch:
    """A ModelArch from a Hugging Face config.json dict. One clear error for anything the model cannot read."""
    if not isinstance(cfg, Mapping):
        raise PerfModelError(f"{source}: a config.json must be a JSON object")
    archs = cfg.get("architectures")
    if not archs or not isinstance(archs, list):
        raise PerfModelError(f"{source}: config has no 'architectures' list; the cost model needs it to know the "
                             f"layout (supported: {', '.join(SUPPORTED)})", parameter="architectures",
                             problem="missing")
    arch = archs[0]
    quant = cfg.get("quantization_config")
    if arch in WRAPPER_ARCHS:
        text = cfg.get("text_config")
        if not isinstance(text, Mapping):
            raise PerfModelError(f"{source}: {arch} config has no text_config", parameter="text_config",
                                 problem="missing")
        inner = dict(text)
        inner["architectures"] = [WRAPPER_ARCHS[arch]]
        quant = quant or text.get("quantization_config")
        inner["quantization_config"] = quant
        inner.setdefault("torch_dtype", cfg.get("torch_dtype"))
        return model_from_config(inner, name or arch, f"{source} text_config")
    if arch not in DENSE_ARCHS and arch not in MOE_ARCHS and arch not in MLA_ARCHS:
        raise UnsupportedArchitectureError(f"{source}: architecture {arch} is not modelled by the cost model; "
                                           f"supported: {', '.join(SUPPORTED)}", architecture=arch,
                                           supported=tuple(SUPPORTED))
    where = f"{source} ({arch})"
    _require(cfg, ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"), where)
    layers, hidden, heads = int(cfg["num_hidden_layers"]), int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    storage = storage_from_config(cfg, quant, where)
    common = _Common(name=name or cfg.get("_name_or_path") or arch, num_layers=layers, hidden=hidden,
                     vocab=int(cfg["vocab_size"]), head_vocab=int(cfg["vocab_size"]), num_heads=heads,
                     storage=storage, source=source)
    if arch in MLA_ARCHS:
        _require(cfg, ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "intermediate_size",
                       "moe_intermediate_size", "n_routed_experts", "num_experts_per_tok"), where)
        mla = MLA(cfg.get("q_lora_rank"), int(cfg["kv_lora_rank"]), int(cfg["qk_nope_head_dim"]),
                  int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"]))
        first_dense = int(cfg.get("first_k_dense_replace", 0))
        moe = MoE(int(cfg["n_routed_experts"]), int(cfg["num_experts_per_tok"]), int(cfg["moe_intermediate_size"]),
                  int(cfg.get("n_shared_experts") or 0) * int(cfg["moe_intermediate_size"]), layers - first_dense)
        return ModelArch(family=MLA_ARCHS[arch], num_kv_heads=1, head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim,
                         dense_intermediate=int(cfg["intermediate_size"]), dense_layers=first_dense, moe=moe, mla=mla,
                         **common)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    if arch in MOE_ARCHS:
        return _moe_from_config(cfg, arch, where, kv_heads, head_dim, common)
    _require(cfg, ("intermediate_size",), where)
    return ModelArch(family=DENSE_ARCHS[arch], num_kv_heads=kv_heads, head_dim=head_dim,
                     dense_intermediate=int(cfg["intermediate_size"]), dense_layers=layers, moe=None, mla=None,
                     **common)


def _sliding_window_layers(cfg: Mapping[str, Any], arch: str, layers: int, where: str) -> tuple[int, int]:
    """(layers attending over a sliding window, the window) from the config's ``layer_types``, for the families
    whose sglang model honours it (SLIDING_WINDOW_ARCHS); sglang runs every layer of the others (Qwen2/3, Llama,
    GLM) with full attention whatever their config says. A gpt-oss config without the list alternates, starting
    with a sliding layer (transformers GptOssConfig's default)."""
    if arch not in SLIDING_WINDOW_ARCHS:
        return 0, 0
    types = cfg.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention"
                                       for i in range(layers)]
    if not isinstance(types, list) or len(types) != layers:
        raise PerfModelError(f"{where}: layer_types must list one entry per layer ({layers})",
                             parameter="layer_types", value=types, problem="wrong_length")
    sliding = sum(1 for t in types if t == "sliding_attention")
    window = int(cfg.get("sliding_window") or 0)
    if sliding and window < 1:
        raise PerfModelError(f"{where}: {sliding} sliding_attention layers but no sliding_window",
                             parameter="sliding_window", problem="missing")
    return sliding, window if sliding else 0


def _moe_layers(cfg: Mapping[str, Any], arch: str, layers: int) -> list[bool]:
    """Which decoder layers route to experts, by each family's own config keys."""
    if arch == "Glm4MoeForCausalLM":  # DeepSeek-style: the first first_k_dense_replace layers are dense
        first = int(cfg.get("first_k_dense_replace") or 0)
        return [i >= first for i in range(layers)]
    if arch == "Llama4ForCausalLM":  # interleaved: layer i is MoE when (i + 1) % interleave_moe_layer_step == 0
        step = int(cfg.get("interleave_moe_layer_step") or 1)
        listed = cfg.get("moe_layers")
        return [i in set(listed) for i in range(layers)] if listed else [(i + 1) % step == 0 for i in range(layers)]
    if arch in ("GptOssForCausalLM", "MiniMaxM2ForCausalLM"):
        return [True] * layers
    step = int(cfg.get("decoder_sparse_step") or 1)  # Qwen2/3-MoE
    dense_only = set(cfg.get("mlp_only_layers") or [])
    return [i not in dense_only and (i + 1) % step == 0 for i in range(layers)]


def _moe_from_config(cfg: Mapping[str, Any], arch: str, where: str, kv_heads: int, head_dim: int,
                     common: _Common) -> ModelArch:
    """A GQA decoder with routed experts: Qwen2/3-MoE, gpt-oss, GLM-4.x MoE, Llama-4 (text), MiniMax-M2.

    Expert width is ``moe_intermediate_size`` where the family has it, else ``intermediate_size`` (gpt-oss, Llama-4,
    MiniMax-M2). Shared experts: Qwen2-MoE's shared_expert_intermediate_size, GLM's n_shared_experts x expert
    width, Llama-4's one shared expert of the expert width. Dense layers use ``intermediate_size`` (Llama-4:
    ``intermediate_size_mlp``).

    gpt-oss: every layer MoE, no shared expert; sliding-window and full attention alternate (``layer_types``,
    ``_sliding_window_layers``). Its attention sinks (one logit per head), q/k/v/o and expert biases are left
    out: under 0.1% of the bytes and FLOPs. GLM-4.x: DeepSeek-style first_k_dense_replace dense layers, GQA with
    an explicit head_dim; partial rotary and the q/k/v bias change no weight or KV byte that matters, and its MTP
    layer (num_nextn_predict_layers) is not part of the decoding stack.
    """
    layers = int(cfg["num_hidden_layers"])
    experts = cfg.get("num_experts") or cfg.get("num_local_experts") or cfg.get("n_routed_experts")
    if not experts:
        raise PerfModelError(f"{where}: config lacks num_experts (or num_local_experts, n_routed_experts)")
    _require(cfg, ("num_experts_per_tok",), where)
    routed_in_intermediate = arch in ("GptOssForCausalLM", "Llama4ForCausalLM", "MiniMaxM2ForCausalLM")
    width_key = "intermediate_size" if routed_in_intermediate else "moe_intermediate_size"
    _require(cfg, (width_key,), where)
    width = int(cfg[width_key])
    if arch == "Glm4MoeForCausalLM":
        shared = int(cfg.get("n_shared_experts") or 0) * width
        dense = int(cfg.get("intermediate_size") or 0)
    elif arch == "Llama4ForCausalLM":
        shared, dense = width, int(cfg.get("intermediate_size_mlp") or 0)
    elif routed_in_intermediate:
        shared, dense = 0, 0
    else:
        shared, dense = int(cfg.get("shared_expert_intermediate_size") or 0), int(cfg.get("intermediate_size") or 0)
    is_moe = _moe_layers(cfg, arch, layers)
    moe_layers = sum(is_moe)
    if moe_layers < layers and not dense:
        raise PerfModelError(f"{where}: {layers - moe_layers} dense layers but no dense MLP width in the config")
    sliding, window = _sliding_window_layers(cfg, arch, layers, where)
    moe = MoE(int(experts), int(cfg["num_experts_per_tok"]), width, shared, moe_layers)
    return ModelArch(family=MOE_ARCHS[arch], num_kv_heads=kv_heads, head_dim=head_dim, dense_intermediate=dense,
                     dense_layers=layers - moe_layers, moe=moe, mla=None, sliding_layers=sliding,
                     sliding_window=window, **common)


def splits_across(model: ModelArch, tp: int) -> bool:
    """Can the engine shard ``model`` over ``tp`` GPUs? The query heads split evenly, and the KV heads too or, past
    their count, each is replicated a whole number of times (sglang's and vLLM's attention layers assert both; an
    MLA latent is replicated whole). Why here: a TP the engine refuses at launch must not be modelled as if real."""
    if tp < 1 or model.num_heads % tp:
        return False
    kv = model.num_kv_heads
    return model.mla is not None or (kv % tp == 0 if kv >= tp else tp % kv == 0)


def check_tp(tp: int, *models: ModelArch) -> None:
    """One line naming the model whose heads ``tp`` cannot split, and the TP sizes that can split every model."""
    for model in models:
        if not splits_across(model, tp):
            valid = [n for n in range(1, max(m.num_heads for m in models) + 1)
                     if all(splits_across(m, n) for m in models)]
            kv = "" if model.mla is not None else f" and {model.num_kv_heads} KV heads"
            raise PerfModelError(f"--tp {tp} cannot split the {model.num_heads} attention heads{kv} of {model.name} "
                                 f"evenly (the engine refuses such a launch); pass --tp one of "
                                 f"{', '.join(map(str, valid))}", parameter="tp", value=tp, problem="indivisible")


def eagle3_drafter(target: ModelArch, draft_vocab: int = DEFAULT_DRAFT_VOCAB,
                   source: str = "sglang/SpecForge EAGLE-3 drafter layout") -> ModelArch:
    """The EAGLE-3 drafter sglang serves with ``target`` (LlamaForCausalLMEagle3): one Llama decoder layer whose
    q/k/v read the embedding and hidden state side by side (2*hidden wide), an fc fusing three target hidden states,
    and an lm_head over a reduced draft vocabulary. SpecForge builds it with the target's hidden size, head layout
    and intermediate_size; its weights are BF16 whatever the target's quantisation.
    """
    # An MLA target has no GQA layout to copy: keep its query heads, 8 KV heads of 128 (a Llama-style drafter).
    heads = target.num_heads
    kv_heads = target.num_kv_heads if target.mla is None else min(8, heads)
    head_dim = target.head_dim if target.mla is None else 128
    intermediate = target.dense_intermediate or (target.moe.expert_intermediate * target.moe.top_k if target.moe
                                                 else 4 * target.hidden)
    return ModelArch(name=f"EAGLE-3 drafter of {target.name}", family="eagle3_draft", num_layers=1,
                     hidden=target.hidden, vocab=target.vocab, head_vocab=min(draft_vocab, target.vocab),
                     num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, dense_intermediate=intermediate,
                     dense_layers=1, moe=None, mla=None, storage=Storage(), source=source,
                     attn_input=2 * target.hidden, fc_input=EAGLE3_AUX_LAYERS * target.hidden)


def drafter_from_config(cfg: Mapping[str, Any], source: str = "draft config.json") -> ModelArch:
    """An EAGLE-3 drafter from its own config.json (``LlamaForCausalLMEagle3``): one decoder layer whose q/k/v read
    2*hidden, an fc over three target hidden states (3 * target_hidden_size) and a draft_vocab_size lm_head."""
    archs = cfg.get("architectures") or []
    if "LlamaForCausalLMEagle3" not in archs:
        raise PerfModelError(f"{source}: a drafter config must name LlamaForCausalLMEagle3 in 'architectures', got "
                             f"{archs or 'none'}", parameter="architectures", value=archs, problem="not_a_drafter")
    _require(cfg, ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"), source)
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    target_hidden = int(cfg.get("target_hidden_size") or hidden)
    return ModelArch(name=str(cfg.get("_name_or_path") or "EAGLE-3 drafter"), family="eagle3_draft", num_layers=1,
                     hidden=hidden, vocab=int(cfg["vocab_size"]),
                     head_vocab=int(cfg.get("draft_vocab_size") or cfg["vocab_size"]), num_heads=heads,
                     num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
                     head_dim=int(cfg.get("head_dim") or hidden // heads),
                     dense_intermediate=int(cfg["intermediate_size"]), dense_layers=1, moe=None, mla=None,
                     storage=storage_from_config(cfg, cfg.get("quantization_config"), source), source=source,
                     attn_input=2 * hidden, fc_input=EAGLE3_AUX_LAYERS * target_hidden)


def eagle1_drafter(target: ModelArch, source: str = "sglang LlamaForCausalLMEagle (EAGLE-1/2) layout") -> ModelArch:
    """The EAGLE(-1/2) drafter: fc over [embedding, target feature] (2*hidden -> hidden) on every draft token, one
    decoder layer of the target's shape, and the target's own lm_head over the full vocabulary (shared weights)."""
    if target.mla is not None:
        raise PerfModelError(f"EAGLE-1 drafter of an MLA target ({target.name}) is not modelled")
    return ModelArch(name=f"EAGLE drafter of {target.name}", family="eagle_draft", num_layers=1, hidden=target.hidden,
                     vocab=target.vocab, head_vocab=target.vocab, num_heads=target.num_heads,
                     num_kv_heads=target.num_kv_heads, head_dim=target.head_dim,
                     dense_intermediate=target.dense_intermediate or 4 * target.hidden, dense_layers=1, moe=None,
                     mla=None, storage=Storage(), source=source, fc_input=2 * target.hidden, fc_every_pass=True)


# each builds the drafter of a target (the rest of its parameters at their defaults)
DRAFTERS: dict[str, Callable[[ModelArch], ModelArch]] = {"eagle3": eagle3_drafter, "eagle1": eagle1_drafter}


def with_name(arch: ModelArch, name: str) -> ModelArch:
    return replace(arch, name=name)


def kv_capacity_tokens(arch: ModelArch, tp: int, gpu_memory_bytes: float, mem_fraction_static: float,
                       extra_resident_bytes: float = 0.0) -> int:
    """Tokens whose KV cache fits next to the weights in sglang's static pool on one GPU."""
    if not 0 < mem_fraction_static <= 1:
        raise PerfModelError(f"capacity: mem_fraction_static must be in (0, 1], got {mem_fraction_static}")
    pool = gpu_memory_bytes * mem_fraction_static - arch.resident_weight_bytes(tp) - extra_resident_bytes
    if pool <= 0:
        raise PerfModelError(f"capacity: '{arch.name}' weights do not fit in {mem_fraction_static:.2f} of a "
                             f"{gpu_memory_bytes / 1e9:.0f} GB GPU at tp={tp}")
    return int(math.floor(pool / arch.kv_bytes_per_token(tp)))
