"""Notebook 02's sidecar: the interface trace's verdict, layer-id tables, conformance of every entry class,
generated fixes and their verification, the bisect and the capture-order defect.
"""

from __future__ import annotations

from typing import ClassVar, Optional, Union
from pydantic import Field
from eagle3lab.sidecars.base import Record, Sidecar, SparseRecord
from eagle3lab.sidecars.capture import CaptureRecord

#: What a start-up path leaves on the inner model, keyed by the source expression the trace evaluated
#: (``self.capture_aux_hidden_states``: bool, ``self.model.layers_to_capture``: layer ids).
CaptureState = dict[str, Union[bool, list[int]]]


class SkippedFile(SparseRecord):
    """A source file the trace could not use, and why (``trace.sources.Skipped``)."""

    path: str = ""
    reason: str = ""


class SourceRecord(SparseRecord):
    """The sglang source the trace read (``trace.sources``)."""

    version: str = ""
    origin: str = ""
    python_files: int = 0
    modified_since_install: list[str] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list)


class GrepHit(SparseRecord):
    """One line of sglang's source that names an EAGLE-3 hook."""

    file: str = ""
    line: int = 0
    text: str = ""


class ContractSite(SparseRecord):
    """One place sglang's runtime touches a member of the target model (``trace.contract.Site``)."""

    file: str = ""
    line: int = 0
    function: str = ""
    receiver: str = ""
    member: str = ""
    role: str = ""
    access: str = ""
    guarded: bool = False
    guard: str = ""
    args: list[str] = Field(default_factory=list)
    conditions: list[str] = Field(default_factory=list)
    runs_when: list[str] = Field(default_factory=list)
    where: str = ""
    eagle3_path: bool = False


class InnerOptionRecord(SparseRecord):
    """One class the inner model can be, or None when unresolved (``trace.resolution.Option.to_dict``)."""

    cls: Optional[str] = Field(default=None, alias="class")
    how: str = ""
    reason: str = ""


class EntryInnerOption(InnerOptionRecord):
    """An inner option of an audited entry class, and whether it is EAGLE-3-capable (None: unresolved)."""

    eagle3: Optional[bool] = None


class MemberStatusRecord(SparseRecord):
    """How one member resolves on a class (``trace.resolution.MemberStatus``, with its gap)."""

    member: str = ""
    status: str = ""
    via: str = ""
    inner_has: Optional[bool] = None
    inner_options: dict[str, bool] = Field(default_factory=dict)  # inner class -> has the member
    gap: str = ""


class ClassReportRecord(SparseRecord):
    """What class resolution says about one entry class (``trace.resolution.ClassReport.to_dict``)."""

    entry: str = ""
    module: str = ""
    resolution_order: list[str] = Field(default_factory=list)
    nn_module_getattr: bool = False
    custom_getattr: list[str] = Field(default_factory=list)
    inner_attr: str = ""
    inner_class: str = ""
    inner_options: list[InnerOptionRecord] = Field(default_factory=list)
    inner_via: list[str] = Field(default_factory=list)
    members: dict[str, MemberStatusRecord] = Field(default_factory=dict)


class UndecidedBranch(SparseRecord):
    """A branch on the start-up path that the profile cannot decide."""

    where: str = ""
    test: str = ""
    decided_by: list[str] = Field(default_factory=list)


class RaiseSite(SparseRecord):
    """The first call site that raises for a missing member, on one start-up path (``trace.audit._first_raise``);
    empty when nothing raises, with ``otherwise`` the first certain one when this one sits behind a branch."""

    where: Optional[str] = None
    function: Optional[str] = None
    member: Optional[str] = None
    rank: Optional[int] = None
    phase: Optional[str] = None
    runner_role: Optional[str] = None
    certain: Optional[bool] = None
    undecided_branches: list[UndecidedBranch] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    conditions: list[str] = Field(default_factory=list)
    runs_when: list[str] = Field(default_factory=list)
    otherwise: Optional[RaiseSite] = None


