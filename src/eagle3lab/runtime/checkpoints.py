"""Where a model checkpoint is on this machine, and whether it is all there, without touching the network.

A profile names a model by a local path or a Hugging Face hub id. A hub id is looked up in the Hugging Face
cache (``HF_HUB_CACHE``, ``HF_HOME``; read at call time so a test or a notebook kernel can point it elsewhere),
offline. "All there" is checked from the files themselves: every shard the safetensors index names exists, and
every safetensors file is as long as its own header says (an interrupted copy is shorter). When
``fetch-models`` downloaded the checkpoint it also left a manifest of the hub's file list with sizes, which is
compared too. A 547 GB checkpoint that is missing one shard must fail here, in seconds, not after the load.
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from eagle3lab.paths import cache_dir

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
INDEX_FILE = "model.safetensors.index.json"
MAX_HEADER_BYTES = 100 * 2**20  # the safetensors format's own limit on the JSON header

Kind = Literal["generated", "local", "hub"]


def is_hub_id(source: str) -> bool:
    """``org/name`` that is not an existing local path."""
    return bool(HUB_ID.match(source)) and not source.startswith((".", "/", "~")) and not Path(source).exists()


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, by huggingface_hub's own precedence, read from the environment now."""
    env = os.environ
    explicit = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def repo_folder(repo_id: str, cache: Path | None = None) -> Path:
    """``models--org--name`` under the hub cache (huggingface_hub's layout)."""
    return (cache or hub_cache_dir()) / ("models--" + repo_id.replace("/", "--"))


def cached_snapshot(repo_id: str, revision: str = "main") -> Path | None:
    """The local snapshot of ``repo_id`` at ``revision`` in the hub cache, or None; never goes online."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(repo_id, revision=revision, cache_dir=hub_cache_dir(), local_files_only=True))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError, OSError):
        return None


def manifest_path(repo_id: str, commit: str) -> Path:
    """Where ``fetch-models`` records the hub's file list for one snapshot (under the eagle3lab cache)."""
    return cache_dir("fetched", repo_id.replace("/", "--")) / f"{commit}.json"


@dataclass
class Checkpoint:
    """One model of a profile: where it comes from, where it is, and what is wrong with it, if anything."""

    role: str  # "target" or "draft"
    source: str  # as the profile names it: a hub id, a path, or "tiny"
    kind: Kind
    path: str | None  # the local directory every reader uses; None when it is not on this machine
    revision: str | None = None  # the snapshot's commit, for a hub id
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)
    checked: str = ""  # what the completeness check covered

    @property
    def present(self) -> bool:
        return self.path is not None

    @property
    def complete(self) -> bool:
        return self.present and not self.problems

    @property
    def gigabytes(self) -> float:
        return round(self.bytes / 1e9, 2)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "present": self.present, "complete": self.complete, "gigabytes": self.gigabytes}


def locate(role: str, source: str) -> Checkpoint:
    """Find ``source`` on this machine (a directory, or a hub id in the cache); no completeness check yet."""
    local = Path(source).expanduser()
    if local.is_dir():
        return Checkpoint(role, source, "local", str(local.resolve()))
    if is_hub_id(source):
        snapshot = cached_snapshot(source)
        return Checkpoint(role, source, "hub", str(snapshot) if snapshot else None,
                          revision=snapshot.name if snapshot else None)
    return Checkpoint(role, source, "local", None, problems=[f"{source} is neither a directory nor a hub id (org/name)"])


