"""Notebook 01's sidecar: the crash reproduced on real sglang, its control run, the models and the preflight."""

from __future__ import annotations

from typing import ClassVar, Optional
from pydantic import Field
from eagle3lab.sidecars.base import JsonObject, Record, Sidecar, SparseRecord


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


class ChainLinkRecord(SparseRecord):
    """One raw traceback of a crash's chain (``runtime.crashlog``): its exception and where it was raised."""

    exc_type: str = ""
    message: str = ""
    link: Optional[str] = None  # how it follows the previous one: "cause" or "context"
    call_site: Optional[str] = None


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
    chain: list[ChainLinkRecord] = Field(default_factory=list)  # the raw tracebacks of its chain, oldest first
    classified_by: Optional[str] = None
    extra: JsonObject = Field(default_factory=dict)  # runtime.crashlog.CrashReport.extra (no rule fills it yet)


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


class PromptAgreementRecord(SparseRecord):
    """One prompt's outputs in two arms (``bench.lossless.PromptAgreement``)."""

    prompt_index: int = 0
    identical: bool = False
    first_divergence: Optional[int] = None  # None when identical
    tokens_matched: int = 0
    tokens_compared: int = 0


class NoiseFloorRecord(Record):
    """The baseline against itself at another batch size (``bench.lossless.NoiseFloor``): measured on notebook 01's
    control server, the bound notebook 03's lossless check holds the EAGLE-3 arm to."""

    low: int
    high: int
    prompts: int
    identical: int
    tokens_compared: int
    tokens_matched: int
    agreement: float
    interval: list[float]
    bound: float
    margin: float
    resamples: int
    seed: int
    how: str
    workload: JsonObject = Field(default_factory=dict)
    per_prompt: list[PromptAgreementRecord] = Field(default_factory=list)


class PreflightCheckRecord(Record):
    """One check of ``preflight``: its outcome, one line of detail, the fix, the evidence."""

    name: str
    outcome: str  # ok, warn, fail, skipped or info
    detail: str
    fix: Optional[str] = None
    data: JsonObject = Field(default_factory=dict)  # the check's own evidence: each check names its keys


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

    profile_values: JsonObject  # the profile's values as loaded (runtime.profiles.Profile), for the record
    models: ModelsRecord
    preflight: Optional[PreflightRecord] = None
    memory: list[MemoryRecord] = Field(default_factory=list)
    crash: CrashRecord
    control: ControlRecord
    # measured on the control server where the profile asks (lossless_noise_floor, not fp32); None elsewhere
    noise_floor: Optional[NoiseFloorRecord] = Field(default=None, exclude_if=lambda v: v is None)  # left out unmeasured
