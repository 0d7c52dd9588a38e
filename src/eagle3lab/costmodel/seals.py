"""Sealed evaluation sets: a held-out file's sha256 committed before anything is evaluated on it.

``data/seals.yaml`` records, per set, the file and its sha256 at sealing time (the commit that added the record is
marked ``[sealed-set-N]``). ``check_seal`` recomputes the hash, so an edit to a sealed set after the fact fails loudly
instead of silently changing what "held out" measured.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from eagle3lab.errors import PerfModelError

DATA = Path(__file__).resolve().parent / "data"
SEALS = DATA / "seals.yaml"


class Seal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    set: str
    file: str
    sha256: str
    sealed: str
    recorded_on_main_commit: str
    commit_marker: str
    points_admitted: int
    sources: list[str]
    note: str


class Seals(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    seals: list[Seal]


@dataclass(frozen=True)
class SealCheck:
    set: str
    path: Path
    sealed_sha256: str
    current_sha256: str

    @property
    def intact(self) -> bool:
        return self.sealed_sha256 == self.current_sha256


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes (what the seal records)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_seals(path: Path = SEALS) -> Seals:
    try:
        return Seals.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise PerfModelError(f"cannot read the seals {path}: {exc}", path=path) from None
    except (yaml.YAMLError, ValidationError) as exc:
        raise PerfModelError(f"seals {path} are malformed: {exc}", path=path) from None


def check_seal(name: str, seals_path: Path = SEALS, data_dir: Path = DATA) -> SealCheck:
    """The sealed and the current sha256 of set ``name``; one clear error if the set is unknown or edited."""
    seal = next((s for s in load_seals(seals_path).seals if s.set == name), None)
    if seal is None:
        raise PerfModelError(f"no seal recorded for evaluation set '{name}' in {seals_path}", parameter=name)
    path = data_dir / seal.file
    check = SealCheck(name, path, seal.sha256, sha256_of(path))
    if not check.intact:
        raise PerfModelError(f"sealed evaluation set '{name}' ({path.name}) was edited after sealing: sha256 "
                             f"{check.current_sha256} != sealed {seal.sha256}; record a new set instead",
                             path=path, parameter=name)
    return check
