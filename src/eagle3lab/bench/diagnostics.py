"""Why did EAGLE-3 not speed things up? One rules engine for ``doctor`` (a user's launch command, server log and
benchmark) and for notebook 03 (the project's own run).

Every rule reads an ``Evidence`` and returns a ``Finding`` for its cause tag: ``applies`` is "yes", "no" or
"unknown" -- "unknown" when the evidence it needs is missing, never a guess. A threshold the rule compares with
(a break-even acceptance, a context window, a captured batch size) is handed in with its provenance: measured
(a control arm, a log line), modelled (the cost model, computed by the caller), or the launch flag / log line it
was read from. This module reads no cost model itself (it lives in the bench stage); callers pass modelled
figures in (``ModelFigures``).

Log patterns and field names are sglang 0.4.x-0.5.x's own (``srt/server_args.py _handle_speculative_decoding``,
``srt/managers/scheduler.py``, ``scheduler_metrics_mixin.py log_decode_stats``, ``bench_serving.py``); each
pattern names where its line is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, ARM_KIND_EAGLE3_CONTROL, load_requests
from eagle3lab.errors import DiagnosticsError
from eagle3lab.runtime.sglang_args import logged_server_args
from eagle3lab.trace.contract import CaptureMode, RunCondition

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

    def arg(self, key: str) -> tuple[Any, str]:
        """A speculative server argument and where it was read: resolved (log / server info) before the launch."""
        if self.server_args and self.server_args.get(key) is not None:
            return self.server_args[key], "server_args (resolved)"
        if self.launch and self.launch.get(key) is not None:
            return self.launch[key], "launch command"
        return None, ""


# ------------------------------------------------------------------------------------------- log patterns
# srt/server_args.py _handle_speculative_decoding (logged while the server arguments are resolved)
RESET_CAP = re.compile(r"Max running requests is reset to (\d+) for speculative decoding[^\n]*")
OVERLAP_OFF = re.compile(r"Overlap scheduler is disabled (?:when spec v2 is off|for speculative decoding)[^\n]*")
SPEC_V2_ON = re.compile(r"Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is "
                        r"turned on[^\n]*")
MIXED_OFF = re.compile(r"Mixed chunked prefill is disabled because of using eagle speculative decoding[^\n]*")
RADIX_OFF = re.compile(r"Disabling radix cache since speculative decoding for \S+ is not supported[^\n]*")
# srt/managers/scheduler.py, rank 0 after the memory pool is sized
SCHEDULER_LIMITS = re.compile(r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
                              r"max_running_requests=(\d+)[^\n]*")
# srt/managers/scheduler_metrics_mixin.py log_decode_stats (0.4.x: scheduler.py), any logger prefix
DECODE_LINE = re.compile(r"Decode batch[^\n]*?#running-req: (?P<running>\d+)[^\n]*")
_ACCEPT = re.compile(r"accept(?: len|_len|_length): (?P<v>[\d.]+)")
_GRAPH = re.compile(r"(?:cuda|cpu|npu) graph: (?P<v>True|False)")
_QUEUE = re.compile(r"#queue-req: (?P<v>\d+)")
_GEN = re.compile(r"gen throughput \(token/s\): (?P<v>[\d.]+)")
# vLLM: the capture sizes count tokens (batch x (1 + speculative tokens)); vllm/config/vllm.py
VLLM_TRUNCATED = re.compile(r"Truncating max_cudagraph_capture_size to (\d+)[^\n]*")
LOG_ACCEPT_ANY = re.compile(r"accept(?:_len|ance length| len)\s*[:=]\s*(?P<v>\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class DecodeLine:
    """One 'Decode batch' log line, the fields the rules use."""

    running: int
    queued: Optional[int]
    accept_len: Optional[float]
    graph: Optional[bool]
    gen_tok_s: Optional[float]
    text: str


def decode_lines(log_text: Optional[str]) -> list[DecodeLine]:
    """Every 'Decode batch' line of a server log, parsed."""
    out = []
    for match in DECODE_LINE.finditer(log_text or ""):
        text = match.group(0)

        def grab(pattern: re.Pattern[str], cast: Callable[[str], Any]) -> Any:
            found = pattern.search(text)
            return cast(found.group("v")) if found else None

        out.append(DecodeLine(running=int(match.group("running")), queued=grab(_QUEUE, int),
                              accept_len=grab(_ACCEPT, float), graph=grab(_GRAPH, lambda v: v == "True"),
                              gen_tok_s=grab(_GEN, float), text=text.strip()))
    return out


def log_accept_lengths(log_text: Optional[str]) -> list[float]:
    """Acceptance lengths a log reports: its 'Decode batch ... accept len' lines, else any 'accept_len: x'."""
    values = [d.accept_len for d in decode_lines(log_text) if d.accept_len is not None]
    if values:
        return values
    return [float(m.group("v")) for m in LOG_ACCEPT_ANY.finditer(log_text or "")]


def _first_line(pattern: re.Pattern[str], text: Optional[str]) -> Optional[str]:
    found = pattern.search(text or "")
    return found.group(0).strip() if found else None


def server_args_from_log(log_text: Optional[str]) -> Optional[dict[str, Any]]:
    """The resolved ``ServerArgs`` sglang logs at start-up (``runtime.sglang_args.logged_server_args``)."""
    return logged_server_args(log_text)


def _check_info(info: Any, what: str) -> Optional[Mapping[str, Any]]:
    if info is None:
        return None
    if not isinstance(info, Mapping):
        raise DiagnosticsError(f"{what}: expected the /get_server_info JSON object (a mapping), got "
                               f"{type(info).__name__}", what=what, problem="not_a_mapping")
    return info


def running_limit(info: Optional[Mapping[str, Any]], log_text: Optional[str]) -> Optional[tuple[int, str]]:
    """The request limit the scheduler enforced, and where it was read.

    Preference: the scheduler's effective value (``internal_states[*].effective_max_running_requests_per_dp``),
    then the scheduler log line, then the resolved server argument ``max_running_requests``.
    """
    states = (info or {}).get("internal_states") or []
    effective = [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, Mapping)]
    effective = [v for v in effective if isinstance(v, int)]
    if effective:
        return min(effective), f"server_info internal_states effective_max_running_requests_per_dp={min(effective)}"
    scheduler = SCHEDULER_LIMITS.search(log_text or "")
    if scheduler:
        return int(scheduler.group(4)), f"log: {scheduler.group(0).strip()}"
    value = (info or {}).get("max_running_requests")
    if isinstance(value, int):
        return value, f"server args max_running_requests={value}"
    return None


# ---------------------------------------------------------------------------------------------------- helpers
def _f(cause: str, applies: str, evidence: str, fix: str = "", provenance: Optional[str] = None) -> Finding:
    return Finding(cause, applies, evidence, fix, provenance)


def _prov(where: str) -> str:
    """The provenance of a value ``Evidence.arg`` read: the resolved server arguments (a log) or the launch."""
    return "server log" if "server_args" in where else "launch flag"


def _max_batch(ev: Evidence) -> tuple[Optional[int], str]:
    if ev.concurrency:
        return max(ev.concurrency), f"benchmark concurrency {max(ev.concurrency)}"
    running = [d.running for d in decode_lines(ev.spec_log)]
    if running:
        return max(running), f"log: up to #running-req {max(running)}"
    return None, ""


def _text_config(cfg: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    cfg = cfg or {}
    return {**cfg, **(cfg.get("text_config") or {})} if isinstance(cfg.get("text_config"), Mapping) else cfg


def _spec_flags(ev: Evidence) -> tuple[Optional[int], Optional[int], Optional[int]]:
    steps = ev.arg("speculative_num_steps")[0]
    topk = ev.arg("speculative_eagle_topk")[0]
    tokens = ev.arg("speculative_num_draft_tokens")[0]
    as_int = lambda v: int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    return as_int(steps), as_int(topk), as_int(tokens)


def _served_acceptance(ev: Evidence) -> tuple[Optional[list[float]], str]:
    if ev.accept_lengths:
        return list(ev.accept_lengths), ev.accept_where or "served"
    values = log_accept_lengths(ev.spec_log)
    if values:
        return values, f"{len(values)} accept-length figure(s) in the server log"
    bench = [b.accept_length for b in ev.bench if b.accept_length is not None and b.arm != "baseline"]
    if bench:
        return bench, "benchmark output"
    return None, ""


# ----------------------------------------------------------------------------------------------- the rules
def rule_cuda_graph_bs(ev: Evidence) -> Finding:
    cause = "cuda_graph_bs_below_concurrency"
    fix = "raise --cuda-graph-max-bs to at least the concurrency served (or lower the concurrency)"
    disabled, _ = ev.arg("disable_cuda_graph")
    if disabled is True:
        return _f(cause, NO, "CUDA graphs are off altogether (--disable-cuda-graph): see no_cuda_graph", fix)
    batch, batch_where = _max_batch(ev)
    cap = running_limit(ev.server_args, ev.spec_log)
    if batch is not None and cap is not None and cap[0] < batch:
        batch, batch_where = cap[0], f"{batch_where}, capped at {cap[0]} running requests ({cap[1]})"
    max_bs, where = ev.arg("cuda_graph_max_bs")
    graph_list, list_where = ev.arg("cuda_graph_bs")
    if max_bs is None and isinstance(graph_list, (list, tuple)) and graph_list:
        max_bs, where = max(graph_list), f"{list_where} (--cuda-graph-bs)"
    truncated = VLLM_TRUNCATED.search(ev.spec_log or "")
    if max_bs is None and truncated:
        _, _, tokens = _spec_flags(ev)
        per_request = tokens or None
        if per_request:
            max_bs = int(truncated.group(1)) // per_request
            where = (f"log: {truncated.group(0).strip()} (vLLM counts tokens: {truncated.group(1)} / "
                     f"{per_request} tokens per request per verify)")
    if max_bs is not None and batch is not None:
        applies = YES if batch > int(max_bs) else NO
        return _f(cause, applies, f"captured batch sizes up to {max_bs} ({where}); {batch_where}", fix,
                  "launch flag" if "launch" in where else "server log")
    lines = [d for d in decode_lines(ev.spec_log) if d.graph is not None]
    with_graph = [d.running for d in lines if d.graph]
    without = [d for d in lines if not d.graph]
    if with_graph and without and max(d.running for d in without) > max(with_graph):
        worst = max(without, key=lambda d: d.running)
        return _f(cause, YES, f"decode lines replay graphs up to #running-req {max(with_graph)} and run without "
                               f"them above it: {worst.text}", fix, "server log")
    if lines and not without:
        return _f(cause, NO, f"all {len(lines)} decode lines replayed a graph", fix, "server log")
    missing = "the captured batch sizes (--cuda-graph-max-bs or server_args in the log)" if max_bs is None \
        else "the concurrency (--concurrency or decode lines)"
    return _f(cause, UNKNOWN, f"no evidence of {missing}", fix)


def rule_spec_request_cap(ev: Evidence) -> Finding:
    """sglang caps running requests under EAGLE (48 in 0.5.x, 32 in early 0.4.x) unless --max-running-requests is
    given; the baseline's limit is sized by KV memory. Above the cap, speculation runs fewer requests per step."""
    cause = "spec_request_cap"
    fix = "pass --max-running-requests equal to the concurrency you serve (both arms)"
    spec_info = _check_info(ev.server_args, "speculative run")
    spec = running_limit(spec_info, ev.spec_log)
    reset = RESET_CAP.search(ev.spec_log or "")
    if spec is None and reset is None and ev.launch and ev.launch.get("max_running_requests") is not None:
        spec = (int(ev.launch["max_running_requests"]), "launch --max-running-requests")
    if spec is None and reset is None:
        why = "the launch sets no --max-running-requests; sglang resets it for speculation and logs the value " \
              "('Max running requests is reset to N'): give the server log" if ev.launch else \
              "no request limit in the evidence (server log or launch flag)"
        return _f(cause, UNKNOWN, why, fix)
    limit = spec[0] if spec else int(reset.group(1))  # type: ignore[union-attr]
    parts = [f"speculative limit {spec[0]} ({spec[1]})"] if spec else []
    if reset:
        parts.append(f"log: {reset.group(0).strip()}")
    base = running_limit(_check_info(ev.baseline_server_args, "baseline run"), ev.baseline_log)
    if base is None and ev.baseline_launch and ev.baseline_launch.get("max_running_requests") is not None:
        base = (int(ev.baseline_launch["max_running_requests"]), "baseline launch --max-running-requests")
    queued = [line for line in decode_lines(ev.spec_log) if (line.queued or 0) > 0]
    if queued:
        worst = max(queued, key=lambda line: (line.queued or 0, line.running))
        parts.append(f"requests waited while the limit was full: {worst.text}")
    batch, batch_where = _max_batch(ev)
    if batch is not None:
        parts.append(batch_where)
    provenance = "server log" if (reset or (spec and "log" in spec[1])) else "launch flag"
    if base is not None:
        parts.append(f"baseline limit {base[0]} ({base[1]})")
        if batch is None:
            applies = YES if limit < base[0] and queued else (NO if limit >= base[0] else UNKNOWN)
        else:
            applies = YES if limit < base[0] and (batch > limit or queued) else NO
    elif batch is not None:
        applies = YES if batch > limit or queued else NO
    else:
        applies = YES if queued else UNKNOWN
    return _f(cause, applies, "; ".join(parts), fix, provenance)


