"""The validation data set's schema (``data/spec_validation.yaml``): sources, series, the protocol with its splits
and frozen constants, and the constants the protocol is judged by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional, Union
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from eagle3lab.errors import PerfModelError


DATASET = Path(__file__).resolve().parents[1] / "data" / "spec_validation.yaml"


GOAL_MAPE_PCT = 15.0  # issue 18: out-of-sample MAPE <= 15% is the target; reported whatever it is, never gated


TREND_TOLERANCE = 0.05  # a speedup that moves less than 5% from the smallest to the largest batch is "flat"


CALIBRATIONS = ("none", "baseline_single_stream", "accept_length_from_single_stream_speedup",
                "spec_extra_from_single_stream_speedup", "baseline_and_spec_single_stream", "baseline_at_first_batch")


# a series published at one batch size > 1 only: the plain rate there fits the kernel overhead (nothing from the
# EAGLE arm), as baseline_single_stream does at batch 1
FIRST_BATCH_CALIBRATION = "baseline_at_first_batch"


CALIBRATION_AT_BOUND = "calibration at its bound"  # the plain rate needs a negative overhead: held at 0


# calibrations that use the EAGLE arm's own measurement (forbidden where the acceptance is published and the point
# is to be predicted; kept for the engine-calibration tools and old datasets)
SPLITS = ("development", "held_out", "held_out_2", "held_out_3")


HELD_OUT_SETS = ("held_out", "held_out_2", "held_out_3")  # each its own out-of-sample group, never merged


SHAPE_ONLY = "fitted acceptance, shape-only"


PUBLISHED = "published acceptance"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Flags(_Strict):
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int


class BaselineOnly(_Strict):
    batches: list[int]
    baseline_tok_s: list[float]


class CalibrateFrom(_Strict):
    from_series: str
    then: Optional[str] = None


class Series(_Strict):
    id: str
    figure: Optional[str] = None
    table: Optional[str] = None
    engine: str
    model: str
    drafter: str
    drafter_kind: Literal["eagle3", "eagle1"] = "eagle3"
    tp: int
    flags: Flags
    batches: list[int]
    speedup: Optional[list[float]] = None
    baseline_tok_s: Optional[list[float]] = None
    eagle3_tok_s: Optional[list[float]] = None
    accept_length: Union[float, list[float], None] = None
    calibrate: Union[str, CalibrateFrom]
    max_concurrency: Optional[int] = None
    context: Optional[float] = None
    baseline_only: Optional[BaselineOnly] = None
    url: Optional[str] = None  # the page this series' numbers are on, where it is not the source's own url
    quote: Optional[str] = None  # the published figures as written, so each number can be checked against its page

    @model_validator(mode="after")
    def _consistent(self) -> "Series":
        n = len(self.batches)
        starts_anywhere = self.calibrate == FIRST_BATCH_CALIBRATION
        if self.batches != sorted(self.batches) or not n or (self.batches[0] != 1 and not starts_anywhere):
            raise ValueError(f"series {self.id}: batches must be increasing and start at 1 (the calibration point; "
                             f"or calibrate: {FIRST_BATCH_CALIBRATION})")
        rates = self.baseline_tok_s is not None and self.eagle3_tok_s is not None
        if (self.speedup is None) == (not rates):
            raise ValueError(f"series {self.id}: give either speedup or both baseline_tok_s and eagle3_tok_s")
        for name in ("speedup", "baseline_tok_s", "eagle3_tok_s"):
            values = getattr(self, name)
            if values is not None and len(values) != n:
                raise ValueError(f"series {self.id}: {name} has {len(values)} values for {n} batches")
        if isinstance(self.accept_length, list) and len(self.accept_length) != n:
            raise ValueError(f"series {self.id}: accept_length has {len(self.accept_length)} values for {n} batches")
        if isinstance(self.calibrate, str) and self.calibrate not in CALIBRATIONS:
            raise ValueError(f"series {self.id}: calibrate must be one of {CALIBRATIONS} or {{from_series: ...}}")
        return self

    @property
    def published_speedups(self) -> list[float]:
        if self.speedup is not None:
            return list(self.speedup)
        return [e / b for e, b in zip(self.eagle3_tok_s, self.baseline_tok_s)]  # type: ignore[arg-type]

    @property
    def acceptance_kind(self) -> str:
        """``PUBLISHED`` if the source gives the acceptance length, else ``SHAPE_ONLY`` (it gets fitted)."""
        return PUBLISHED if self.accept_length is not None else SHAPE_ONLY

    def accept_at(self, i: int) -> Optional[float]:
        if isinstance(self.accept_length, list):
            return self.accept_length[i]
        return self.accept_length


class Source(_Strict):
    id: str
    title: str
    authors: str
    url: str
    companion: Optional[str] = None
    date: str
    hardware: str
    notes: str
    read_off_figure: Optional[str] = None
    split: Literal["development", "held_out", "held_out_2", "held_out_3"] = "development"
    capped_running_requests: Optional[str] = None
    series: list[Series]


class PublicCheck(_Strict):
    """A public measurement of sglang's host orchestration: the same flags with the EAGLE worker's host work
    exposed (v1) and overlapped with the GPU (spec v2). The cycle-time difference is host time that v1 exposes:
    a lower bound on the orchestration per cycle. Where the deployment is stated (model, hardware, tp, flags), the
    report sets beside it the host time the model's spec-v2 preset hides there."""

    url: str
    what: str
    accept_exposed: float
    tok_s_exposed: float
    accept_overlapped: float
    tok_s_overlapped: float
    model: Optional[str] = None
    hardware: Optional[str] = None
    tp: int = 1
    flags: Optional[Flags] = None

    @property
    def hidden_host_ms_per_cycle(self) -> float:
        return (self.accept_exposed / self.tok_s_exposed - self.accept_overlapped / self.tok_s_overlapped) * 1e3


