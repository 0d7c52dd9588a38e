"""The contracts between notebooks: one typed, versioned JSON sidecar per notebook run.

Why typed: figures, the report and the next notebook read these files. With free dictionaries a renamed key
became a silent ``None`` three stages later, and display labels ("seconds to outcome") doubled as data keys.
Each notebook now writes an instance of its schema; every reader gets the same classes back, or one line naming
the file and what is wrong with it. Display labels live only in the tables built for people.

Writes are atomic (``eagle3lab.atomic``). ``SCHEMA_VERSION`` goes up whenever a field changes meaning; a
sidecar of another version is refused with the command that rewrites it, never half-read.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, ClassVar, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eagle3lab.atomic import write_json_atomic
from eagle3lab.errors import SidecarError
from eagle3lab.paths import repo_dir

SCHEMA_VERSION = 3  # 3: raw memory and seconds in 01, typed audit counts and fix checks in 02


class Record(BaseModel):
    """A nested part of a sidecar: typed where readers use it, open to extra keys a newer stage adds."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)


class Sidecar(BaseModel):
    """What every notebook records: which run this was, with which parameters, on which machine."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    NOTEBOOK: ClassVar[str] = ""

    schema_version: int = SCHEMA_VERSION
    notebook: str = ""
    profile: str
    written_at: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        if not self.notebook:
            self.notebook = self.NOTEBOOK
        if not self.written_at:
            self.written_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")

    @property
    def date(self) -> str:
        """The UTC date of the run, for "[measured] here, <date>" labels."""
        return self.written_at[:10]


# ---------------------------------------------------------------------------------------------------------------
# 01: the crash reproduction


class ModelsRecord(Record):
    target: str  # the local directory every reader used (a hub id resolved to its snapshot)
    draft: str
    cache_key: Optional[str] = None
    aux_layer_ids: Optional[list[int]] = None  # read from the drafter's config.json
    target_source: Optional[str] = None  # as the profile names it: hub id, path or "tiny"
    draft_source: Optional[str] = None
    trust_remote_code: bool = False


class FrameRecord(Record):
    """One traceback frame (``runtime.crashlog.Frame``): sglang-relative path, line, function."""

    path: str
    line: int
    function: str
    code: str = ""


class CrashReportRecord(Record):
    """The classified crash (``runtime.crashlog.CrashReport.to_dict``)."""

    exc_type: str
    message: str
    signature: str
    category: str  # runtime.crashlog.Category
    rule: Optional[str] = None
    explanation: str = ""
    object_class: Optional[str] = None
    missing_attribute: Optional[str] = None
    call_site: Optional[str] = None  # "path:line in function"
    frames: list[FrameRecord] = Field(default_factory=list)
    traceback_text: str = ""
    tracebacks_found: int = 0
    distinct_tracebacks: int = 0
    fix: Optional[str] = None
    chain: list[dict[str, Any]] = Field(default_factory=list)  # the raw tracebacks of its chain, oldest first
    classified_by: Optional[str] = None


class CrashRecord(Record):
    """How the EAGLE-3 launch ended and what the log says (``report``: the full classified crash)."""

    status: str
    seconds_to_outcome: float
    returncode: Optional[int] = None
    peak_rss_bytes: int  # the server tree's peak, raw: the renderer shows GiB
    peak_pss_bytes: Optional[int] = None  # the same peak without shared pages counted once per process
    category: Optional[str] = None
    signature: Optional[str] = None
    call_site: Optional[str] = None
    log: str
    argv: list[str] = Field(default_factory=list)
    report: Optional[CrashReportRecord] = None


class ControlRecord(Record):
    """The same model without speculative decoding: ready, and one ``/generate`` answered."""

    seconds_to_ready: float
    peak_rss_bytes: int
    generate_seconds: float  # raw; the renderer rounds
    completion_tokens: int
    completion: str
    log: str
    argv: list[str] = Field(default_factory=list)


class PreflightCheckRecord(Record):
    """One check of ``runtime.preflight``: its outcome, one line of detail, the fix, the evidence."""

    name: str
    outcome: str  # ok, warn, fail, skipped or info
    detail: str
    fix: Optional[str] = None
    data: dict[str, Any] = Field(default_factory=dict)


class PreflightRecord(Record):
    profile: str
    ok: bool
    passed_over: Optional[str] = None  # why no check applies (the cpu profile)
    quick: bool = False
    seconds: float = 0.0
    checks: list[PreflightCheckRecord] = Field(default_factory=list)


class MemoryRecord(Record):
    """Who set ``mem_fraction_static`` for one launch, and what sglang ran with (its ``server_args=`` log line)."""

    launch: str
    mem_fraction_static: Optional[float] = None
    set_by: str  # "profile" or "sglang"
    source: str
    chunked_prefill_size: Optional[int] = None
    cuda_graph_max_bs: Optional[int] = None
    max_running_requests: Optional[int] = None


class CrashReproSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "01_crash_repro"

    profile_values: dict[str, Any]
    models: ModelsRecord
    preflight: Optional[PreflightRecord] = None
    memory: list[MemoryRecord] = Field(default_factory=list)
    crash: CrashRecord
    control: ControlRecord


# ---------------------------------------------------------------------------------------------------------------
# 02: the interface trace


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


# ---------------------------------------------------------------------------------------------------------------
# 03: patch, relaunch, capture, bench


class ProbeRecord(Record):
    """One greedy ``/generate`` on a server the chain brought up (``fix.relaunch.probe_generate``)."""

    status_code: Optional[int] = None
    completion_tokens: Optional[int] = None
    spec_verify_ct: Optional[int] = None
    spec_accept_length: Optional[float] = None
    error: Optional[str] = None
    ok: bool = False
    speculated: bool = False


class ChainStepRecord(Record):
    """One relaunch of the chain: which patches were in and how the launch ended."""

    step: str
    patches: list[str] = Field(default_factory=list)
    outcome: str
    category: Optional[str] = None
    error: Optional[str] = None
    call_site: Optional[str] = None
    seconds: float
    probe: Optional[ProbeRecord] = None


class SpecArmRecord(Record):
    """One EAGLE-3 arm as planned (``bench.arms.SpecArmPlan``): its drafter and concurrencies."""

    name: str
    kind: str  # bench.sweep.ARM_KINDS
    draft: str
    aux_layer_ids: Optional[list[int]] = None
    concurrency: Optional[list[int]] = None  # None: the profile's whole sweep
    purpose: str = ""


class LosslessRecord(Record):
    """Speculative output against the baseline's greedy output, token for token (``bench.lossless``)."""

    lossless: bool
    required_concurrency: int
    mode: str = "exact"  # "exact" (fp32 profiles) or "agreement" (bf16: matched-prefix agreement vs threshold)
    min_agreement: Optional[float] = None  # the profile's lossless_min_agreement in agreement mode
    passed: Optional[bool] = None  # the verdict the notebook enforces (exact: == lossless)
    comparisons: list[dict[str, Any]] = Field(default_factory=list)


