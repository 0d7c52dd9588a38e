"""Kimi-K2.5's checkpoint without its 595 GB: the published config.json and the index its tensor list makes.

``runtime/data/kimi-k2.5/tensors.yaml`` is every tensor of the checkpoint (name patterns, shapes, dtypes, as its shards'
headers give them); ``runtime/data/kimi-k2.5/config.json`` is its config.json (the published one's fields; ``auto_map``
left out, so sglang's own ``KimiK25Config`` reads it without Moonshot's remote code). ``write_checkpoint`` lays
them out as a fetched snapshot that has only its configs: config.json and model.safetensors.index.json, no shard.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shutil
from pathlib import Path

import yaml

DATA = Path(__file__).parent / "runtime" / "data" / "kimi-k2.5"
DTYPE_BYTES = {"bfloat16": 2, "int32": 4, "float32": 4}
RTX_PRO_6000_MIB = 97887  # memory.total nvidia-smi reports for an RTX PRO 6000 Blackwell (the figure)


def inventory() -> dict:
    return yaml.safe_load((DATA / "tensors.yaml").read_text(encoding="utf-8"))


def expand(pattern: str) -> list[str]:
    """``a.{0-2}.b`` -> ``a.0.b``, ``a.1.b``, ``a.2.b`` (every range, nested)."""
    parts = re.split(r"\{(\d+)-(\d+)\}", pattern)
    texts, ranges = parts[0::3], [range(int(a), int(b) + 1) for a, b in zip(parts[1::3], parts[2::3])]
    return ["".join(t + (str(n) if i < len(combo) else "") for i, (t, n) in
                    enumerate(itertools.zip_longest(texts, combo, fillvalue=0)))
            for combo in itertools.product(*ranges)]


def tensors() -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, dtype) of every tensor of the checkpoint."""
    return [(name, tuple(shape), dtype) for pattern, shape, dtype in inventory()["rows"] for name in expand(pattern)]


def write_checkpoint(root: Path) -> Path:
    """config.json and a model.safetensors.index.json naming every tensor (64 shards, none present)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / "config.json", root / "config.json")
    listed = tensors()
    total = sum(math.prod(shape) * DTYPE_BYTES[dtype] for _, shape, dtype in listed)
    weight_map = {name: f"model-{1 + i % 64:05d}-of-000064.safetensors" for i, (name, _, _) in enumerate(listed)}
    (root / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}), encoding="utf-8")
    return root