def rule_draft_tokens(ev: Evidence) -> Finding:
    cause = "draft_tokens_too_many_for_batch"
    fix = ("at batch > 1 use a chain: --speculative-eagle-topk 1 --speculative-num-draft-tokens = num-steps + 1 "
           "(tree settings from a model card are tuned for batch 1)")
    steps, topk, tokens = _spec_flags(ev)
    batch, batch_where = _max_batch(ev)
    if tokens is None or steps is None:
        return _f(cause, UNKNOWN, "speculative flags (num-steps, num-draft-tokens) not in the evidence", fix)
    flags = f"{steps} steps, topk {topk}, {tokens} draft tokens"
    if tokens <= steps + 1:
        return _f(cause, NO, f"{flags}: a chain, every verified token can be accepted", fix,
                  _prov(ev.arg("speculative_num_draft_tokens")[1]))
    if batch is None:
        return _f(cause, UNKNOWN, f"{flags}: a tree verifying {tokens} tokens per request for at most {steps + 1} "
                                  "accepted; the concurrency is unknown", fix)
    waste = f"{flags}: each verify processes {batch} x {tokens} = {batch * tokens} tokens for at most " \
            f"{batch * (steps + 1)} accepted ({batch_where})"
    m = ev.model
    if m is None or m.chain_break_even is None:
        return _f(cause, UNKNOWN, f"{waste}; no cost model (give --hardware and --target-config) to say what the "
                                  "extra tokens cost at this batch", fix)
    applies = YES if batch > 1 and m.break_even > m.chain_break_even else NO
    return _f(cause, applies, f"{waste}; modelled break-even acceptance {m.break_even:.2f} with this tree vs "
                              f"{m.chain_break_even:.2f} as a chain at batch {m.batch} on {m.hardware}", fix,
              "modelled")


