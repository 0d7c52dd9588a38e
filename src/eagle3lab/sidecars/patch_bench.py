"""Notebook 03's sidecar: the relaunch chain, capture results, the benchmark's arms and checks, the cycle's
components, the launch spread and the diagnostics.
"""

from __future__ import annotations

from typing import ClassVar, Optional, Union
from pydantic import Field
from eagle3lab.sidecars.base import JsonObject, Record, Sidecar, SparseRecord
from eagle3lab.sidecars.capture import CaptureRecord
from eagle3lab.sidecars.crash_repro import ModelsRecord, NoiseFloorRecord, PromptAgreementRecord


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
    load_format: str = "auto"  # sglang's --load-format: "dummy" for a start-up check on random weights


class SpecArmRecord(Record):
    """One EAGLE-3 arm as planned (``notebook.patch_and_bench.arm_plans.SpecArmPlan``): its drafter and
    concurrencies."""

    name: str
    kind: str  # bench.sweep.ARM_KINDS
    draft: str
    aux_layer_ids: Optional[list[int]] = None
    concurrency: Optional[list[int]] = None  # None: the profile's whole sweep
    purpose: str = ""


class MismatchRecord(SparseRecord):
    """The first place one prompt's output differs (``bench.lossless.Mismatch``)."""

    prompt_index: int = 0
    position: int = 0
    reference_token: Optional[int] = None
    candidate_token: Optional[int] = None


class LosslessComparisonRecord(SparseRecord):
    """One arm against the reference arm at one concurrency (``bench.lossless.LosslessComparison.to_dict``)."""

    arm: str = ""
    reference: str = ""
    concurrency: int = 0
    prompts: int = 0
    identical: int = 0
    tokens_compared: int = 0
    mismatches: list[MismatchRecord] = Field(default_factory=list)
    per_prompt: list[PromptAgreementRecord] = Field(default_factory=list)
    lossless: bool = False
    tokens_matched: int = 0
    agreement: float = 0.0


class LosslessRecord(Record):
    """Speculative output against the baseline's greedy output, token for token (``bench.lossless``)."""

    lossless: bool
    required_concurrency: int
    mode: str = "exact"  # "exact" (fp32), "agreement" or "noise_floor" (bf16: matched-prefix agreement vs threshold)
    min_agreement: Optional[float] = None  # the threshold: lossless_min_agreement, or the noise floor's bound
    passed: Optional[bool] = None  # the verdict the notebook enforces (exact: == lossless)
    comparisons: list[LosslessComparisonRecord] = Field(default_factory=list)
    # "noise_floor" mode: the floor the threshold comes from (left out elsewhere, as records before it were written)
    noise_floor: Optional[NoiseFloorRecord] = Field(default=None, exclude_if=lambda v: v is None)


class WorkloadPointRecord(Record):
    """One point's measured mean lengths (``bench.lengths.workload_record``)."""

    concurrency: int
    requests: int
    prompt_tokens_mean: Optional[float] = None
    output_tokens_mean: Optional[float] = None


class WorkloadRecord(Record):
    """The prompts a run sent and their measured mean prompt and output tokens (the baseline arm's requests)."""

    prompt_kind: str
    dataset: Optional[str] = None  # the conversation file, for that workload
    input_len: int  # random ids: the prompt length; chat and conversations: its cap
    output_len: int
    seed: int = 0
    arm: str
    requests: int
    prompt_tokens_mean: Optional[float] = None
    output_tokens_mean: Optional[float] = None
    per_point: list[WorkloadPointRecord] = Field(default_factory=list)


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
    # each round's measured prompts, in order from the point's first prompt (the sequential launch measured the
    # first ones of the same stream): empty in sidecars written before they were kept
    round_prompts: list[int] = Field(default_factory=list)
    # whether the pair's baseline ran sglang's overlap scheduler (the EAGLE-3 server never does); None: not recorded
    baseline_overlap_schedule: Optional[bool] = None
    # "overlap_control": a baseline without the overlap scheduler measured against the pair's baseline with it, in
    # the same rounds (its rate in eagle3_tok_s, the ratio in speedup); None: the pair itself or an EAGLE-3 variant
    role: Optional[str] = None
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


