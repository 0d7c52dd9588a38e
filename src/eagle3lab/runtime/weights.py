"""A checkpoint's weights as one tensor-parallel rank of sglang 0.5.9 holds them: sharded tensors split, the
replicated ones whole, plus what sglang derives after loading.

Dividing the checkpoint's size by ``tp_size`` undercounts: sglang keeps some of Kimi-K2.5's tensors whole on every
rank (MLA's down-projections, the router, the norms, most of the vision tower) and copies one (``kv_b_proj``, split
into ``w_kc``/``w_vc`` after loading). Which is which follows the module each weight loads into in sglang 0.5.9:

- split across ranks: ``VocabParallelEmbedding``/``ParallelLMHead`` (``deepseek_v2.py:2531``, ``:2818``), the
  column- and row-parallel attention projections ``q_b_proj``, ``q_proj``, ``kv_b_proj``, ``o_proj``
  (``:1130-1196``), the dense and shared-expert MLPs (``:466``, ``:2306``), the routed experts (``FusedMoE`` shards
  each expert's intermediate dimension under tensor parallelism, ``:420``), the vision tower's attention
  (``VisionAttention``'s QKV- and row-parallel layers, ``kimi_k25.py:122``) and the EAGLE-3 drafter's Llama layer;
- whole on every rank: ``fused_qkv_a_proj_with_mqa`` (``q_a_proj`` + ``kv_a_proj_with_mqa``, a ``ReplicatedLinear``,
  ``:1122``, ``:1149``), the MoE router and its bias, every norm, the vision MLPs (``nn.Linear``,
  ``kimi_vl_moonvit.py:399-400``), the patch embedding and the projector (``ReplicatedLinear``,
  ``kimi_k25.py:557-563``), the drafter's ``fc`` and vocabulary maps;
- derived: ``post_load_weights`` makes contiguous copies of each rank's ``kv_b_proj`` as ``w_kc`` and ``w_vc``
  (``deepseek_common/deepseek_weight_loader.py:570-576``): one more ``kv_b_proj`` shard per rank.

Tensor shapes come from the shards' safetensors headers when the shards are on disk (exact), else from the
checkpoint's ``model.safetensors.index.json`` (which tensors) and ``config.json`` with its ``quantization_config``
(their shapes: compressed-tensors ``pack-quantized`` stores a quantized linear as ``weight_packed`` int32
[out, in x bits / 32], ``weight_scale`` [out, in / group] and ``weight_shape`` [2]); the index's
``metadata.total_size`` checks the shapes so derived.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

from eagle3lab.errors import ModelPathError
from eagle3lab.runtime.checkpoints import INDEX_FILE, safetensors_header

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8, "I8": 1, "U8": 1, "F8_E4M3": 1, "BOOL": 1,
               "bfloat16": 2, "float16": 2, "float32": 4, "int32": 4, "int64": 8, "int8": 1, "uint8": 1}
Placement = Literal["sharded", "replicated"]

_SHARDED = re.compile(
    r"(^|\.)(embed_tokens|lm_head)\.|self_attn\.(q_b_proj|q_proj|kv_b_proj|o_proj|k_proj|v_proj|qkv_proj)\.|"
    r"\.mlp\.(gate_proj|up_proj|down_proj|gate_up_proj)\.|\.shared_experts\.|\.experts\.\d+\.(gate|up|down)_proj\.|"
    r"vision_tower\.encoder\.blocks\.\d+\.(wqkv\.|wo\.weight)")
_NOT_SHARDED = re.compile(r"\.weight_shape$")  # compressed-tensors' [2] shape record, the same on every rank
_KV_B_PROJ = re.compile(r"self_attn\.kv_b_proj\.weight$")


def placement(name: str) -> Placement:
    """Whether sglang 0.5.9 splits tensor ``name`` across tensor-parallel ranks (module docstring)."""
    return "sharded" if _SHARDED.search(name) and not _NOT_SHARDED.search(name) else "replicated"


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


@dataclass
class RankWeights:
    """One rank's share of a checkpoint, in bytes, and where the shapes came from."""

    tp_size: int
    per_rank_bytes: int
    sharded_bytes: int  # the whole checkpoint's split tensors (each rank holds 1 / tp_size of them)
    replicated_bytes: int  # held whole by every rank
    derived_bytes: int  # per rank, made after loading (w_kc, w_vc)
    total_bytes: int
    tensors: int
    source: str  # "safetensors headers" or "index + config"
    index_total_bytes: int | None = None  # the index's metadata.total_size, when it has one
    unknown: list[str] = field(default_factory=list)  # tensors whose shape the config does not give

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rank_weights(tensors: Iterable[Tensor], tp_size: int, source: str,
                 index_total_bytes: int | None = None, unknown: Iterable[str] = ()) -> RankWeights:
    """Sum ``tensors`` into one rank's bytes under ``placement``."""
    sharded = replicated = derived = count = 0
    for tensor in tensors:
        count += 1
        if placement(tensor.name) == "sharded":
            sharded += tensor.nbytes
            if _KV_B_PROJ.search(tensor.name):
                derived += tensor.nbytes // tp_size
        else:
            replicated += tensor.nbytes
    per_rank = sharded // tp_size + replicated + derived
    return RankWeights(tp_size, per_rank, sharded, replicated, derived, sharded + replicated, count, source,
                       index_total_bytes, list(unknown))