def rule_low_acceptance(ev: Evidence) -> Finding:
    cause = "low_acceptance"
    fix = ("a drafter trained for this target and workload (SpecForge), fewer draft steps, or no speculation at "
           "this batch")
    served, where = _served_acceptance(ev)
    if not served:
        return _f(cause, UNKNOWN, "no served acceptance length (server log 'accept len', benchmark or run records)",
                  fix)
    if any(not isinstance(a, (int, float)) or a < 0 for a in served):
        raise DiagnosticsError("acceptance: acceptance lengths must be non-negative numbers")
    mean = statistics.fmean(served)
    text = f"served acceptance {mean:.2f} ({where})"
    if ev.break_even is None:
        return _f(cause, UNKNOWN, f"{text}; no break-even to compare with (a control arm, or --hardware with "
                                  "--target-config for the cost model's)", fix)
    parts = [text, f"break-even {ev.break_even.text()}"]
    if ev.modelled_break_even is not None and ev.modelled_break_even is not ev.break_even:
        parts.append(f"modelled break-even beside it {ev.modelled_break_even.text()}")
    if ev.speedups:
        slow = {c: s for c, s in sorted(ev.speedups.items()) if s < 1}
        parts.append("measured speedup " + ", ".join(f"{s:.2f}x at {c}" for c, s in sorted(ev.speedups.items()))
                     + (f" ({ev.speedup_where})" if ev.speedup_where else "")
                     + ("; slower than plain decoding" if slow else ""))
    return _f(cause, YES if mean < ev.break_even.value else NO, "; ".join(parts), fix, ev.break_even.provenance)


def rule_drafter_target_mismatch(ev: Evidence) -> Finding:
    cause = "drafter_target_mismatch"
    fix = "serve the drafter trained for this exact target (same hidden size and vocabulary)"
    if not ev.drafter_config or not ev.target_config:
        return _f(cause, UNKNOWN, "needs both the drafter's and the target's config.json", fix)
    draft, target = _text_config(ev.drafter_config), _text_config(ev.target_config)
    checks = []
    for key, draft_key in (("hidden_size", "target_hidden_size"), ("hidden_size", "hidden_size"),
                           ("vocab_size", "vocab_size")):
        if draft_key in draft and key in target:
            checks.append((f"drafter {draft_key}={draft[draft_key]} vs target {key}={target[key]}",
                           draft[draft_key] == target[key]))
            if draft_key == "target_hidden_size":
                break
    checks = [c for i, c in enumerate(checks) if c[0] not in [x[0] for x in checks[:i]]]
    if not checks:
        return _f(cause, UNKNOWN, "the configs hold no hidden_size / vocab_size to compare", fix)
    bad = [text for text, ok in checks if not ok]
    return _f(cause, YES if bad else NO, "; ".join(bad or [text for text, _ in checks]), fix, "config")