class LayerMismatchRecord(Record):
    """The trained drafter served its trained aux layer ids vs ids shifted by one (``bench.acceptance``)."""

    aligned_arm: str
    shifted_arm: str
    aligned_layer_ids: Optional[list[int]] = None
    shifted_layer_ids: Optional[list[int]] = None
    target_layers: Optional[int] = None
    concurrency: list[int]
    aligned_accept_length: list[float]
    shifted_accept_length: list[float]
    drop: list[float]
    relative_drop: list[Optional[float]]


class CycleComponent(Record):
    """One component of the plain step and of the EAGLE-3 cycle, mean exclusive milliseconds (``bench.cycle``)."""

    name: str  # the timer's component, e.g. "model.target_verify", "kernel.assign_draft_cache_locs"
    group: str  # one of bench.cycle.GROUPS
    harness_only: bool  # True where only the CPU harness pays it (interpreted Triton, torch ports of GPU kernels)
    plain_ms: float  # per plain decode step
    cycle_ms: float  # per EAGLE-3 cycle
    cycle_calls: float  # calls per cycle


class CycleAtBatchSize(Record):
    """The plain step and the cycle at one batch size (requests per batch, as the scheduler ran them)."""

    batch_size: int
    plain_ms: Optional[float] = None
    cycle_ms: Optional[float] = None
    cycle_in_plain_steps: Optional[float] = None
    tokens_per_request_per_cycle: Optional[float] = None
    plain_records: int = 0
    cycle_records: int = 0
    # the target model's forward alone (the "target forward" group), per plain step and per cycle: how it grows
    # with the batch is the host work per running request inside a pass (costmodel.measured_cycle)
    plain_target_forward_ms: Optional[float] = None
    cycle_target_forward_ms: Optional[float] = None


