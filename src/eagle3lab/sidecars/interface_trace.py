"""Notebook 02's sidecar: the interface trace's verdict, layer-id tables, conformance of every entry class,
generated fixes and their verification, the bisect and the capture-order defect.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional
from pydantic import Field
from eagle3lab.sidecars.base import Record, Sidecar


class RaiseSite(Record):
    """The first call site that raises for a missing member, on one start-up path."""

    where: Optional[str] = None
    function: Optional[str] = None
    member: Optional[str] = None


class VerdictRecord(Record):
    sglang_version: str
    entry_class: Optional[str] = None
    required_members: list[str]
    missing_members: list[str]
    delegation_gaps: list[str] = Field(default_factory=list)
    one_method_enough: bool
    first_raise: dict[str, RaiseSite] = Field(default_factory=dict)
    next_raise_after_one_method: dict[str, Optional[RaiseSite]] = Field(default_factory=dict)
    class_report: dict[str, Any] = Field(default_factory=dict)


class LayerIdTable(Record):
    """Which layers each ``set_eagle3_layers_to_capture`` call captures on one profile's start-up path."""

    profile: str  # the start-up path: "cpu" or "gpu"
    depth: Optional[int] = None  # None: the deployment's configs are not on disk (status "not fetched")
    aux_layer_ids: Optional[list[int]] = None  # None with status "read": the drafter names none (sglang's defaults)
    deployment: Optional[str] = None  # the profile whose drafter config gave depth and ids
    status: str = "read"  # "read" or "not fetched"
    drafter_config: Optional[str] = None
    fix: Optional[str] = None
    eager_forwards_capture: Optional[dict[str, Any]] = None
    cuda_graph_forwards_capture: Optional[dict[str, Any]] = None
    conflict: bool = False
    rows: list[dict[str, Any]] = Field(default_factory=list)

    def captured(self, which: str) -> Optional[list[int]]:
        """``eager`` or ``graphs``: the inner model's ``layers_to_capture`` those forwards see."""
        table = self.eager_forwards_capture if which == "eager" else self.cuda_graph_forwards_capture
        return (table or {}).get("self.model.layers_to_capture")


class AuditCounts(Record):
    """How many entry classes of each kind (``trace.audit.KIND_KEYS``) and wrappers of each verdict; they add up
    to ``entry_classes``. Short keys here; the renderer shows the labels (``trace.audit.KINDS``)."""

    entry_classes: int
    wrapper: int
    other_wrapper: int
    plain: int
    draft: int
    unresolved: int
    wrappers_conforming: int
    wrappers_lacking: int
    wrappers_unresolved: int

    def of(self, key: str) -> int:
        """The count under a short key (``wrapper``, ``wrappers_lacking``, ...)."""
        return int(getattr(self, key))


class ConformanceRecord(Record):
    """The audit of one release: every registered entry class classified, counts that add up, reasons."""

    sglang_version: str
    provenance: str = ""
    members: list[str] = Field(default_factory=list)  # contract members checked
    every_module_has: list[str] = Field(default_factory=list)  # used by the runtime, left out of the contract
    counts: Optional[AuditCounts] = None
    entry_classes: Optional[int] = None
    rows: list[dict[str, Any]] = Field(default_factory=list)  # wrappers of EAGLE-3-capable models
    lacking: list[dict[str, Any]] = Field(default_factory=list)  # those that lack part of the contract
    unresolved: list[dict[str, Any]] = Field(default_factory=list)  # entry, file, kind, reason
    entries: list[dict[str, Any]] = Field(default_factory=list)  # every entry class
    seconds: Optional[float] = None


class FixCheckRecord(Record):
    """One check of a generated patch (applies, compiles, delegates, re-audit, output): passed, and on what."""

    ok: bool
    detail: str = ""


class SeriesCheckRecord(Record):
    """Every passing patch of a release applied together: which lacking wrappers conform then."""

    ok: bool
    detail: str = ""
    conforming: list[str] = Field(default_factory=list)
    still_lacking: dict[str, list[str]] = Field(default_factory=dict)  # entry -> members still missing


class FixRecord(Record):
    """One generated delegation patch and its checks (``ok``), or why it was refused."""

    name: str
    release: str
    file: str
    owner: str
    attr: str
    members: list[str] = Field(default_factory=list)
    entries: list[str] = Field(default_factory=list)
    ok: bool
    refused: str = ""
    checks: dict[str, FixCheckRecord] = Field(default_factory=dict)  # check name -> outcome
    committed: str = ""  # identical / differs: regenerate / not committed / refused


class ReleaseFixesRecord(Record):
    release: str
    provenance: str = ""
    fixes: list[FixRecord] = Field(default_factory=list)
    series: Optional[SeriesCheckRecord] = None  # the whole series applied: who conforms
    checked: int = 0
    refused: list[dict[str, Any]] = Field(default_factory=list)
    seconds: Optional[float] = None


class FixesRecord(Record):
    """Generated fixes per release and their run-time verification (imports, capture through ModelRunner)."""

    releases: dict[str, ReleaseFixesRecord] = Field(default_factory=dict)
    verification: dict[str, Any] = Field(default_factory=dict)


class BisectRecord(Record):
    appeared: Optional[str] = None
    first_fixed: Optional[str] = None
    member_gained: dict[str, str] = Field(default_factory=dict)
    rows: list[dict[str, Any]] = Field(default_factory=list)
    seconds: Optional[float] = None


class TraceTimings(Record):
    verdict_seconds: Optional[float] = None
    audit_seconds_one_release: Optional[float] = None
    bisect_seconds_warm_cache: Optional[float] = None
    bisect_releases: Optional[int] = None


class CaptureOrderRecord(Record):
    """``trace.capture_order``: graph vs eager capture layers per release, and the release that fixed the order."""

    drafter_ids: list[int]  # the Kimi drafter's ids (as quoted; see ids_source)
    depth: int
    ids_source: str
    releases: list[dict[str, Any]] = Field(default_factory=list)  # CaptureOrder.to_dict per release (evidence)
    layers: list[dict[str, Any]] = Field(default_factory=list)  # CaptureOrder.layers rows (graphs, eager, mismatch)
    first_fixed: Optional[str] = None  # the first release without the defect (bisected)
    fix_pr: str = ""
    bisect_rows: list[dict[str, Any]] = Field(default_factory=list)


class InterfaceTraceSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "02_interface_trace"

    source: dict[str, Any] = Field(default_factory=dict)
    grep: list[dict[str, Any]] = Field(default_factory=list)
    contract: list[dict[str, Any]] = Field(default_factory=list)
    verdict: VerdictRecord
    draft: dict[str, Any] = Field(default_factory=dict)
    layer_setups: list[dict[str, Any]] = Field(default_factory=list)  # runtime.modelinfo.LayerSetup, per path
    layer_ids: list[LayerIdTable] = Field(default_factory=list)
    conformance: dict[str, ConformanceRecord] = Field(default_factory=dict)
    fixes: FixesRecord = Field(default_factory=FixesRecord)
    bisect: BisectRecord = Field(default_factory=BisectRecord)
    capture_order: Optional[CaptureOrderRecord] = None  # sglang's second EAGLE-3 defect (trace.capture_order)
    timings: TraceTimings = Field(default_factory=TraceTimings)
    figures: list[str] = Field(default_factory=list)

    def layer_table(self, profile_kind: str) -> Optional[LayerIdTable]:
        """The layer-id table of ``cpu`` or ``gpu`` start-up, if the trace computed one."""
        return next((t for t in self.layer_ids if t.profile == profile_kind), None)