def _drafter_kind(ev: Evidence) -> tuple[Optional[str], str]:
    archs = (ev.drafter_config or {}).get("architectures") or []
    for arch in archs:
        if "eagle3" in str(arch).lower():
            return "EAGLE3", f"drafter config architectures {archs}"
    if isinstance((ev.drafter_config or {}).get("eagle_config"), Mapping):
        return "EAGLE3", "drafter config has an eagle_config (aux hidden-state layers)"
    for arch in archs:
        if "eagle" in str(arch).lower():
            return "EAGLE", f"drafter config architectures {archs}"
    path, _ = ev.arg("speculative_draft_model_path")
    if isinstance(path, str):
        name = path.rstrip("/").split("/")[-1].lower()
        if "eagle3" in name or "eagle-3" in name or "eagle_3" in name:
            return "EAGLE3", f"drafter path '{path}' names EAGLE-3"
    return None, ""


def rule_spec_algorithm(ev: Evidence) -> Finding:
    cause = "spec_algorithm_flag_mismatch"
    fix = "--speculative-algorithm EAGLE3 for an EAGLE-3 drafter (EAGLE for EAGLE-1/2 drafters)"
    algorithm, where = ev.arg("speculative_algorithm")
    if not algorithm:
        return _f(cause, UNKNOWN, "no --speculative-algorithm in the evidence", fix)
    kind, kind_where = _drafter_kind(ev)
    ones = [a for a in log_accept_lengths(ev.spec_log) if a is not None]
    tail = f"; the log's acceptance stays at {max(ones):.2f}" if ones and max(ones) <= 1.0 else ""
    if kind is None:
        return _f(cause, UNKNOWN, f"--speculative-algorithm {algorithm} ({where}); the drafter's kind is unknown "
                                  f"(give --drafter-config){tail}", fix)
    applies = YES if str(algorithm).upper() != kind else NO
    return _f(cause, applies, f"--speculative-algorithm {algorithm} ({where}) with an {kind} drafter ({kind_where})"
                              f"{tail}", fix, "config" if "config" in kind_where else "launch flag")


def _captured(result: Mapping[str, Any]) -> Optional[tuple[int, ...]]:
    for key, value in result.items():
        if "layers_to_capture" in key and isinstance(value, (list, tuple)):
            return tuple(int(v) for v in value)
    return None


def _table_verdict(table: Mapping[str, Any]) -> Optional[tuple[bool, str]]:
    """(inconsistent?, evidence) for one profile's table; None if no call ran in that profile."""
    rows = [r for r in table["rows"] if r.get("startup_rank") is not None and _captured(r.get("result") or {})]
    if not rows:
        return None
    rows.sort(key=lambda r: r["startup_rank"])
    graph_rows = [r for r in rows
                  if r.get("uses") == CaptureMode.CUDA_GRAPH or RunCondition.CUDA_GRAPHS_ON in r.get("runs_when", ())]
    eager = rows[-1]  # forwards after start-up see whatever the last call wrote
    parts = [f"profile {table.get('profile', '?')} (depth {table.get('depth', '?')})"]
    if graph_rows:
        graph = graph_rows[-1]  # a captured graph keeps the ids in effect when it was recorded
        parts.append(f"CUDA-graph replays use layers_to_capture={list(_captured(graph['result']) or ())} "
                     f"(set at {graph.get('where', '?')})")
        inconsistent = _captured(graph["result"]) != _captured(eager["result"])
    else:
        inconsistent = len({_captured(r["result"]) for r in rows}) > 1
    parts.append(f"eager forwards use layers_to_capture={list(_captured(eager['result']) or ())} "
                 f"(set last at {eager.get('where', '?')})")
    aux = list(table.get("aux_layer_ids") or ())
    if aux:
        parts.append(f"drafter aux ids {aux} -> layers_to_capture={[i + 1 for i in aux]} "
                     "(sglang captures id i at the input of layer i + 1)")
    return inconsistent, ", ".join(parts)


def layer_table_verdict(layer_table: Any) -> Optional[tuple[bool, str]]:
    """Notebook 02's layer-id table(s): every ``set_eagle3_layers_to_capture`` call in start-up order; True when
    graphs were recorded with other ids than eager forwards use. None when no call ran."""
    if layer_table is None:
        return None
    tables = layer_table if isinstance(layer_table, list) else [layer_table]
    if not all(isinstance(t, Mapping) and isinstance(t.get("rows"), list) for t in tables):
        raise DiagnosticsError("layer table: expected notebook 02's mapping with a 'rows' list (or a list of them)",
                               what="layer table", problem="no_rows")
    verdicts = [v for v in (_table_verdict(t) for t in tables) if v is not None]
    if not verdicts:
        return None
    return any(v[0] for v in verdicts), " | ".join(v[1] for v in verdicts)


def rule_aux_layers(ev: Evidence) -> Finding:
    cause = "aux_layer_ids_mismatch"
    fix = ("a release whose capture order is fixed (or the project's patch); drafter aux ids within the target's "
           "depth, as the drafter was trained")
    parts, applies = [], None
    verdict = layer_table_verdict(ev.layer_table)
    if verdict is not None:
        applies = verdict[0]
        parts.append(verdict[1])
    eagle = (ev.drafter_config or {}).get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    depth = _text_config(ev.target_config).get("num_hidden_layers") if ev.target_config else None
    if ids is not None and depth is not None:
        out = [i for i in ids if not 0 <= int(i) < int(depth) - 1]
        parts.append(f"drafter eagle_aux_hidden_state_layer_ids {list(ids)} on a {depth}-layer target"
                     + (f": {out} outside the layers sglang can capture" if out else ""))
        applies = bool(out) or bool(applies)
    elif ids is None and ev.drafter_config is not None and depth is not None:
        parts.append(f"the drafter names no aux layer ids: sglang uses its default (2, n/2, n-3) for the "
                     f"{depth}-layer target")
        applies = bool(applies)
    if applies is None:
        return _f(cause, UNKNOWN, "needs the drafter's and target's configs, or the start-up trace's layer table", fix)
    return _f(cause, YES if applies else NO, "; ".join(parts), fix,
              "traced" if verdict is not None else "config")


