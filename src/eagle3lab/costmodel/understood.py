"""What ``predict`` understood of its inputs, and where a point lies outside what the model was checked on.

Why: a user who types a hub id, a datasheet and a TP size should see the model's reading back (parameters, active
parameters, weight dtype, layers, the GPU's numbers, which measured all-reduce curve applies) before trusting a
speedup, and should be told when the answer extrapolates: a TP size, link or batch size that no published point the
model was compared with ever had, or a feature it does not model (decode context parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

from eagle3lab.costmodel.arch import ModelArch
from eagle3lab.costmodel.collectives import link_for
from eagle3lab.costmodel.engine import Engine
from eagle3lab.costmodel.gpus import HARDWARE
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.costmodel.public_sweeps import load_sweeps
from eagle3lab.costmodel.validation import load_dataset

_BYTES = {0.5625: "int4 (group 32)", 1.0: "fp8", 2.0: "bf16", 4.0: "fp32"}


def _dtype(bytes_per: float) -> str:
    near = min(_BYTES, key=lambda b: abs(b - bytes_per))
    return _BYTES[near] if abs(near - bytes_per) < 0.05 else f"{bytes_per:.3g} bytes"


def describe(target: ModelArch, drafter: ModelArch, hw: Hardware, tp: int, engine: Engine) -> list[str]:
    """One line each: the target, its weights and cache, the drafter, the GPU, the link's collectives, the engine."""
    moe = target.moe
    experts = (f", {moe.layers} MoE layers of {moe.n_experts} experts (top {moe.top_k})" if moe else ", dense")
    s = target.storage
    weights = (f"weights {_dtype(s.linear)}" + (f", routed experts {_dtype(s.expert)}" if moe and s.expert != s.linear
                                                 else ""))
    lines = [f"model: {target.name} ({target.family}, from {target.source}): {target.total_params() / 1e9:.1f}B "
             f"parameters, {target.active_params() / 1e9:.1f}B active per token, {target.num_layers} layers, hidden "
             f"{target.hidden}{experts}; {weights}; KV cache {_dtype(s.kv)}, "
             f"{target.kv_bytes_per_token(tp) / 1024:.1f} KiB per token per GPU at TP {tp}",
             f"drafter: {drafter.name}: {drafter.num_layers} layer, hidden {drafter.hidden}, head over "
             f"{drafter.head_vocab} tokens, {drafter.total_params() / 1e9:.2f}B parameters",
             f"GPU: {tp}x {hw.name}: {hw.mem_bandwidth / 1e9:,.0f} GB/s memory, {hw.memory_bytes / 1e9:.0f} GB, dense "
             f"BF16 {hw.peak_bf16_flops / 1e12:,.0f} TFLOP/s" + (f", FP8 {hw.peak_fp8_flops / 1e12:,.0f} TFLOP/s"
                                                                   if hw.peak_fp8_flops else ", no FP8")
             + (f"; link {hw.interconnect} {hw.link_bandwidth / 1e9:g} GB/s per direction" if tp > 1 else "")]
    if tp > 1:
        key, link = link_for(hw.collectives, hw.interconnect)
        own = "its own" if hw.collectives else f"the {hw.interconnect} reference, scaled by the datasheet link"
        lines.append(f"all-reduce: measured curves of {link.gpu} ({key}, {own}); engine custom all-reduce on "
                     f"{engine.custom_allreduce}")
    lines.append(f"engine: {engine.name} (overlap: plain {engine.overlap_baseline}, EAGLE {engine.overlap_spec}; "
                 f"verify reads the KV cache {'per query token' if engine.verify_kv_per_query else 'once per request'})")
    return lines


@dataclass(frozen=True)
class Covered:
    """What the published points the model was compared with covered."""

    tp_by_link: dict[str, frozenset[int]]
    max_batch: int
    hardware: frozenset[str]


@lru_cache(maxsize=1)
def covered() -> Covered:
    """The link kinds, TP sizes, batch sizes and GPUs of every seen point (spec_validation.yaml, rtx6kpro sweeps)."""
    data = load_dataset()
    tp: dict[str, set[int]] = {}
    hardware, batches = set(), [1]
    for src in data.sources:
        kind = HARDWARE[src.hardware]().interconnect
        hardware.add(src.hardware)
        for s in src.series:
            tp.setdefault(kind, set()).add(s.tp)
            batches.extend(s.batches)
    sweeps = load_sweeps()
    tp.setdefault("pcie", set()).update(r.tp for r in sweeps.rows)
    hardware.add("rtx-pro-6000-blackwell")
    batches.extend(r.concurrency for r in sweeps.rows)
    return Covered({k: frozenset(v) for k, v in tp.items()}, max(batches), frozenset(hardware))


def condition_notes(hw: Hardware, tp: int, batches: Sequence[int], dcp: int = 1,
                    preset: str | None = None) -> list[str]:
    """Where this point lies outside what the model was checked on, one sentence each (empty: inside)."""
    c = covered()
    notes = []
    kind = hw.interconnect if tp > 1 else "none"
    if tp > 1 and tp not in c.tp_by_link.get(kind, frozenset()):
        seen = ", ".join(str(t) for t in sorted(c.tp_by_link.get(kind, frozenset()))) or "none"
        notes.append(f"outside the validated conditions: no published point at TP {tp} over {kind} was compared "
                     f"(seen over {kind}: TP {seen})")
    if preset not in c.hardware:
        notes.append(f"outside the validated conditions: no published point on {hw.name} was compared (GPUs seen: "
                     f"{', '.join(sorted(c.hardware))}); its datasheet numbers are used as given")
    if max(batches) > c.max_batch:
        notes.append(f"outside the validated conditions: batch {max(batches)} is above the largest compared "
                     f"({c.max_batch})")
    note = dcp_note(dcp)
    if note is not None:
        notes.append(note)
    return notes


def dcp_note(dcp: int) -> Optional[str]:
    """The one line that says decode context parallelism is outside the model (None at DCP 1): predict and doctor
    both print it, so a DCP > 1 deployment is never answered silently as DCP 1."""
    if dcp <= 1:
        return None
    return (f"decode context parallelism (DCP {dcp}) is not modelled: the KV cache split across GPUs and its "
            "extra collectives are left out, so this answer is the DCP 1 one")