def from_headers(model_dir: Path) -> list[Tensor] | None:
    """Every tensor from the safetensors headers of the shards on disk; None unless every shard is there."""
    index = _read_index(model_dir)
    shards = sorted(set(index["weight_map"].values())) if index else [p.name for p in model_dir.glob("*.safetensors")]
    if not shards or not all((model_dir / s).is_file() for s in shards):
        return None
    tensors = []
    for shard in shards:
        header, problem = safetensors_header(model_dir / shard)
        if header is None or problem:
            return None
        tensors += [Tensor(name, tuple(entry["shape"]), entry["dtype"]) for name, entry in header.items()
                    if name != "__metadata__"]
    return tensors


def _read_index(model_dir: Path) -> dict[str, Any] | None:
    path = model_dir / INDEX_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelPathError(f"{path} is unreadable ({type(exc).__name__}); fetch the checkpoint again",
                             path=path, problem="unreadable_index") from None
    if not isinstance(data.get("weight_map"), dict):
        raise ModelPathError(f"{path} has no weight_map; fetch the checkpoint again", path=path,
                             problem="no_weight_map")
    return data


def checkpoint_rank_weights(model_dir: str | Path, tp_size: int) -> RankWeights:
    """One rank's weights: from the shards' headers when all are on disk, else from the index and the config."""
    root = Path(model_dir)
    index = _read_index(root)
    total = (index or {}).get("metadata", {}).get("total_size")
    total = int(total) if isinstance(total, (int, float)) else None
    exact = from_headers(root)
    if exact is not None:
        return rank_weights(exact, tp_size, "safetensors headers", total)
    if index is None:
        raise ModelPathError(f"{root} has neither every safetensors shard nor {INDEX_FILE}: its weights cannot be "
                             "sized; fetch the checkpoint (or at least its configs)", path=root, problem="no_weights")
    config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    shapes = ConfigShapes(config)
    tensors, unknown = [], []
    for name in index["weight_map"]:
        tensor = shapes.tensor(name)
        if tensor is None:
            unknown.append(name)
        else:
            tensors.append(tensor)
    return rank_weights(tensors, tp_size, "index + config", total, unknown)


