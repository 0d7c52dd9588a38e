"""The tiny Kimi-K2.5-shaped target and its EAGLE-3 drafter, built once per input set and cached.

``build_tiny_models()`` returns two model directories that real sglang 0.5.9 loads with its real loader:
config.json, tokenizer files and a seeded random-valued safetensors checkpoint in the real Hugging Face naming.
The cache key hashes every input (both config dicts, seed, vocabulary, generator version, and the sglang and
transformers versions whose classes define the tensor names), so changing any of them builds a new model.
The manifest records the sha256 of every file built; each use of the cache checks them, so a truncated or edited
file is reported (with ``setup --rebuild`` as the fix) instead of being loaded as "(cached)".
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from eagle3lab.atomic import building_dir
from eagle3lab.childjson import ask_child
from eagle3lab.errors import TinyModelError
from eagle3lab.paths import cache_dir
from eagle3lab.runtime.tinymodel.checkpoint import write_checkpoint
from eagle3lab.runtime.tinymodel.configs import VOCAB_SIZE, draft_config, scale_aux_layer_ids, target_config
from eagle3lab.runtime.tinymodel.tokenizer import CHAT_TEMPLATE, write_tokenizer
from eagle3lab.runtime.cpu_harness import cpu_environment
from eagle3lab.atomic import write_json_atomic

GENERATOR_VERSION = "3"
MANIFEST = "eagle3lab-tiny.json"

__all__ = ["TinyModels", "build_tiny_models", "cache_key", "scale_aux_layer_ids", "tiny_model_inputs"]


@dataclass(frozen=True)
class TinyModels:
    """Where the tiny pair lives and what it is."""

    target_dir: Path
    draft_dir: Path
    cache_key: str
    aux_layer_ids: list[int]
    num_layers: int
    checkpoint_bytes: int  # target + draft safetensors
    build_seconds: float | None  # None when taken from the cache


def _installed(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "absent"


def tiny_model_inputs(seed: int = 0, num_layers: int = 4, aux_layer_ids: Sequence[int] | None = None
                      ) -> dict[str, Any]:
    """Everything that determines the generated files (hashed into the cache key)."""
    if not isinstance(seed, int) or seed < 0:
        raise TinyModelError(f"seed must be a non-negative integer, got {seed!r}", parameter="seed", value=seed)
    return {
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "target": target_config(num_layers),
        "draft": draft_config(num_layers, aux_layer_ids),
        "vocab_size": VOCAB_SIZE,
        "chat_template": CHAT_TEMPLATE,
        "sglang": _installed("sglang"),
        "transformers": _installed("transformers"),
    }


def cache_key(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _probe_tensor_specs(inputs: dict[str, Any]) -> dict[str, Any]:
    """Tensor names/shapes from the real classes, computed in a child process (see ``probe``)."""

    env = {**os.environ, **cpu_environment(shims=())}
    request = json.dumps({"target": inputs["target"], "draft": inputs["draft"]})
    answer = ask_child("eagle3lab.runtime.tinymodel.probe", stdin=request, env=env)
    if not answer.ok:
        raise TinyModelError(f"could not derive the tiny checkpoint's tensors from sglang: {answer.failure()}",
                             problem="probe_failed")
    return answer.payload


def _write_model(directory: Path, config: dict[str, Any], specs: dict[str, Any], seed: int) -> int:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    write_tokenizer(directory, VOCAB_SIZE)
    return write_checkpoint(directory, specs, seed)


def _read_manifest(root: Path) -> dict[str, Any] | None:
    try:
        return json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


REBUILD_HINT = "rebuild it with: python -m eagle3lab setup --rebuild"


def _file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file of both models, by path relative to the pair's folder."""
    out = {}
    for part in ("target", "draft"):
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file is not whole (its header's tensor extents must end exactly at the file's end)."""
    try:
        with open(path, "rb") as handle:
            size_bytes = handle.read(8)
            header_len = int.from_bytes(size_bytes, "little") if len(size_bytes) == 8 else -1
            header = json.loads(handle.read(header_len)) if 0 < header_len < (100 << 20) else None
    except (OSError, ValueError):
        header = None
    if not isinstance(header, dict):
        return "has no readable safetensors header"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    actual = path.stat().st_size
    return None if actual == 8 + header_len + end else f"is {actual} bytes, its header says {8 + header_len + end}"


def verify_cache(root: Path, manifest: dict[str, Any]) -> None:
    """Every file the manifest lists is there with its checksum; a cache from before checksums were recorded
    gets a structural check of its checkpoints, then its checksums recorded. Raises TinyModelError."""
    recorded = manifest.get("files")
    if recorded is None:
        for path in sorted(root.glob("*/*.safetensors")):
            problem = safetensors_problem(path)
            if problem:
                raise TinyModelError(f"tiny model cache {root} is damaged: {path.relative_to(root)} {problem}; "
                                     f"{REBUILD_HINT}", path=path, problem="damaged")

        write_json_atomic(root / MANIFEST, {**manifest, "files": _file_hashes(root)})
        return
    actual = _file_hashes(root)
    for rel, digest in recorded.items():
        if rel not in actual:
            raise TinyModelError(f"tiny model cache {root} is damaged: {rel} is missing; {REBUILD_HINT}", path=root / rel,
                                 problem="damaged")
        if actual[rel] != digest:
            raise TinyModelError(f"tiny model cache {root} is damaged: {rel} does not match the checksum recorded "
                                 f"when it was built; {REBUILD_HINT}", path=root / rel, problem="damaged")


def build_tiny_models(cache_root: Path | None = None, seed: int = 0, num_layers: int = 4,
                      force: bool = False, aux_layer_ids: Sequence[int] | None = None) -> TinyModels:
    """Return the tiny target + drafter for these inputs, building them into the cache if they are not there.

    ``cache_root`` defaults to ``cache_dir("models")``; the pair lives in ``<cache_root>/<cache_key>/{target,draft}``.
    The build is atomic (a temporary folder renamed into place), so an interrupted build is never reused.
    """
    inputs = tiny_model_inputs(seed=seed, num_layers=num_layers, aux_layer_ids=aux_layer_ids)
    key = cache_key(inputs)
    base = Path(cache_root) if cache_root is not None else cache_dir("models")
    root = base / key
    manifest = _read_manifest(root)
    build_seconds: float | None = None
    if manifest is None or force:
        started = time.perf_counter()
        with building_dir(root) as staging:
            specs = _probe_tensor_specs(inputs)
            sizes = {part: _write_model(staging / part, inputs[part], specs[part], seed + offset)
                     for offset, part in enumerate(("target", "draft"))}
            build_seconds = round(time.perf_counter() - started, 2)
            manifest = {"cache_key": key, "inputs": inputs, "checkpoint_bytes": sizes, "build_seconds": build_seconds,
                        "tensors": {part: len(specs[part]) for part in specs}, "files": _file_hashes(staging)}
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    else:
        verify_cache(root, manifest)
    origin = f"built in {build_seconds:.1f} s" if build_seconds is not None else "cached, checksums verified"
    print(f"tiny models: cache key {key} ({origin}) at {root}")
    return TinyModels(
        target_dir=root / "target",
        draft_dir=root / "draft",
        cache_key=key,
        aux_layer_ids=list(inputs["draft"]["eagle_config"]["eagle_aux_hidden_state_layer_ids"]),
        num_layers=num_layers,
        checkpoint_bytes=sum(manifest["checkpoint_bytes"].values()),
        build_seconds=build_seconds,
    )