class DispatchBranch(SparseRecord):
    """One arm of the device dispatch (``trace.silent_noop.Branch``)."""

    condition: str = ""
    line: int = 0
    calls: list[str] = Field(default_factory=list)


class LocatedCode(SparseRecord):
    """A located fact: sglang's file, line and the code there (``trace.silent_noop.Evidence``)."""

    file: str = ""
    line: int = 0
    code: str = ""


class DispatchGapRecord(Record):
    """``trace.silent_noop``: sglang's verify dispatch has no CPU branch (file:line evidence)."""

    release: str
    silent_noop: bool
    evidence: list[str] = Field(default_factory=list)
    file: str = ""
    function_line: Optional[int] = None
    branches: list[DispatchBranch] = Field(default_factory=list)
    has_else: Optional[bool] = None
    cpu_branch: Optional[bool] = None  # an ``else`` or a condition that names a CPU flag
    returns: Optional[LocatedCode] = None  # what the function hands back when no branch ran
    flags: list[LocatedCode] = Field(default_factory=list)  # how each flag in the conditions is defined
    caller: list[LocatedCode] = Field(default_factory=list)  # the caller's buffer and the call


#: What notebook 02's trace said and the capture check measured, per item: member lists, a member name or ids.
AgreementValue = Union[list[str], list[int], str, int, None]


class AgreementRecord(SparseRecord):
    """One item the trace predicted and the capture check measured (``fix.capture_trace``)."""

    item: str = ""
    trace: AgreementValue = None
    measured: AgreementValue = None
    agree: bool = False


class ArmRow(SparseRecord):
    """One row of ``bench.sweep.point_rows`` as the sidecar holds it: a measured point (rounded, ``ok`` as
    "done/asked"), or an arm that measured no point (arm, kind, status and the note saying why)."""

    arm: str = ""
    kind: str = ""
    concurrency: Optional[int] = None  # None: the arm measured no point
    status: str = ""
    ok: str = ""
    out_tok_s: Optional[float] = None
    req_s: Optional[float] = None
    ttft_p50_ms: Optional[float] = None
    ttft_p99_ms: Optional[float] = None
    itl_per_token_p50_ms: Optional[float] = None
    itl_per_token_p99_ms: Optional[float] = None
    itl_per_chunk_p50_ms: Optional[float] = None
    e2e_p50_ms: Optional[float] = None
    e2e_p99_ms: Optional[float] = None
    accept_len: Optional[float] = None
    accept_len_pooled: Optional[float] = None
    server_avg_accept_len: Optional[float] = None
    client_cpu_s_per_1k_tok: Optional[float] = None
    server_cpu: Optional[float] = None
    other_cpu: Optional[float] = None
    note: Optional[str] = None
    # a point measured with repeats (the benchmark table shows "mean ± sd (sd of n repeats)")
    out_tok_s_sd: Optional[float] = None
    repeats: Optional[int] = None


class BenchServingKept(SparseRecord):
    """bench_serving's kept result keys from its last round (``bench.crosscheck.KEPT_KEYS``); None where absent."""

    completed: Optional[int] = None
    duration: Optional[float] = None
    total_input_tokens: Optional[int] = None
    total_output_tokens: Optional[int] = None
    request_throughput: Optional[float] = None
    output_throughput: Optional[float] = None
    mean_ttft_ms: Optional[float] = None
    median_ttft_ms: Optional[float] = None
    p99_ttft_ms: Optional[float] = None
    mean_itl_ms: Optional[float] = None
    median_itl_ms: Optional[float] = None
    p99_itl_ms: Optional[float] = None
    mean_e2e_latency_ms: Optional[float] = None
    median_e2e_latency_ms: Optional[float] = None
    accept_length: Optional[float] = None
    max_concurrency: Optional[int] = None


class CrossCheckRecord(SparseRecord):
    """Our throughput next to bench_serving's at one concurrency (``bench.crosscheck.CrossCheck.to_dict``)."""

    concurrency: int = 0
    num_prompts: int = 0
    ours_output_tok_per_s: float = 0.0
    theirs_output_tok_per_s: float = 0.0
    ratio: float = 0.0
    ours_rounds: list[float] = Field(default_factory=list)
    theirs_rounds: list[float] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)
    theirs: BenchServingKept = Field(default_factory=BenchServingKept)
    argv: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    machine_cpu_busy: Optional[float] = None
    server_cpu: Optional[float] = None
    rounds: int = 0
    round_ratios: list[float] = Field(default_factory=list)


