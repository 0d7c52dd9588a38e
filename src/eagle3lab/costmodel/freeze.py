"""The model's fitted constants as frozen (``data/constants.yaml``), the engines that carry them, and their commit.

Why a module: ``predict``, ``doctor`` and every evaluation must use the same frozen constants, and every evaluation
must name the commit that froze them (issue 36, item 5). The earlier freezes of ``data/spec_validation.yaml`` are
history (evaluated on the first three held-out sets); this is the freeze the model predicts with now.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from eagle3lab.errors import PerfModelError
from eagle3lab.costmodel import validation
from eagle3lab.costmodel.engine import ORCHESTRATION, Engine, engine_preset

DATA = Path(__file__).resolve().parent / "data"
CONSTANTS = DATA / "constants.yaml"
COMMIT = DATA / "constants_commit.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Freeze(_Strict):
    id: str
    date: str
    fitted_on: list[str]
    what: str
    engines: dict[str, dict[str, float]]
    shared_with: dict[str, str] = {}


class ConstantsFile(_Strict):
    freeze: Freeze
    sealed_evaluation_rules: dict[str, str]


class CommitRecord(_Strict):
    freeze: str
    commit: str
    note: str


@lru_cache(maxsize=1)
def load_constants(path: Path = CONSTANTS) -> ConstantsFile:
    try:
        parsed = ConstantsFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        raise PerfModelError(f"frozen constants {path} are unreadable or malformed: {exc}", path=path) from None
    for engine, values in parsed.freeze.engines.items():
        unknown = set(values) - set(ORCHESTRATION)
        if unknown:
            raise PerfModelError(f"frozen constants: engine {engine} has unknown field(s) {sorted(unknown)}")
    return parsed


def constants_commit(path: Path = COMMIT) -> Optional[str]:
    """The commit that froze the constants, as recorded by the commit after it (None before it is recorded)."""
    if not path.is_file():
        return None
    try:
        record = CommitRecord.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except (yaml.YAMLError, ValidationError) as exc:
        raise PerfModelError(f"constants commit record {path} is malformed: {exc}", path=path) from None
    if record.freeze != load_constants().freeze.id:
        raise PerfModelError(f"{path} names freeze {record.freeze}, but the constants are {load_constants().freeze.id}")
    return record.commit


def orchestration(name: str, freeze: Optional[Freeze] = None) -> dict[str, float]:
    """The frozen orchestration of engine ``name`` (its own, or the one it shares); empty where none was fitted."""
    f = freeze or load_constants().freeze
    return dict(f.engines.get(name) or f.engines.get(f.shared_with.get(name, ""), {}))


def current_engine(name: str) -> Engine:
    """The engine preset with the frozen orchestration applied: what predict, doctor and evaluations use."""
    engine = engine_preset(name)
    values = orchestration(name)
    if not values:
        return engine
    f = load_constants().freeze
    return engine.with_(f"fitted on seen sources {', '.join(f.fitted_on)}, frozen {f.date} ({f.id}, "
                        "costmodel/data/constants.yaml)", **values)


def refit() -> dict[str, dict[str, float]]:
    """The orchestration refitted today exactly as the freeze was: every set of ``data/spec_validation.yaml`` taken as
    development (all are seen), per engine, on the fields the freeze stores. Equal to the frozen values unless the
    model's physics or data changed since (a test checks it)."""
    data = validation.load_dataset()
    seen = data.model_copy(update={"protocol": None, "sources": [s.model_copy(update={"split": "development"})
                                                                  for s in data.sources]})
    f = load_constants().freeze
    return {engine: validation.fit_orchestration(seen, engine, tuple(values)) for engine, values in f.engines.items()}


def current_record() -> dict[str, Any]:
    """The freeze as the report shows it: what it is, its commit, and whether refitting today reproduces it."""
    f = load_constants().freeze
    again = refit()
    matches = all(abs(again[e][k] - v) <= 5e-7 for e, values in f.engines.items() for k, v in values.items())
    return {"id": f.id, "date": f.date, "fitted_on": f.fitted_on, "what": f.what, "engines": f.engines,
            "shared_with": f.shared_with, "commit": constants_commit() or "not recorded yet",
            "refit_today": again, "refit_matches_frozen": matches, "public_checks": []}
