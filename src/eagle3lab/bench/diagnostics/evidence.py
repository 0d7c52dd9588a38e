"""What the rules read and what they return: an ``Evidence`` (launch, log, configs, benchmark, modelled and measured
thresholds with their provenance) and one ``Finding`` per cause tag (``CAUSES``), yes / no / unknown.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence


YES, NO, UNKNOWN = "yes", "no", "unknown"


CAUSES = ("cuda_graph_bs_below_concurrency", "spec_request_cap", "draft_tokens_too_many_for_batch", "low_acceptance",
          "drafter_target_mismatch", "spec_algorithm_flag_mismatch", "aux_layer_ids_mismatch",
          "draft_context_window_exceeded", "temperature_sampling", "overlap_scheduler_off", "no_cuda_graph",
          "tp_communication_bound", "compute_bound_large_batch", "moe_sparsity_verify_cost",
          "chat_template_mismatch", "benchmark_method_error")


# the acceptance rule's served-vs-offline comparison: how many standard errors of the served mean count as "below"
STANDARD_ERRORS = 2.0


@dataclass(frozen=True)
class Finding:
    """One cause checked: does it apply (yes / no / unknown), the evidence either way, and the fix."""

    cause: str
    applies: str
    evidence: str
    fix: str = ""
    threshold_provenance: Optional[str] = None  # measured | modelled | launch flag | server log | config | ...

    def line(self) -> str:
        return f"[{self.applies}] {self.cause}: {self.evidence}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Threshold:
    """A number a rule compares with, and where it comes from."""

    value: float
    provenance: str  # "measured" | "modelled" | "reported" | ...
    where: str = ""

    def text(self) -> str:
        return f"{self.value:.2f} [{self.provenance}{': ' + self.where if self.where else ''}]"


@dataclass
class ModelFigures:
    """The cost model's figures for this deployment at the batch judged (computed by the caller, e.g. doctor with
    a hardware preset): the cycle and the plain step by component, and the verify pass of the same flags run as a
    chain (topk 1, steps + 1 tokens) for comparison."""

    batch: int
    hardware: str
    cycle_parts: dict[str, float]  # seconds of one speculative cycle by component (all passes summed)
    plain_parts: dict[str, float]  # seconds of one plain step by component
    verify_parts: dict[str, float]  # seconds of the verify pass by component
    break_even: float
    chain_break_even: Optional[float] = None  # same steps, topk 1, steps + 1 draft tokens
    verify_distinct_experts: Optional[float] = None
    plain_distinct_experts: Optional[float] = None
    max_accept: Optional[int] = None
    where: str = ""


@dataclass
class BenchFigures:
    """What a benchmark (bench_serving text or JSONL, or the project's own sweep) says about one arm."""

    arm: str  # "speculative" | "baseline" | a label
    concurrency: Optional[int] = None
    num_prompts: Optional[int] = None
    completed: Optional[int] = None
    failed: Optional[int] = None
    output_tok_s: Optional[float] = None
    mean_input_len: Optional[float] = None
    mean_output_len: Optional[float] = None
    accept_length: Optional[float] = None
    dataset: Optional[str] = None
    chat_template: Optional[bool] = None
    temperature: Optional[float] = None
    source: str = ""


@dataclass
class Evidence:
    """Everything known about one EAGLE-3 deployment (and its baseline); any field may be missing."""

    launch: Optional[Mapping[str, Any]] = None  # the speculative command's flags (sglang dest names)
    launch_note: str = ""  # how it was parsed
    baseline_launch: Optional[Mapping[str, Any]] = None
    server_args: Optional[Mapping[str, Any]] = None  # resolved: server log's server_args or /get_server_info
    baseline_server_args: Optional[Mapping[str, Any]] = None
    spec_log: Optional[str] = None
    baseline_log: Optional[str] = None
    concurrency: Optional[Sequence[int]] = None
    accept_lengths: Optional[Sequence[float]] = None  # served, per request or per log line
    accept_where: str = ""
    offline_acceptance: Optional[Threshold] = None  # the drafter's offline acceptance on its training distribution
    break_even: Optional[Threshold] = None  # measured where a control arm exists, else modelled
    modelled_break_even: Optional[Threshold] = None  # shown beside a measured one
    speedups: Optional[Mapping[int, float]] = None  # measured speculative / baseline rate per concurrency
    speedup_where: str = ""
    bench: Sequence[BenchFigures] = ()
    bench_note: str = ""
    same_sweep: bool = False  # both arms from one sweep configuration (the project's own run)
    launch_spread: Optional[Mapping[str, Any]] = None  # the headline pair relaunched (sidecars.LaunchSpreadRecord)
    temperature: Optional[float] = None
    temperature_where: str = ""
    input_len: Optional[float] = None  # mean prompt tokens per request
    output_len: Optional[float] = None
    drafter_config: Optional[Mapping[str, Any]] = None
    target_config: Optional[Mapping[str, Any]] = None
    layer_table: Any = None
    model: Optional[ModelFigures] = None
    device: Optional[str] = None  # "cpu" for the project's cpu profile
    # speculative flags no launch or log names: the engine's own defaults for this target (read from its source by
    # the caller, e.g. doctor), consulted last by ``arg``; and the environment the speculative launch sets
    flag_defaults: Optional[Mapping[str, Any]] = None
    flag_defaults_where: str = ""
    launch_env: Optional[Mapping[str, str]] = None

    def arg(self, key: str) -> tuple[Any, str]:
        """A speculative server argument and where it was read: resolved (log / server info) before the launch."""
        if self.server_args and self.server_args.get(key) is not None:
            return self.server_args[key], "server_args (resolved)"
        if self.launch and self.launch.get(key) is not None:
            return self.launch[key], "launch command"
        if self.flag_defaults and self.flag_defaults.get(key) is not None:
            return self.flag_defaults[key], self.flag_defaults_where or "engine default"
        return None, ""