def rule_context_window(ev: Evidence) -> Finding:
    cause = "draft_context_window_exceeded"
    fix = "a drafter trained on contexts as long as the requests (SpecForge --max-length), or shorter requests"
    window = _text_config(ev.drafter_config).get("max_position_embeddings") if ev.drafter_config else None
    lengths = [x for x in (ev.input_len, ev.output_len) if x is not None]
    if not lengths:
        lengths = [x for b in ev.bench for x in (b.mean_input_len, b.mean_output_len) if x is not None][:2]
    if window is None:
        return _f(cause, UNKNOWN, "the drafter's max_position_embeddings is unknown (give --drafter-config)", fix)
    if not lengths:
        return _f(cause, UNKNOWN, f"drafter window {window} tokens; request lengths unknown", fix)
    total = sum(lengths)
    return _f(cause, YES if total >= int(window) else NO,
              f"requests reach {total:g} tokens (prompt + output) vs the drafter's max_position_embeddings {window}",
              fix, "config")


def rule_temperature(ev: Evidence) -> Finding:
    cause = "temperature_sampling"
    fix = "compare at temperature 0, or expect lower acceptance when sampling (the drafter proposes greedy drafts)"
    temp, where = ev.temperature, ev.temperature_where
    if temp is None:
        temps = [(b.temperature, b.source) for b in ev.bench if b.temperature is not None]
        if temps:
            temp, where = temps[0]
    if temp is None:
        return _f(cause, UNKNOWN, "the benchmark's temperature is unknown", fix)
    return _f(cause, YES if float(temp) > 0 else NO, f"temperature {temp:g} ({where})", fix, "benchmark")


_FEATURES = (
    ("disable_overlap_schedule", True, "overlap scheduler (CPU scheduling hidden behind GPU work)", OVERLAP_OFF),
    ("enable_mixed_chunk", False, "mixed chunked prefill", MIXED_OFF),
    ("disable_radix_cache", True, "radix (prefix) cache", RADIX_OFF),
)


def rule_overlap(ev: Evidence) -> Finding:
    """sglang 0.5.x turns the overlap scheduler off for EAGLE unless SGLANG_ENABLE_SPEC_V2 (and mixed chunk,
    and for some architectures the radix cache)."""
    cause = "overlap_scheduler_off"
    fix = "SGLANG_ENABLE_SPEC_V2=1 (sglang >= 0.5.x, topk 1) keeps the overlap scheduler on with EAGLE"
    spec = _check_info(ev.server_args, "speculative run")
    base = _check_info(ev.baseline_server_args, "baseline run")
    v2 = _first_line(SPEC_V2_ON, ev.spec_log)
    key = "disable_overlap_schedule"
    line = _first_line(OVERLAP_OFF, ev.spec_log)
    if spec is None and not line and not v2:
        if ev.launch and ev.launch.get(key):
            return _f(cause, YES, "the launch passes --disable-overlap-schedule", fix, "launch flag")
        return _f(cause, UNKNOWN, "needs the server log (server_args or sglang's 'Overlap scheduler is disabled' "
                                  "line)", fix)
    spec_off = bool(spec.get(key)) if spec and key in spec else line is not None
    base_on = None if not base or key not in base else not base[key]
    others = []
    for other, off_value, what, pattern in _FEATURES[1:]:
        other_line = _first_line(pattern, ev.spec_log)
        if other_line:
            others.append(f"{what} off too (log: {other_line})")
    if v2:
        return _f(cause, NO, f"log: {v2}", fix, "server log")
    if spec_off and base_on is not False:
        why = f"log: {line}" if line else f"server_args {key}=True"
        base_text = f"; baseline {key}=False" if base_on else ""
        return _f(cause, YES, "; ".join([f"overlap scheduler off under speculation ({why}{base_text})"] + others),
                  fix, "server log")
    if spec_off:
        return _f(cause, NO, "overlap scheduler off in both arms", fix, "server log")
    return _f(cause, NO, f"server_args {key}=False", fix, "server log")


def rule_no_cuda_graph(ev: Evidence) -> Finding:
    cause = "no_cuda_graph"
    fix = "drop --disable-cuda-graph (or fix what forced it); speculation launches far more kernels per token"
    disabled, where = ev.arg("disable_cuda_graph")
    base_disabled = (ev.baseline_server_args or ev.baseline_launch or {}).get("disable_cuda_graph")
    spec_lines = [d for d in decode_lines(ev.spec_log) if d.graph is not None]
    base_lines = [d for d in decode_lines(ev.baseline_log) if d.graph is not None]
    if ev.device == "cpu" or (ev.server_args or {}).get("device") == "cpu":
        return _f(cause, NO, "CPU run: neither arm replays graphs (no CUDA graphs on CPU)", fix, "server log")
    if disabled is True:
        if base_disabled is True:
            return _f(cause, NO, f"--disable-cuda-graph in both arms ({where})", fix, _prov(where))
        return _f(cause, YES, f"--disable-cuda-graph on the speculative server ({where})", fix, _prov(where))
    if spec_lines:
        eager = [d for d in spec_lines if not d.graph]
        base_eager = [d for d in base_lines if not d.graph]
        text = f"{len(eager)} of {len(spec_lines)} speculative decode lines without graphs"
        if eager:
            text += f" (e.g. {eager[0].text})"
        if base_lines:
            text += f"; baseline {len(base_eager)} of {len(base_lines)}"
        share = len(eager) / len(spec_lines)
        applies = share > 0.5 and (not base_lines or len(base_eager) / len(base_lines) < share)
        return _f(cause, YES if applies else NO, text, fix, "server log")
    if disabled is False:
        return _f(cause, NO, f"CUDA graphs on ({where})", fix, _prov(where))
    if ev.launch is not None:
        return _f(cause, NO, "the launch does not pass --disable-cuda-graph (sglang captures graphs by default)", fix,
                  "launch flag")
    return _f(cause, UNKNOWN, "no launch flags or decode lines", fix)


def _largest(parts: Mapping[str, float]) -> tuple[str, float]:
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name]


