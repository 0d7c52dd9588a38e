"""Seeded random values for a tensor spec, written as one safetensors file with an index.

Values are random, not trained, yet well-behaved: norm weights 1, biases 0, the vocabulary maps identity (d2t 0,
t2d true), every other weight N(0, 0.02). The same spec and seed always give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from safetensors.torch import save_file

TensorSpecs = Mapping[str, tuple[Sequence[int], str]]
CHECKPOINT_FILE = "model.safetensors"


def _value(name: str, shape: Sequence[int], dtype: str, generator: torch.Generator) -> torch.Tensor:
    if dtype == "bool":
        return torch.ones(shape, dtype=torch.bool)  # t2d: every target token exists in the draft vocabulary
    if dtype.startswith("int"):
        return torch.zeros(shape, dtype=getattr(torch, dtype))  # d2t: draft id == target id
    leaf = name.rsplit(".", 2)
    if name.endswith("bias"):
        return torch.zeros(shape, dtype=torch.bfloat16)
    if len(shape) == 1 and "norm" in (leaf[-2] if len(leaf) > 1 else name):
        return torch.ones(shape, dtype=torch.bfloat16)
    return (torch.randn(tuple(shape), generator=generator) * 0.02).to(torch.bfloat16)


def write_checkpoint(directory: Path, specs: TensorSpecs, seed: int) -> int:
    """Write ``model.safetensors`` (+ index) for ``specs``; returns the file size in bytes."""
    generator = torch.Generator().manual_seed(seed)
    tensors = {name: _value(name, shape, dtype, generator) for name, (shape, dtype) in sorted(specs.items())}
    path = directory / CHECKPOINT_FILE
    save_file(tensors, str(path), metadata={"format": "pt"})
    size = path.stat().st_size
    index = {"metadata": {"total_size": size}, "weight_map": {name: CHECKPOINT_FILE for name in sorted(tensors)}}
    (directory / f"{CHECKPOINT_FILE}.index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return size