class ConfigShapes:
    """The shape and dtype of each tensor a DeepSeek-V3-family checkpoint (Kimi-K2.5, with its MoonViT vision tower
    and projector) names, read from its ``config.json`` and ``quantization_config``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.text: dict[str, Any] = dict(config.get("text_config") or config)
        self.vision: dict[str, Any] = dict(config.get("vision_config") or {})
        self.dtype = str(config.get("torch_dtype") or self.text.get("torch_dtype") or "bfloat16")
        quant = config.get("quantization_config") or self.text.get("quantization_config") or {}
        groups = [g.get("weights") or {} for g in (quant.get("config_groups") or {}).values()]
        self.bits = int(groups[0].get("num_bits", 16)) if groups else 16
        self.group = int(groups[0].get("group_size", 0) or 0) if groups else 0

    def linear_shape(self, module: str) -> tuple[int, int] | None:
        """(out, in) of a linear layer of the text model, by its dotted name (without ``language_model.``)."""
        t = self.text
        hidden, heads = t["hidden_size"], t["num_attention_heads"]
        nope, rope, v = t.get("qk_nope_head_dim", 0), t.get("qk_rope_head_dim", 0), t.get("v_head_dim", 0)
        q_lora, kv_lora, dense = t.get("q_lora_rank"), t.get("kv_lora_rank", 0), t.get("intermediate_size", 0)
        moe = t.get("moe_intermediate_size", 0)
        shared = moe * (t.get("n_shared_experts") or 0)
        table = {
            "self_attn.q_a_proj": (q_lora, hidden), "self_attn.q_b_proj": (heads * (nope + rope), q_lora),
            "self_attn.q_proj": (heads * (nope + rope), hidden),
            "self_attn.kv_a_proj_with_mqa": (kv_lora + rope, hidden),
            "self_attn.kv_b_proj": (heads * (nope + v), kv_lora), "self_attn.o_proj": (hidden, heads * v),
            "mlp.shared_experts.gate_proj": (shared, hidden), "mlp.shared_experts.up_proj": (shared, hidden),
            "mlp.shared_experts.down_proj": (hidden, shared),
            "mlp.gate_proj": (dense, hidden), "mlp.up_proj": (dense, hidden), "mlp.down_proj": (hidden, dense),
            "mlp.experts.gate_proj": (moe, hidden), "mlp.experts.up_proj": (moe, hidden),
            "mlp.experts.down_proj": (hidden, moe), "mlp.gate": (t.get("n_routed_experts", 0), hidden),
        }
        return table.get(module)

    def tensor(self, name: str) -> Tensor | None:
        """``name``'s shape and dtype, or None when the config does not say."""
        shape = self._text_tensor(name.removeprefix("language_model.")) if not name.startswith(
            ("vision_tower.", "mm_projector.")) else self._vision_tensor(name)
        if shape is None:
            return None
        dims, dtype = shape
        return Tensor(name, tuple(int(d) for d in dims), dtype)

    def _text_tensor(self, name: str) -> tuple[tuple[int, ...], str] | None:
        t, dtype = self.text, self.dtype
        hidden = t["hidden_size"]
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            return (t["vocab_size"], hidden), dtype
        if name == "model.norm.weight" or re.search(r"layers\.\d+\.(input|post_attention)_layernorm\.weight$", name):
            return (hidden,), dtype
        if name.endswith("q_a_layernorm.weight"):
            return (t["q_lora_rank"],), dtype
        if name.endswith("kv_a_layernorm.weight"):
            return (t["kv_lora_rank"],), dtype
        if name.endswith("mlp.gate.e_score_correction_bias"):
            return (t["n_routed_experts"],), "float32"  # kept in fp32 (DeepSeek-V3's router bias)
        match = re.match(r"model\.layers\.\d+\.(.+?)\.(weight|weight_packed|weight_scale|weight_shape)$", name)
        if not match:
            return None
        module, kind = re.sub(r"experts\.\d+\.", "experts.", match[1]), match[2]
        out_in = self.linear_shape(module)
        if out_in is None or None in out_in:
            return None
        out, inp = out_in
        if kind == "weight":
            return (out, inp), dtype
        if kind == "weight_shape":
            return (2,), "int32"
        if kind == "weight_packed":
            return (out, inp * self.bits // 32), "int32"
        return (out, math.ceil(inp / self.group) if self.group else 1), dtype

    def _vision_tensor(self, name: str) -> tuple[tuple[int, ...], str] | None:
        v, dtype = self.vision, self.dtype
        width = v.get("vt_hidden_size", v.get("hidden_size"))
        widest = v.get("vt_intermediate_size", v.get("intermediate_size"))
        if width is None or widest is None:
            return None
        h, inter = int(width), int(widest)
        mm = int(v.get("mm_hidden_size") or h)
        merged = mm * math.prod(v.get("merge_kernel_size", [2, 2]))
        patch, text = int(v.get("patch_size", 14)), int(v.get("text_hidden_size", self.text["hidden_size"]))
        table: dict[str, tuple[int, ...]] = {
            "wqkv.weight": (3 * h, h), "wqkv.bias": (3 * h,), "wo.weight": (h, h), "wo.bias": (h,),
            "mlp.fc0.weight": (inter, h), "mlp.fc0.bias": (inter,), "mlp.fc1.weight": (h, inter), "mlp.fc1.bias": (h,),
            "norm0.weight": (h,), "norm0.bias": (h,), "norm1.weight": (h,), "norm1.bias": (h,),
            "encoder.final_layernorm.weight": (h,), "encoder.final_layernorm.bias": (h,),
            "patch_embed.pos_emb.weight": (int(v.get("init_pos_emb_height", 64)), int(v.get("init_pos_emb_width", 64)),
                                           h),
            "patch_embed.proj.weight": (h, 3, patch, patch), "patch_embed.proj.bias": (h,),
            "pre_norm.weight": (mm,), "pre_norm.bias": (mm,),
            "proj.0.weight": (merged, merged), "proj.0.bias": (merged,),
            "proj.2.weight": (text, merged), "proj.2.bias": (text,),
        }
        key = re.sub(r"^(vision_tower|mm_projector)\.(encoder\.blocks\.\d+\.)?", "", name)
        return (table[key], dtype) if key in table else None