def safetensors_header(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(header, problem): the JSON header of a safetensors file and whether the file is as long as it says."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return None, f"{path.name}: {size} bytes, too short for a safetensors header"
            length = struct.unpack("<Q", head)[0]
            if length > min(MAX_HEADER_BYTES, size - 8):
                return None, f"{path.name}: header of {length} bytes does not fit in a {size}-byte file (truncated)"
            header = json.loads(handle.read(length))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, f"{path.name}: unreadable safetensors header ({type(exc).__name__})"
    if not isinstance(header, dict):
        return None, f"{path.name}: safetensors header is not a JSON object"
    ends = [entry["data_offsets"][1] for name, entry in header.items()
            if name != "__metadata__" and isinstance(entry, dict) and "data_offsets" in entry]
    expected = 8 + length + max(ends, default=0)
    if size != expected:
        state = "truncated" if size < expected else "longer than its header says"
        return header, f"{path.name}: {size} bytes, header says {expected} ({state})"
    return header, None


def _weights_problems(root: Path) -> tuple[list[str], str]:
    """Problems of the safetensors weights under ``root``, and a note of what was checked."""
    index_path = root / INDEX_FILE
    if index_path.is_file():
        try:
            weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError):
            return [f"{INDEX_FILE} is unreadable or has no weight_map"], "index"
        by_shard: dict[str, set[str]] = {}
        for tensor, shard in weight_map.items():
            by_shard.setdefault(shard, set()).add(tensor)
        problems = []
        missing = sorted(shard for shard in by_shard if not (root / shard).is_file())
        if missing:
            problems.append(f"{len(missing)} of {len(by_shard)} shards the index names are missing "
                            f"(first: {missing[0]})")
        for shard in sorted(set(by_shard) - set(missing)):
            header, problem = safetensors_header(root / shard)
            if problem:
                problems.append(problem)
            if header is not None:
                absent = by_shard[shard] - set(header)
                if absent:
                    problems.append(f"{shard}: {len(absent)} tensors the index places here are not in it "
                                    f"(first: {sorted(absent)[0]})")
        return problems, f"index: {len(by_shard)} shards, {len(weight_map)} tensors, every header"
    shards = sorted(root.glob("*.safetensors"))
    if not shards:
        return ["no safetensors weights (neither an index nor *.safetensors files)"], "none"
    problems = [p for p in (safetensors_header(s)[1] for s in shards) if p]
    return problems, f"{len(shards)} safetensors files, every header"


def _manifest_problems(checkpoint: Checkpoint, root: Path) -> list[str]:
    """Against the hub's own file list, when fetch-models recorded one for this snapshot."""
    if checkpoint.kind != "hub" or not checkpoint.revision:
        return []
    path = manifest_path(checkpoint.source, checkpoint.revision)
    if not path.is_file():
        return []
    try:
        listed: dict[str, int | None] = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError):
        return [f"fetch manifest {path} is unreadable; rerun fetch-models"]
    problems = []
    missing = sorted(name for name in listed if not (root / name).is_file())
    if missing:
        problems.append(f"{len(missing)} of {len(listed)} files the hub lists are missing (first: {missing[0]})")
    wrong = sorted(name for name, size in listed.items()
                   if size is not None and (root / name).is_file() and (root / name).stat().st_size != size)
    if wrong:
        problems.append(f"{len(wrong)} files differ in size from the hub's (first: {wrong[0]})")
    return problems


def _partial_downloads(checkpoint: Checkpoint, complete_by_manifest: bool = False) -> list[str]:
    """Interrupted downloads in the repo's blob store, as a problem of *this* snapshot only when they can be its
    own: blobs are shared by every revision of the repo, so a snapshot the fetch manifest shows complete (every
    listed file present at the hub's size) is not made incomplete by a stale ``*.incomplete`` of another one."""
    if checkpoint.kind != "hub" or complete_by_manifest:
        return []
    blobs = repo_folder(checkpoint.source) / "blobs"
    partial = list(blobs.glob("*.incomplete")) if blobs.is_dir() else []
    return [f"{len(partial)} interrupted downloads in the cache (resumable)"] if partial else []


def _has_manifest(checkpoint: Checkpoint) -> bool:
    return bool(checkpoint.kind == "hub" and checkpoint.revision
                and manifest_path(checkpoint.source, checkpoint.revision).is_file())


def examine(checkpoint: Checkpoint) -> Checkpoint:
    """Fill in size, file count and every problem found; reads only headers, never tensor data."""
    if not checkpoint.present:
        return checkpoint
    root = Path(checkpoint.path)  # type: ignore[arg-type]
    files = [p for p in root.rglob("*") if p.is_file() and ".cache" not in p.relative_to(root).parts]
    checkpoint.files = len(files)
    checkpoint.bytes = sum(p.stat().st_size for p in files)
    problems = []
    if not (root / "config.json").is_file():
        problems.append("no config.json")
    weights, checked = _weights_problems(root)
    listed = _manifest_problems(checkpoint, root)
    problems += weights + listed + _partial_downloads(checkpoint, _has_manifest(checkpoint) and not listed)
    checkpoint.problems = [*checkpoint.problems, *problems]
    checkpoint.checked = checked
    return checkpoint