def rule_tp_comm(ev: Evidence) -> Finding:
    cause = "tp_communication_bound"
    fix = "fewer GPUs per replica (data parallel), NVLink-class links, or a drafter run at tp 1"
    tp, where = ev.arg("tp_size")
    if tp is not None and int(tp) <= 1:
        return _f(cause, NO, f"tp {tp} ({where}): no tensor-parallel all-reduce", fix, _prov(where))
    if ev.model is None:
        return _f(cause, UNKNOWN, f"tp {tp if tp is not None else 'unknown'}; no cost model (give --hardware, --gpus "
                                  "and --target-config)", fix)
    parts = ev.model.cycle_parts
    total = sum(parts.values())
    share = parts.get("all_reduce", 0.0) / total if total else 0.0
    name, _ = _largest(parts)
    return _f(cause, YES if name == "all_reduce" else NO,
              f"modelled cycle at batch {ev.model.batch} on {ev.model.hardware}: all-reduce {share:.0%} of it; "
              f"largest part {name}", fix, "modelled")


def rule_compute_bound(ev: Evidence) -> Finding:
    cause = "compute_bound_large_batch"
    fix = "fewer draft tokens at this batch, or no speculation above the batch where verify turns compute-bound"
    if ev.model is None:
        return _f(cause, UNKNOWN, "no cost model (give --hardware and --target-config)", fix)
    verify = ev.model.verify_parts
    name, _ = _largest(verify)
    compute = verify.get("gemm_compute", 0.0) + verify.get("attention_compute", 0.0)
    applies = YES if name in ("gemm_compute", "attention_compute") else NO
    return _f(cause, applies, f"modelled verify pass at batch {ev.model.batch} on {ev.model.hardware}: compute "
                              f"beyond the memory reads {compute * 1e3:.2f} ms; largest part {name}", fix, "modelled")


def rule_moe(ev: Evidence) -> Finding:
    cause = "moe_sparsity_verify_cost"
    fix = "fewer draft tokens on MoE targets: each extra verified token wakes more experts"
    target = _text_config(ev.target_config) if ev.target_config else None
    experts = None
    if target is not None:
        experts = target.get("n_routed_experts") or target.get("num_experts") or target.get("num_local_experts")
        if not experts:
            return _f(cause, NO, "dense target (no routed experts in its config)", fix, "config")
    if ev.model is None or ev.model.verify_distinct_experts is None or not ev.model.plain_distinct_experts:
        return _f(cause, UNKNOWN, (f"MoE target ({experts} experts); " if experts else "") +
                  "no cost model (give --hardware and --target-config)", fix)
    ratio = ev.model.verify_distinct_experts / ev.model.plain_distinct_experts
    return _f(cause, YES if ratio > 1.0 else NO,
              f"modelled experts read per layer: verify {ev.model.verify_distinct_experts:.1f} vs plain step "
              f"{ev.model.plain_distinct_experts:.1f} at batch {ev.model.batch} (uniform routing: an upper bound)",
              fix, "modelled")


def rule_prompts(ev: Evidence) -> Finding:
    """Served acceptance against the drafter's offline acceptance on its own training distribution; and the
    benchmark sending raw prompts to a drafter trained on chat-formatted ones."""
    cause = "chat_template_mismatch"
    fix = "benchmark with the chat template (bench_serving --apply-chat-template) on prompts like the drafter's data"
    served, where = _served_acceptance(ev)
    if ev.offline_acceptance is not None and served:
        mean = statistics.fmean(served)
        se = statistics.stdev(served) / math.sqrt(len(served)) if len(served) > 1 else 0.0
        below = mean + STANDARD_ERRORS * se < ev.offline_acceptance.value
        return _f(cause, YES if below else NO,
                  f"served acceptance {mean:.2f} (standard error {se:.2f}, {where}) vs the drafter's offline "
                  f"acceptance on its training distribution {ev.offline_acceptance.text()}", fix,
                  ev.offline_acceptance.provenance)
    raw = [b for b in ev.bench if b.chat_template is False]
    templated = [b for b in ev.bench if b.chat_template is True]
    if raw:
        b = raw[0]
        return _f(cause, YES, f"the benchmark sends prompts without the chat template ({b.source}"
                              f"{', dataset ' + b.dataset if b.dataset else ''})", fix, "benchmark")
    if templated:
        return _f(cause, NO, f"the benchmark applies the chat template ({templated[0].source})", fix, "benchmark")
    return _f(cause, UNKNOWN, "neither the drafter's offline acceptance nor the benchmark's chat-template setting "
                              "is known", fix)


def rule_bench_method(ev: Evidence) -> Finding:
    cause = "benchmark_method_error"
    fix = "same prompts, lengths and concurrency for both arms; enough prompts to reach the concurrency; no failures"
    spread = ev.launch_spread
    if spread and not spread.get("agrees", True):
        return _f(cause, YES, f"the speedup at concurrency {spread['concurrency']} spread "
                              f"{spread['speedup_spread_pct']:.1f}% over {len(spread['launches'])} measured pairs "
                              f"({spread['speedup_min']:.2f}x to {spread['speedup_max']:.2f}x; the rule is "
                              f"{spread['tolerance_pct']:.0f}%): one measurement of each arm is one draw on "
                              "this machine",
                  "measure each arm more than once: where memory holds both servers, both up at once with the "
                  "requests in blocks alternating between them (notebook 03: bench_interleave_rounds), else on fresh "
                  "launches in mirrored order (baseline, speculative, speculative, baseline; notebook 03: "
                  "bench_launch_repeats); compare the median speedup with its range", "measured")
    agree = (f"; {len(spread['launches'])} measured pairs agree within {spread['tolerance_pct']:.0f}% "
             f"({spread['speedup_min']:.2f}x to {spread['speedup_max']:.2f}x)") if spread else ""
    if ev.same_sweep:
        return _f(cause, NO, "both arms measured by one sweep configuration (same prompts, lengths, concurrency)"
                  + agree, fix, "benchmark")
    if not ev.bench:
        return _f(cause, UNKNOWN, "no benchmark output", fix)
    problems = []
    for b in ev.bench:
        if b.failed:
            problems.append(f"{b.arm}: {b.failed} failed request(s) ({b.source})")
        if b.num_prompts is not None and b.concurrency is not None and b.num_prompts < b.concurrency:
            problems.append(f"{b.arm}: {b.num_prompts} prompts never reach concurrency {b.concurrency}")
    arms = {b.arm: b for b in ev.bench}
    if "speculative" in arms and "baseline" in arms:
        s, p = arms["speculative"], arms["baseline"]
        for name in ("concurrency", "num_prompts", "dataset", "chat_template", "temperature"):
            a, c = getattr(s, name), getattr(p, name)
            if a is not None and c is not None and a != c:
                problems.append(f"arms differ in {name}: speculative {a} vs baseline {c}")
    if problems:
        return _f(cause, YES, "; ".join(problems), fix, "benchmark")
    return _f(cause, NO, f"{len(ev.bench)} benchmark arm(s) checked: no failures, prompts reach the concurrency, "
                         "arms alike where both are known" + agree, fix, "benchmark")


