"""What a GPU is, for the cost model: datasheet numbers, each with the public source it comes from.

Only physical capacities live here (bandwidth, FLOP/s, memory, links). How much of them software achieves, and
what it adds on top, is the engine's business (``engine``), so one set of achieved-fraction constants serves
every GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping, Optional

from eagle3lab.errors import PerfModelError

GB = 1e9
TB = 1e12
INTERCONNECTS = ("nvlink", "pcie", "xgmi", "none")


@dataclass(frozen=True)
class Hardware:
    """One GPU model and how GPUs of a TP group are linked. Rates per GPU; link bandwidth per direction."""

    name: str
    mem_bandwidth: float  # bytes/s, datasheet peak
    memory_bytes: float
    peak_bf16_flops: float  # dense (no sparsity) tensor-core FLOP/s
    peak_fp8_flops: Optional[float]  # dense FP8 tensor-core FLOP/s; None where FP8 GEMMs are not used
    interconnect: str  # "nvlink", "pcie", "xgmi" (AMD Infinity Fabric) or "none"
    link_bandwidth: float  # bytes/s per direction per GPU into the TP group
    allreduce_latency_s: float  # one small all-reduce through the library path (NCCL/RCCL) across the group
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    # the measured collective curves of this exact link (data/collectives.yaml); None: the link kind's reference
    # curves scaled by this GPU's datasheet link bandwidth (costmodel.collectives)
    collectives: Optional[str] = None

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("name", "sources", "interconnect", "collectives"):
                continue
            value = getattr(self, f.name)
            if value is None and f.name == "peak_fp8_flops":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
                raise PerfModelError(f"hardware '{self.name}': {f.name} must be a positive number, got {value!r}")
            if not str(self.sources.get(f.name, "")).strip():
                raise PerfModelError(f"hardware '{self.name}': {f.name} has no source; add one to sources")
        if self.interconnect not in INTERCONNECTS:
            raise PerfModelError(f"hardware '{self.name}': interconnect must be one of {', '.join(INTERCONNECTS)}, "
                                 f"got {self.interconnect!r}", parameter="interconnect", value=self.interconnect,
                                 problem="unknown")

    def gemm_peak_flops(self, weight_bytes_per_param: float) -> float:
        """Tensor-core rate a weight GEMM runs at: FP8 for 1-byte (W8A8) weights where the GPU has it, else BF16
        (4-bit weights are dequantised to BF16 in W4A16 kernels such as Marlin/compressed-tensors)."""
        if self.peak_fp8_flops and 0.9 <= weight_bytes_per_param <= 1.1:
            return self.peak_fp8_flops
        return self.peak_bf16_flops

    def with_(self, source: str, **changes: Any) -> "Hardware":
        """The same hardware with some numbers replaced; ``source`` says where the new numbers come from."""
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise PerfModelError(f"hardware '{self.name}': unknown parameter(s) {sorted(unknown)}",
                                 parameter=sorted(unknown)[0], problem="unknown_parameter")
        return replace(self, **changes, sources={**self.sources, **{k: source for k in changes}})