class HarnessChangeRecord(SparseRecord):
    """One change the CPU harness made on this run's servers (``runtime.cpu_harness.changes``)."""

    obstacle: int = 0
    name: str = ""
    where: str = ""
    kind: str = ""
    servers: str = ""
    what: str = ""


class FindingRecord(SparseRecord):
    """One cause tag of the diagnostics and whether it applies (``bench.diagnostics``)."""

    cause: str = ""
    applies: str = ""
    evidence: str = ""
    fix: str = ""
    threshold_provenance: Optional[str] = None


class ArmPointRow(SparseRecord):
    """The key every per-point acceptance row starts with: which arm, of which kind, at which concurrency."""

    arm: str = ""
    kind: str = ""
    concurrency: int = 0


class AcceptanceRow(ArmPointRow):
    """One EAGLE-3 point's acceptance, client and server side (``bench.acceptance.acceptance_records``)."""

    accept_length: Optional[float] = None
    accept_length_mean: Optional[float] = None
    server_accept_length_mean: Optional[float] = None
    disagreements: Optional[int] = None
    accepted_per_verify_histogram: Optional[list[int]] = None
    accept_length_per_step: Optional[float] = None
    server_avg_accept_length: Optional[float] = None
    server_minus_per_step: Optional[float] = None


class OfflineVsServedRow(ArmPointRow):
    """Served acceptance against the drafter's offline simulation (``bench.acceptance.offline_vs_served``)."""

    served_mean: Optional[float] = None
    offline_mean: Optional[float] = None
    served_pooled: Optional[float] = None
    offline_pooled: Optional[float] = None
    served_histogram: Optional[list[int]] = None
    offline_histogram: list[int] = Field(default_factory=list)


class SpeedupRow(SparseRecord):
    """EAGLE-3 over the baseline at one concurrency (``bench.acceptance.speedup_records``)."""

    concurrency: int = 0
    baseline_tok_s: float = 0.0
    eagle3_tok_s: float = 0.0
    speedup: float = 0.0
    accept_length: Optional[float] = None


class PatchBenchSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "03_patch_and_bench"

    profile_values: JsonObject  # the profile's values as loaded (runtime.profiles.Profile), for the record
    models: ModelsRecord
    patch: str
    delegated_members: list[str]
    chain: list[ChainStepRecord]
    story: list[str]
    capture: dict[str, CaptureRecord] = Field(default_factory=dict)  # patch name ("None": unpatched) -> check
    agreement: list[AgreementRecord] = Field(default_factory=list)
    bench_report: Optional[str] = None
    arms: list[ArmRow] = Field(default_factory=list)
    cross_check: Optional[CrossCheckRecord] = None
    # runtime.cpu_harness.changes: what the CPU harness changed on this run's servers (empty off the harness)
    harness: list[HarnessChangeRecord] = Field(default_factory=list)
    figures: dict[str, str] = Field(default_factory=dict)
    diagnostics: list[FindingRecord] = Field(default_factory=list)
    spec_arms: list[SpecArmRecord] = Field(default_factory=list)
    lossless: Optional[LosslessRecord] = None
    # bench.lengths: the prompts sent and their measured lengths (left out where not measured)
    workload: Optional[WorkloadRecord] = Field(default=None, exclude_if=lambda v: v is None)
    acceptance: list[AcceptanceRow] = Field(default_factory=list)  # bench.acceptance.acceptance_records
    offline_vs_served: list[OfflineVsServedRow] = Field(default_factory=list)  # bench.acceptance.offline_vs_served
    layer_mismatch: Optional[LayerMismatchRecord] = None
    speedup: list[SpeedupRow] = Field(default_factory=list)  # bench.acceptance.speedup_records
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
    # False while notebook 03 is still measuring (written after each arm,
    # notebook.patch_and_bench.bench_records.PartialSidecar); a sidecar left with False is a run that stopped after
    # the arms it lists
    complete: bool = True