RULES: tuple[Callable[[Evidence], Finding], ...] = (
    rule_cuda_graph_bs, rule_spec_request_cap, rule_draft_tokens, rule_low_acceptance, rule_drafter_target_mismatch,
    rule_spec_algorithm, rule_aux_layers, rule_context_window, rule_temperature, rule_overlap, rule_no_cuda_graph,
    rule_tp_comm, rule_compute_bound, rule_moe, rule_prompts, rule_bench_method)


def diagnose(ev: Evidence) -> list[Finding]:
    """Every rule on the evidence: one finding per cause tag, in ``CAUSES`` order."""
    return [rule(ev) for rule in RULES]


def findings_table(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Rows for a notebook table, a JSON sidecar or ``doctor --json``."""
    return [f.to_dict() for f in findings]


# ------------------------------------------------------------------------------------------- measured cycle
def control_cycles(report) -> list[dict[str, Any]]:
    """The untrained-drafter control arm's cycle, measured: with nearly every draft rejected, each cycle emits
    about one token, so its time is what one speculative cycle costs on this machine whatever the acceptance.
    Its ratio to the plain step at the same concurrency is the measured break-even acceptance.

    ``report`` is a ``bench.sweep.BenchReport``; rates are the bench's decode-only ``decode_tok_per_s``."""
    base = {p.concurrency: p.metrics.decode_tok_per_s for arm in report.arms if arm.kind == ARM_KIND_BASELINE
            for p in arm.measured_points() if p.metrics and p.metrics.decode_tok_per_s}
    rows = []
    for arm in report.arms:
        if arm.kind != ARM_KIND_EAGLE3_CONTROL:
            continue
        for point in arm.measured_points():
            metrics, plain = point.metrics, base.get(point.concurrency)
            if metrics is None or metrics.decode_tok_per_s is None or metrics.accept_length is None or not plain:
                continue
            cycle_ms = point.concurrency * metrics.accept_length / metrics.decode_tok_per_s * 1e3
            step_ms = point.concurrency / plain * 1e3
            rows.append({"arm": arm.name, "concurrency": point.concurrency, "accept_length": metrics.accept_length,
                         "cycle_ms": cycle_ms, "plain_step_ms": step_ms, "plain_steps_per_cycle": cycle_ms / step_ms})
    return rows


def cycle_break_even(table: Optional[Mapping[str, Any]]) -> Optional[tuple[Threshold, int]]:
    """(break-even acceptance measured on the EAGLE-3 arm's own cycles, their batch size) from the cycle component
    table (``bench.cycle``): one cycle in plain steps is the tokens per request a cycle must emit to pay."""
    if not table or not table.get("cycle_in_plain_steps"):
        return None
    size = int(table.get("batch_size") or 1)
    return Threshold(float(table["cycle_in_plain_steps"]), "measured",
                     f"cycle table: arm '{table.get('eagle_arm')}' one cycle {float(table['cycle_ms']):.1f} ms / "
                     f"plain step {float(table['plain_step_ms']):.1f} ms at batch size {size} "
                     f"({table.get('profile')}, {str(table.get('measured_on', ''))[:10]})"), size


def measured_break_even(report) -> Optional[tuple[Threshold, int]]:
    """(break-even acceptance measured by the control arm, its concurrency): one cycle in plain steps."""
    rows = control_cycles(report)
    if not rows:
        return None
    row = min(rows, key=lambda r: r["concurrency"])
    return Threshold(row["plain_steps_per_cycle"], "measured",
                     f"control arm '{row['arm']}' at concurrency {row['concurrency']}: one cycle "
                     f"{row['cycle_ms']:.1f} ms / plain step {row['plain_step_ms']:.1f} ms "
                     f"({report.profile}, {report.date})"), row["concurrency"]


# ------------------------------------------------------------------------------- real server args, in-process
def resolve_server_args(argv: Sequence[str]) -> tuple[dict[str, Any], str]:
    """sglang's own argument resolution for a ``launch_server`` command line, without starting a server.

    Returns the resolved arguments (what ``/get_server_info`` reports at top level) and the log text sglang wrote
    while resolving them. The model path must be a local directory with a config (sglang reads the architecture).
    """
    from sglang.srt.server_args import prepare_server_args  # heavy: imports torch

    args = list(argv)
    if "sglang.launch_server" in args:
        args = args[args.index("sglang.launch_server") + 1:]
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            resolved = prepare_server_args(args)
    except (SystemExit, ValueError, AssertionError, OSError) as exc:
        raise DiagnosticsError(f"sglang rejected the server arguments: {type(exc).__name__}: {exc}; check the "
                               "command line and model path", what="server args", problem="rejected") from None
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    info = dataclasses.asdict(resolved)
    info.pop("model_config", None)
    return info, buffer.getvalue()


# ------------------------------------------------------------------------------------------ from artifacts
def accept_lengths_from_records(records: Iterable[Any]) -> list[float]:
    """Per-request acceptance: completion_tokens / spec_verify_ct (sglang's own definition), measured phase only."""
    out = []
    for rec in records:
        get = rec.get if isinstance(rec, Mapping) else (lambda k, r=rec: getattr(r, k, None))
        if get("phase") not in (None, "measure") or get("ok") is False:
            continue
        tokens, verifies = get("completion_tokens"), get("spec_verify_ct")
        if isinstance(tokens, int) and isinstance(verifies, int) and verifies > 0:
            out.append(tokens / verifies)
        elif isinstance(get("spec_accept_length"), (int, float)):
            out.append(float(get("spec_accept_length")))
    return out


def _read_text(path: Optional[Path], what: str) -> Optional[str]:
    if path is None:
        return None
    if not Path(path).is_file():
        raise DiagnosticsError(f"{what} {path} does not exist; run the notebook that writes it or leave it out",
                               what=what, path=Path(path), problem="missing")
    return Path(path).read_text(encoding="utf-8", errors="replace")


def offline_threshold(offline: Optional[Mapping[str, Any]], variant: str = "aligned") -> Optional[Threshold]:
    """The drafter's offline acceptance (``Drafters.offline_acceptance``) for the served variant, as a threshold."""
    scores = (offline or {}).get(variant)
    value = (scores or {}).get("mean_accept_length") if isinstance(scores, Mapping) else None
    if not isinstance(value, (int, float)):
        return None
    return Threshold(float(value), "measured", f"offline simulation of sglang's verify on the benchmark's prompt "
                                               f"distribution, {scores.get('requests', '?')} requests")


def evidence_from_artifacts(bench_report: Any = None, requests_dir: Optional[Path] = None,
                            spec_log: Optional[Path] = None, baseline_log: Optional[Path] = None,
                            layer_tables: Optional[Sequence[Mapping[str, Any]]] = None,
                            layer_profile: Optional[str] = None,
                            break_even: Optional[Threshold] = None, modelled_break_even: Optional[Threshold] = None,
                            offline_acceptance: Optional[Mapping[str, Any]] = None,
                            device: Optional[str] = None,
                            cycle_components: Optional[Mapping[str, Any]] = None,
                            launch_spread: Optional[Mapping[str, Any]] = None) -> Evidence:
    """A run's evidence from what the notebooks wrote: the bench report (``bench.BenchReport``), the per-request
    JSONL files in ``requests_dir``, server logs, notebook 02's layer-id tables (restricted to ``layer_profile``),
    the drafter's offline acceptance, and the break-even: measured on the headline arm's own cycle where the cycle
    table (``bench.cycle``) has one, else by the control arm where the report has one (either way ``break_even``
    passed in is shown beside it as the modelled one), else the one passed in. The cycle table comes first: it
    times the served drafter's own cycles, while the control arm serves another drafter on another server.

    The served acceptance is the headline EAGLE-3 arm's at the control arm's concurrency where the break-even is
    measured (the two are compared at the same load), else at its highest concurrency."""
    ev = Evidence(spec_log=_read_text(spec_log, "speculative server log"),
                  baseline_log=_read_text(baseline_log, "baseline server log"),
                  break_even=break_even, modelled_break_even=modelled_break_even or break_even,
                  offline_acceptance=offline_threshold(offline_acceptance), device=device,
                  launch_spread=launch_spread)
    ev.server_args = server_args_from_log(ev.spec_log)
    ev.baseline_server_args = server_args_from_log(ev.baseline_log)
    if layer_tables is not None:
        tables = [dict(t) for t in layer_tables]
        if layer_profile is not None:
            tables = [t for t in tables if t.get("profile") == layer_profile]
        ev.layer_table = tables or None
    if bench_report is None:
        return ev
    measured = cycle_break_even(cycle_components) or measured_break_even(bench_report)
    at = None
    if measured is not None:
        ev.break_even, at = measured
    ev.same_sweep = True
    base_rates: dict[int, float] = {}
    for arm in bench_report.arms:
        if arm.kind == ARM_KIND_BASELINE:
            points = arm.measured_points()
            info = next((p.server_info for p in reversed(points) if p.server_info), None)
            ev.baseline_server_args = info or ev.baseline_server_args
            base_rates = {p.concurrency: p.metrics.decode_tok_per_s for p in points
                          if p.metrics and p.metrics.decode_tok_per_s}
    for arm in bench_report.arms:
        if arm.kind != ARM_KIND_EAGLE3:
            continue
        points = arm.measured_points()
        info = next((p.server_info for p in reversed(points) if p.server_info), None)
        ev.server_args = info or ev.server_args
        ev.concurrency = [p.concurrency for p in points] or None
        sweep = arm.sweep or {}
        sampling = sweep.get("extra_sampling_params") or {}
        ev.temperature = float(sampling.get("temperature", 0.0) or 0.0) if isinstance(sampling, Mapping) else None
        ev.temperature_where = "the sweep's sampling parameters"
        ev.speedups = {p.concurrency: p.metrics.decode_tok_per_s / base_rates[p.concurrency] for p in points
                       if p.metrics and p.metrics.decode_tok_per_s and base_rates.get(p.concurrency)} or None
        ev.speedup_where = f"decode rates, {bench_report.profile}, {bench_report.date}"
        chosen = next((p for p in points if p.concurrency == at), None) if at is not None else None
        if chosen is None and points:
            chosen = max(points, key=lambda p: p.concurrency)
        if chosen is None:
            continue
        if requests_dir is not None and arm.requests_file:
            path = Path(requests_dir) / arm.requests_file
            if not path.is_file():
                raise DiagnosticsError(f"requests file {path} of arm '{arm.name}' does not exist; pass the arm's "
                                       "output folder")
            records = [r for r in load_requests(path) if getattr(r, "concurrency", chosen.concurrency) ==
                       chosen.concurrency]
            ev.accept_lengths = accept_lengths_from_records(records) or None
        if not ev.accept_lengths and chosen.metrics and chosen.metrics.accept_length_mean is not None:
            ev.accept_lengths = [chosen.metrics.accept_length_mean]
        ev.accept_where = f"arm '{arm.name}' per request at concurrency {chosen.concurrency}"
    return ev
