"""The installed sglang compared, file by file, with the release it was installed from.

Why: "is the package exactly the release?" is the question every fault must answer with yes afterwards, and the
answer needs no network: pip wrote the sha256 of every file of the wheel into the ``RECORD`` of the
distribution. ``drift()`` lists what differs (modified, missing, and the project's own temporary files left
behind); ``package_hashes()`` is the plain fingerprint tests compare before and after a fault.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from eagle3lab.package.location import PACKAGE

TEMP_SUFFIX = ".eagle3lab-tmp"  # what eagle3lab.atomic names its temporary files


@dataclass(frozen=True)
class ReleaseRecord:
    """The release's file list: site-packages-relative path -> sha256 (hex), from the distribution's RECORD."""

    version: str
    root: Path
    hashes: dict[str, str]
    sizes: dict[str, int | None]


@dataclass(frozen=True)
class Drift:
    """How the installed package differs from its release (paths relative to site-packages)."""

    version: str
    modified: tuple[str, ...]
    missing: tuple[str, ...]
    stray: tuple[str, ...]  # temporary files of interrupted atomic writes

    @property
    def clean(self) -> bool:
        return not (self.modified or self.missing or self.stray)

    def files(self) -> tuple[str, ...]:
        return self.modified + self.missing + self.stray

    def summary(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("modified", self.modified), ("missing", self.missing),
                                               ("stray temporary", self.stray)) if v]
        return ", ".join(parts) or "identical"


def _b64_to_hex(value: str) -> str:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def release_record(root: Path) -> ReleaseRecord | None:
    """The RECORD of the sglang distribution installed in ``root`` (a site-packages folder), if there is one."""
    for dist in importlib.metadata.distributions(path=[str(root)]):
        if (dist.metadata["Name"] or "").lower() != PACKAGE:
            continue
        hashes: dict[str, str] = {}
        sizes: dict[str, int | None] = {}
        for entry in dist.files or []:
            rel = entry.as_posix()
            if not rel.startswith(PACKAGE + "/") or entry.hash is None or entry.hash.mode != "sha256":
                continue
            hashes[rel] = _b64_to_hex(entry.hash.value)
            sizes[rel] = entry.size
        return ReleaseRecord(dist.version, Path(root), hashes, sizes)
    return None


def _package_files(root: Path) -> list[str]:
    base = Path(root) / PACKAGE
    out = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            out.append((Path(folder) / name).relative_to(root).as_posix())
    return sorted(out)


def package_hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root/sglang`` (byte caches excluded): the package's fingerprint."""
    return {rel: sha256_file(Path(root) / rel) for rel in _package_files(root)}


@overload
def drift(root: Path, record: ReleaseRecord) -> Drift: ...
@overload
def drift(root: Path, record: None = None) -> Drift | None: ...
def drift(root: Path, record: ReleaseRecord | None = None) -> Drift | None:
    """What differs from the release; None when ``root`` holds no sglang RECORD to compare with."""
    record = record or release_record(root)
    if record is None:
        return None
    modified, missing = [], []
    for rel, expected in record.hashes.items():
        path = Path(root) / rel
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            missing.append(rel)
            continue
        if record.sizes.get(rel) not in (None, size) or sha256_file(path) != expected:
            modified.append(rel)
    stray = [rel for rel in _package_files(root) if rel.endswith(TEMP_SUFFIX)]
    return Drift(record.version, tuple(sorted(modified)), tuple(sorted(missing)), tuple(stray))