class PointTimeRecord(Record):
    """One benchmark point's measured window split by what the server's scheduler ran (``bench.server_time``):
    decode batches (plain steps or EAGLE-3 cycles), prefill batches, and the rest; milliseconds per decode batch."""

    arm: str
    speculative: bool
    concurrency: int
    window_s: float
    decode_batches: int
    prefill_batches: int
    mean_batch_size: float
    full_batch_share: float  # of the decode batches, the share that ran all ``concurrency`` requests
    decode_ms: float  # per decode batch: the scheduler's calls on decode batches
    prefill_ms: float  # per decode batch: its calls on prefill batches
    other_ms: float  # per decode batch: the rest of the window (idle, polling, requests in and out)
    wall_ms: float  # the window over the decode batches


class CycleComponentsRecord(Record):
    """sglang's EAGLE-3 cycle measured by component against the plain decode step (``bench.cycle``); also written
    alone as ``artifacts/cycle_components.<profile>.json``. Milliseconds are means over the records at
    ``batch_size``; "plain steps" divide by ``plain_step_ms``."""

    schema_id: str
    profile: str
    measured_on: str  # UTC date
    load_average: Optional[list[float]] = None  # 1, 5, 15 min, when the table was built
    trace_file: str
    baseline_arm: str
    eagle_arm: str
    shims: Optional[list[str]] = None  # the EAGLE-3 server's CPU harness shims
    batch_size: int
    speculative_num_steps: int
    draft_tokens: int
    plain_step_ms: float
    cycle_ms: float
    cycle_in_plain_steps: float  # the break-even tokens per request per cycle
    harness_only_ms: float
    cycle_without_harness_ms: float
    cycle_without_harness_in_plain_steps: float
    draft_step_ms: float  # the draft loop per draft step (forward, top-k, loop code)
    draft_step_in_plain_steps: float
    tokens_per_request_per_cycle: Optional[float] = None  # accepted draft tokens + 1, measured in the same cycles
    components: list[CycleComponent]
    groups: dict[str, dict[str, float]]  # group -> {"plain_ms", "cycle_ms"}
    by_batch_size: list[CycleAtBatchSize] = Field(default_factory=list)
    by_point: list[PointTimeRecord] = Field(default_factory=list)  # each measured point's window, split


class LaunchSample(Record):
    """One launch of each headline arm (``bench.launch_spread``): launch 1 is the arms of the benchmark table."""

    launch: int
    baseline_arm: str
    eagle3_arm: str
    baseline_tok_s: float
    eagle3_tok_s: float
    speedup: float
    accept_length: Optional[float] = None
    concurrency: Optional[int] = None  # the point measured (None in sidecars written before it was kept)
    # decode-only rates (running requests / mean TPOT, pooled over the blocks): the rate the cost model predicts
    baseline_decode_tok_s: Optional[float] = None
    eagle3_decode_tok_s: Optional[float] = None
    plain_step_ms: Optional[float] = None  # from the cycle timers, when the harness traced both servers
    cycle_ms: Optional[float] = None
    cycle_in_plain_steps: Optional[float] = None
    load_average: Optional[float] = None  # 1-minute load when the pair finished
    # "sequential": one sweep of each arm, one after the other (launch 1, the benchmark table); "interleaved":
    # both servers up at once, the point in alternating blocks (bench.interleave), each round's speedup kept
    method: str = "sequential"
    round_speedups: list[float] = Field(default_factory=list)
    round_accept_lengths: list[Optional[float]] = Field(default_factory=list)  # the EAGLE-3 block's, per round
    # each round's block as [output tokens, measured seconds], per arm: the interval below is recomputed from them
    # (bench.interleave.speedup_interval); empty in sidecars written before they were kept
    round_baseline: list[list[float]] = Field(default_factory=list)
    round_eagle3: list[list[float]] = Field(default_factory=list)
    # percentile bootstrap interval of the pooled speedup over the rounds; None with one round or no rounds
    speedup_low: Optional[float] = None
    speedup_high: Optional[float] = None
    interval_level_pct: Optional[float] = None  # the interval's level in percent, e.g. 95
    interval_resamples: Optional[int] = None
    interval_seed: Optional[int] = None

    @property
    def decode_speedup(self) -> Optional[float]:
        """EAGLE-3's decode-only rate over the baseline's (the ratio the cost model predicts); None without both."""
        if not (self.baseline_decode_tok_s and self.eagle3_decode_tok_s):
            return None
        return self.eagle3_decode_tok_s / self.baseline_decode_tok_s