class VerdictRecord(Record):
    sglang_version: str
    entry_class: Optional[str] = None
    required_members: list[str]
    missing_members: list[str]
    delegation_gaps: list[str] = Field(default_factory=list)
    one_method_enough: bool
    first_raise: dict[str, RaiseSite] = Field(default_factory=dict)
    next_raise_after_one_method: dict[str, Optional[RaiseSite]] = Field(default_factory=dict)
    class_report: Optional[ClassReportRecord] = None
    optional_members: list[str] = Field(default_factory=list)
    every_module_has: list[str] = Field(default_factory=list)
    unresolved_members: list[str] = Field(default_factory=list)
    real_lacks: list[str] = Field(default_factory=list)


class DraftRecord(SparseRecord):
    """The drafter's class against the members the draft worker needs (``trace.audit``)."""

    draft_class: str = ""
    required_members: list[str] = Field(default_factory=list)
    optional_members: list[str] = Field(default_factory=list)
    missing_members: list[str] = Field(default_factory=list)
    class_report: ClassReportRecord = Field(default_factory=ClassReportRecord)


class LayerSetupRecord(SparseRecord):
    """One start-up path's layer setup (``runtime.modelinfo.LayerSetup``)."""

    deployment: str = ""
    startup: str = ""
    device: str = ""
    cuda_graphs: bool = False
    status: str = ""
    depth: Optional[int] = None
    aux_layer_ids: Optional[list[int]] = None
    entry_class: Optional[str] = None
    target_config: Optional[str] = None
    draft_config: Optional[str] = None
    fix: Optional[str] = None


class LayerIdRow(SparseRecord):
    """One ``set_eagle3_layers_to_capture`` call on a start-up path and what it leaves (``trace.audit.layer_table``)."""

    where: str = ""
    function: str = ""
    args: list[str] = Field(default_factory=list)
    startup_rank: Optional[int] = None
    runs_when: list[str] = Field(default_factory=list)
    layer_ids_passed: Optional[list[int]] = None
    implementation: str = ""
    result: CaptureState = Field(default_factory=dict)
    uses: Optional[str] = None
    certain: Optional[bool] = None


class LayerIdTable(Record):
    """Which layers each ``set_eagle3_layers_to_capture`` call captures on one profile's start-up path."""

    profile: str  # the start-up path: "cpu" or "gpu"
    depth: Optional[int] = None  # None: the deployment's configs are not on disk (status "not fetched")
    aux_layer_ids: Optional[list[int]] = None  # None with status "read": the drafter names none (sglang's defaults)
    deployment: Optional[str] = None  # the profile whose drafter config gave depth and ids
    status: str = "read"  # "read" or "not fetched"
    drafter_config: Optional[str] = None
    fix: Optional[str] = None
    eager_forwards_capture: Optional[CaptureState] = None
    cuda_graph_forwards_capture: Optional[CaptureState] = None
    conflict: bool = False
    rows: list[LayerIdRow] = Field(default_factory=list)

    def captured(self, which: str) -> Optional[list[int]]:
        """``eager`` or ``graphs``: the inner model's ``layers_to_capture`` those forwards see."""
        table = self.eager_forwards_capture if which == "eager" else self.cuda_graph_forwards_capture
        ids = (table or {}).get("self.model.layers_to_capture")
        return ids if isinstance(ids, list) else None


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


class EntryRow(SparseRecord):
    """One registered entry class, classified; wrappers checked per contract member (``trace.audit.classify``)."""

    file: str = ""
    entry: str = ""
    module: str = ""
    kind: str = ""
    verdict: str = ""
    reason: str = ""
    inner: str = ""
    inner_attr: str = ""
    inner_options: list[EntryInnerOption] = Field(default_factory=list)
    via: list[str] = Field(default_factory=list)
    status: dict[str, str] = Field(default_factory=dict)  # member -> provided / inherited / delegated / proxied / unresolved / missing
    missing: list[str] = Field(default_factory=list)
    unresolved_members: dict[str, str] = Field(default_factory=dict)  # member -> why
    gaps: dict[str, str] = Field(default_factory=dict)  # missing member -> "delegation gap" or "real lack"
    resolved_with: list[str] = Field(default_factory=list)


class UnresolvedEntry(SparseRecord):
    """An entry class the audit could not decide, and why."""

    entry: str = ""
    file: str = ""
    kind: str = ""
    reason: str = ""