class Frozen(_Strict):
    date: str
    fitted_on: list[str]
    what: str
    engines: dict[str, dict[str, float]]
    public_checks: list[PublicCheck] = []
    # an engine preset that takes another's fitted constants (no development point of its own), e.g. spec v2
    shared_with: dict[str, str] = {}
    # the held-out sets evaluated with these constants (each once)
    evaluated_on: list[str] = []


class HeldOutSet(_Strict):
    """A further held-out set, recorded after the constants were frozen: evaluated once, never fitted."""

    split_recorded: str
    sources: list[str]
    rule: str
    evaluation_note: Optional[str] = None  # what happened during its one evaluation, if anything needs saying


class Protocol(_Strict):
    """The split and the constants. ``frozen`` is the first freeze (evaluated on ``held_out`` and ``held_out_2``);
    ``frozen_2`` the revised engine model's constants, fitted on development sources only and frozen before
    ``held_out_3`` was recorded; each held-out set is evaluated with the constants frozen before it, once."""

    split_recorded: str
    development: list[str]
    held_out: list[str]
    split_rule: str
    frozen: Optional[Frozen] = None
    held_out_2: Optional[HeldOutSet] = None
    frozen_2: Optional[Frozen] = None
    held_out_3: Optional[HeldOutSet] = None

    @property
    def current(self) -> Optional[Frozen]:
        """The newest frozen constants: what the model predicts with."""
        return self.frozen_2 or self.frozen

    def constants_for(self, split: str) -> Optional[Frozen]:
        """The constants a split is evaluated with: the first two held-out sets with the first freeze (their
        one evaluation), the third with the second freeze, development with the newest (fit quality)."""
        if split in ("held_out", "held_out_2"):
            return self.frozen
        if split == "held_out_3":
            return self.frozen_2
        return self.current

    def held_out_sources(self) -> set[str]:
        later = [h.sources for h in (self.held_out_2, self.held_out_3) if h]
        return set(self.held_out).union(*later)


class OtherFigure(_Strict):
    constants: str
    mape_pct: float
    note: str


class PastEvaluation(_Strict):
    """A set's one evaluation as it was reported then (never recomputed: the model has changed since), with the
    commits that show when it was recorded and evaluated, and whether sealing shows it was held out."""

    split: str
    sources: list[str]
    constants: str  # the freeze it was evaluated with ("frozen", "frozen_2")
    constants_commit: str
    recorded_commit: str
    evaluated_commit: str
    mape_pct: float
    points: int
    naive: str
    held_out: Literal["sealed", "not demonstrably held out"]
    why: str
    other_figures: list[OtherFigure] = []


class Dataset(_Strict):
    protocol: Optional[Protocol] = None
    default_context: float
    default_context_source: str
    past_evaluations: list[PastEvaluation] = []
    sources: list[Source]

    @model_validator(mode="after")
    def _split_consistent(self) -> "Dataset":
        if self.protocol is None:
            return self
        p = self.protocol
        second = p.held_out_2.sources if p.held_out_2 else []
        third = p.held_out_3.sources if p.held_out_3 else []
        sets = [set(p.held_out), set(second), set(third)]
        if any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]) or p.held_out_sources() & set(p.development):
            raise ValueError("protocol: a source is listed in two sets (held-out sets are never merged)")
        for src in self.sources:
            listed = ("development" if src.id in p.development else "held_out" if src.id in p.held_out
                      else "held_out_2" if src.id in second else "held_out_3" if src.id in third else None)
            if listed != src.split:
                raise ValueError(f"source {src.id}: split '{src.split}' disagrees with protocol "
                                 f"({listed or 'unlisted'})")
            if src.split in ("held_out_2", "held_out_3"):
                for s in src.series:
                    if s.accept_length is None or not s.quote:
                        raise ValueError(f"source {src.id}/{s.id}: a later held-out series needs its published "
                                         "accept_length and the quote it was copied from")
        for name, frozen in (("frozen", p.frozen), ("frozen_2", p.frozen_2)):
            if frozen and set(frozen.fitted_on) & p.held_out_sources():
                raise ValueError(f"protocol.{name}.fitted_on names a held-out source")
        if p.frozen and p.held_out_2 and p.held_out_2.split_recorded < p.frozen.date:
            raise ValueError("protocol.held_out_2.split_recorded is before the constants were frozen")
        if p.held_out_3 and p.frozen_2 is None:
            raise ValueError("protocol.held_out_3 needs protocol.frozen_2, the constants frozen before it")
        if p.frozen_2 and p.frozen and p.frozen_2.date < p.frozen.date:
            raise ValueError("protocol.frozen_2.date is before protocol.frozen.date")
        if p.held_out_3 and p.frozen_2 and not p.held_out_3.split_recorded > p.frozen_2.date:
            raise ValueError("protocol.held_out_3.split_recorded is not after the constants were frozen "
                             "(protocol.frozen_2.date)")
        return self


def load_dataset(path: Path = DATASET) -> Dataset:
    """The published measurements, checked against the schema (one clear line if malformed)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Dataset.model_validate(raw)
    except OSError as exc:
        raise PerfModelError(f"cannot read validation dataset {path}: {exc}", path=path, problem="unreadable") from None
    except yaml.YAMLError as exc:
        raise PerfModelError(f"validation dataset {path} is not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PerfModelError(f"validation dataset {path}: {where}: {first['msg']}", path=path, parameter=where,
                             problem="invalid") from None