class VariantCost(Record):
    """A variant of the headline EAGLE-3 arm (the layer-mismatch drafter) measured in the same interleaved rounds,
    on the same prompts, beside the headline pair (``bench.launch_spread.variant_cost``): what the variant costs
    in throughput, not only in acceptance."""

    variant_arm: str
    headline_arm: str
    launch: int
    concurrency: int
    rounds: int
    rate_ratio: float  # the variant's pooled rate over the headline EAGLE-3 arm's, same rounds and prompts
    ratio_low: Optional[float] = None  # percentile bootstrap interval of that ratio over the rounds (paired)
    ratio_high: Optional[float] = None
    interval_level_pct: Optional[float] = None
    headline_speedup: float  # each over the same baseline blocks
    variant_speedup: float
    headline_accept_length: Optional[float] = None
    variant_accept_length: Optional[float] = None
    cost_pct: float  # throughput the variant loses against the headline arm, (1 - rate_ratio) x 100 (< 0: gains)


class LaunchSpreadRecord(Record):
    """The headline pair measured on several launches at one concurrency, and how far the launches agree
    (``bench.launch_spread``): spreads are (max - min) / median, in percent."""

    concurrency: int
    measured_on: str  # UTC date
    order: str  # the launch order, e.g. "eagle3, baseline | baseline, eagle3"
    launches: list[LaunchSample]
    skipped: list[str] = Field(default_factory=list)  # launches that measured nothing, with their reason
    baseline_spread_pct: float
    eagle3_spread_pct: float
    speedup_min: float
    speedup_median: float
    speedup_max: float
    speedup_spread_pct: float
    tolerance_pct: float  # the project's rule: a spread above it means one launch's speedup is one draw
    agrees: bool


class SamplingRecord(Record):
    """How the speculative CPU arms treat temperature > 0 (the CPU verify has no sampling kernel)."""

    policy: str  # "refused": the server and the bench refuse non-greedy sampling with one line
    reason: str


class DispatchGapRecord(Record):
    """``trace.silent_noop``: sglang's verify dispatch has no CPU branch (file:line evidence)."""

    release: str
    silent_noop: bool
    evidence: list[str] = Field(default_factory=list)


class PatchBenchSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "03_patch_and_bench"

    profile_values: dict[str, Any]
    models: ModelsRecord
    patch: str
    delegated_members: list[str]
    chain: list[ChainStepRecord]
    story: list[str]
    capture: dict[str, dict[str, Any]] = Field(default_factory=dict)
    agreement: list[dict[str, Any]] = Field(default_factory=list)
    bench_report: Optional[str] = None
    arms: list[dict[str, Any]] = Field(default_factory=list)
    cross_check: Optional[dict[str, Any]] = None
    # runtime.cpu_harness.changes: what the CPU harness changed on this run's servers (empty off the harness)
    harness: list[dict[str, Any]] = Field(default_factory=list)
    figures: dict[str, str] = Field(default_factory=dict)
    diagnostics: list[dict[str, Any]] = Field(default_factory=list)
    spec_arms: list[SpecArmRecord] = Field(default_factory=list)
    lossless: Optional[LosslessRecord] = None
    acceptance: list[dict[str, Any]] = Field(default_factory=list)  # bench.acceptance.acceptance_records
    offline_vs_served: list[dict[str, Any]] = Field(default_factory=list)  # bench.acceptance.offline_vs_served
    layer_mismatch: Optional[LayerMismatchRecord] = None
    speedup: list[dict[str, Any]] = Field(default_factory=list)  # bench.acceptance.speedup_records
    sampling: Optional[SamplingRecord] = None
    verify_dispatch_gap: Optional[DispatchGapRecord] = None
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per part of the notebook, measured
    cycle_components: Optional[CycleComponentsRecord] = None  # bench.cycle: the cycle by component, measured
    launch_spread: Optional[LaunchSpreadRecord] = None  # bench.launch_spread: the headline pair relaunched
    # the interleaved launch's pair at every concurrency it measured (bench.interleave; the profile's
    # bench_interleave_concurrency): both arms in the same spells, what the cost model's run check is scored on too
    interleaved_sweep: list[LaunchSample] = Field(default_factory=list)
    # variants of the EAGLE-3 arm (the layer-mismatch drafter) measured in the same interleaved rounds: each one's
    # pair against the same baseline blocks, and its throughput against the headline arm's
    interleaved_variants: list[LaunchSample] = Field(default_factory=list)
    variant_costs: list[VariantCost] = Field(default_factory=list)
    # False while notebook 03 is still measuring (written after each arm, notebook.patch_and_bench.PartialSidecar);
    # a sidecar left with False is a run that stopped after the arms it lists
    complete: bool = True


# ---------------------------------------------------------------------------------------------------------------
# Reading and writing

S = TypeVar("S", bound=Sidecar)
SCHEMAS: tuple[type[Sidecar], ...] = (CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar)


def today() -> str:
    """The UTC date every measured figure is labelled with."""
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def sidecar_path(notebook: str, profile: str) -> Path:
    """``artifacts/<notebook>.<profile>.json``."""
    return repo_dir("artifacts") / f"{notebook}.{profile}.json"


def write(sidecar: Sidecar) -> Path:
    """Validate (a wrong field is a bug in the notebook, caught before anything is replaced), then write."""
    checked = type(sidecar).model_validate(sidecar.model_dump())
    return write_json_atomic(sidecar_path(checked.notebook, checked.profile), checked.model_dump(mode="json"))


def _rerun_hint(schema: type[Sidecar], profile: str) -> str:
    number = schema.NOTEBOOK.split("_", 1)[0]
    return f"rerun it: python -m eagle3lab run --profile {profile} --notebooks {number}"


def read(schema: type[S], profile: str, path: Path | None = None) -> S:
    """The typed sidecar of ``schema``'s notebook for ``profile``; one clear line if it is missing or unusable."""
    path = Path(path) if path is not None else sidecar_path(schema.NOTEBOOK, profile)
    hint = _rerun_hint(schema, profile)
    fields = {"path": path, "notebook": schema.NOTEBOOK, "profile": profile}
    if not path.is_file():
        raise SidecarError(f"sidecar {path} is missing (notebook {schema.NOTEBOOK} has not run on '{profile}'); "
                           f"{hint}", **fields)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SidecarError(f"sidecar {path} is unreadable ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
                           f"{hint}", **fields) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise SidecarError(f"sidecar {path} has schema version {version}, this eagle3lab reads {SCHEMA_VERSION}; "
                           f"{hint}", version=version, expected=SCHEMA_VERSION, **fields)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise SidecarError(f"sidecar {path} does not match its schema at '{where}': {first['msg']}; "
                           f"{hint}", location=where, **fields) from None


def read_if_present(schema: type[S], profile: str) -> Optional[S]:
    """Like ``read``, but a sidecar that was never written is ``None`` (a notebook that did not run)."""
    if not sidecar_path(schema.NOTEBOOK, profile).is_file():
        return None
    return read(schema, profile)