class ConformanceRecord(Record):
    """The audit of one release: every registered entry class classified, counts that add up, reasons."""

    sglang_version: str
    provenance: str = ""
    members: list[str] = Field(default_factory=list)  # contract members checked
    every_module_has: list[str] = Field(default_factory=list)  # used by the runtime, left out of the contract
    counts: Optional[AuditCounts] = None
    entry_classes: Optional[int] = None
    rows: list[EntryRow] = Field(default_factory=list)  # wrappers of EAGLE-3-capable models
    lacking: list[EntryRow] = Field(default_factory=list)  # those that lack part of the contract
    unresolved: list[UnresolvedEntry] = Field(default_factory=list)
    entries: list[EntryRow] = Field(default_factory=list)  # every entry class
    seconds: Optional[float] = None
    wrappers_of_non_eagle3_models: list[str] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list)


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
    inner_classes: list[str] = Field(default_factory=list)
    text: str = ""  # the patch itself


class RefusedFix(SparseRecord):
    """A class no delegation patch was generated for, and why."""

    cls: str = Field(default="", alias="class")
    entries: list[str] = Field(default_factory=list)
    reason: str = ""


class ReleaseFixesRecord(Record):
    release: str
    provenance: str = ""
    fixes: list[FixRecord] = Field(default_factory=list)
    series: Optional[SeriesCheckRecord] = None  # the whole series applied: who conforms
    checked: int = 0
    refused: list[RefusedFix] = Field(default_factory=list)
    seconds: Optional[float] = None


class MeasuredAt(SparseRecord):
    """When and on what a stored check was measured (``resultcache``)."""

    date: str = ""
    machine: str = ""


class ModuleImport(SparseRecord):
    """One patched module imported before and after the release's fixes (``fix.fixverify``)."""

    pristine: str = ""
    patched: str = ""
    ok: bool = False
    verdict: str = ""


class ImportCheckRecord(SparseRecord):
    """One release's patched modules imported (``fix.fixverify``); where it came from when stored."""

    release: str = ""
    modules: dict[str, ModuleImport] = Field(default_factory=dict)
    where: str = ""
    ok: bool = False
    imported: Optional[int] = None
    of: Optional[int] = None
    measured_at: Optional[MeasuredAt] = None
    cached: Optional[bool] = None
    from_record: Optional[bool] = None


class CaptureVerification(SparseRecord):
    """One generated fix's wrapper through sglang's ModelRunner, unpatched then patched (``fix.fixverify``)."""

    entry: str = ""
    patch: str = ""
    release: str = ""
    inner: str = ""
    unpatched: Optional[CaptureRecord] = None
    patched: CaptureRecord = Field(default_factory=CaptureRecord)
    verified: bool = False
    reason: str = ""
    provenance: str = ""
    measured_at: Optional[MeasuredAt] = None
    cached: Optional[bool] = None
    from_record: Optional[bool] = None


class RefusedCheck(SparseRecord):
    """A wrapper with no checked patch in the installed release."""

    entry: str = ""
    reason: str = ""


class VerificationRecord(SparseRecord):
    """The run-time verification of the generated fixes (``notebook.fixes.verify``)."""

    ran: Optional[bool] = None
    imports: dict[str, ImportCheckRecord] = Field(default_factory=dict)
    capture: list[CaptureVerification] = Field(default_factory=list)
    refused: list[RefusedCheck] = Field(default_factory=list)


class FixesRecord(Record):
    """Generated fixes per release and their run-time verification (imports, capture through ModelRunner)."""

    releases: dict[str, ReleaseFixesRecord] = Field(default_factory=dict)
    verification: VerificationRecord = Field(default_factory=VerificationRecord)


class BisectRow(SparseRecord):
    """One release of the bisect: whether the entry class exists, and if so its members (``trace.audit``)."""

    version: str = ""
    present: bool = False
    file: Optional[str] = None
    status: dict[str, str] = Field(default_factory=dict)  # member -> status
    missing: list[str] = Field(default_factory=list)
    fixed: Optional[bool] = None


class BisectRecord(Record):
    appeared: Optional[str] = None
    first_fixed: Optional[str] = None
    member_gained: dict[str, str] = Field(default_factory=dict)
    rows: list[BisectRow] = Field(default_factory=list)
    seconds: Optional[float] = None
    entry_class: Optional[str] = None
    workers: Optional[int] = None
    from_record: list[str] = Field(default_factory=list)  # releases read from the shipped record
    traced_now: list[str] = Field(default_factory=list)  # releases traced in this run


class TraceTimings(Record):
    verdict_seconds: Optional[float] = None
    audit_seconds_one_release: Optional[float] = None
    bisect_seconds_warm_cache: Optional[float] = None
    bisect_releases: Optional[int] = None


class CaptureCall(SparseRecord):
    """One ``set_eagle3_layers_to_capture`` call of a release and where it runs against graph capture."""

    path: str = ""
    line: int = 0
    function: str = ""
    with_ids: bool = False
    before_capture_in_graph_runner: bool = False
    after_graph_init: Optional[bool] = None
    where: str = ""


class CaptureOrderRelease(SparseRecord):
    """One release's capture order (``trace.capture_order.CaptureOrder.to_dict``)."""

    release: str = ""
    defect: bool = False
    default_expr: str = ""
    default_site: str = ""
    fix_pr: str = ""
    rule: str = ""
    rule_site: str = ""
    calls: list[CaptureCall] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)


class CaptureLayersRow(SparseRecord):
    """The layers graph replays and eager forwards capture for one drafter on one release."""

    release: str = ""
    depth: int = 0
    drafter_ids: list[int] = Field(default_factory=list)
    cuda_graph_layers: list[int] = Field(default_factory=list)
    eager_layers: list[int] = Field(default_factory=list)
    mismatch: bool = False
    defect: bool = False
    rule: str = ""
    rule_site: str = ""
    drafter: str = ""


class CaptureBisectRow(SparseRecord):
    version: str = ""
    defect: bool = False


class LayersCell(SparseRecord):
    """One drafter's ids and what each kind of forward captures."""

    ids: list[int] = Field(default_factory=list)
    depth: int = 0
    cuda_graph_layers: list[int] = Field(default_factory=list)
    eager_layers: list[int] = Field(default_factory=list)


class ReleaseSpan(SparseRecord):
    """A run of releases that capture alike (``trace.release_layers``)."""

    first: str = ""
    last: str = ""
    order_defect: bool = False
    rule: str = ""
    rule_site: str = ""
    cells: dict[str, LayersCell] = Field(default_factory=dict)  # drafter label -> its cell
    releases: str = ""


class CaptureMilestones(SparseRecord):
    """The releases (and PRs) that fixed the capture order and the layer convention."""

    order_fixed: Optional[str] = None
    convention_rule: Optional[str] = None
    both: Optional[str] = None
    order_pr: str = ""
    convention_pr: str = ""


class CaptureOrderRecord(Record):
    """``trace.capture_order``: graph vs eager capture layers per release, and the release that fixed the order."""

    drafter_ids: list[int]  # the Kimi drafter's ids (as quoted; see ids_source)
    depth: int
    ids_source: str
    releases: list[CaptureOrderRelease] = Field(default_factory=list)  # per release (evidence)
    layers: list[CaptureLayersRow] = Field(default_factory=list)  # graphs, eager, mismatch
    first_fixed: Optional[str] = None  # the first release without the defect (bisected)
    fix_pr: str = ""
    bisect_rows: list[CaptureBisectRow] = Field(default_factory=list)
    release_table: list[ReleaseSpan] = Field(default_factory=list)
    milestones: Optional[CaptureMilestones] = None
    release_table_from_record: int = 0  # releases of the table read from the shipped record


class InterfaceTraceSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "02_interface_trace"

    source: Optional[SourceRecord] = None
    grep: list[GrepHit] = Field(default_factory=list)
    contract: list[ContractSite] = Field(default_factory=list)
    verdict: VerdictRecord
    draft: Optional[DraftRecord] = None
    layer_setups: list[LayerSetupRecord] = Field(default_factory=list)  # per start-up path
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
