"""Why did EAGLE-3 not speed things up? Rules that read a run's evidence and name each known cause that applies.

Each rule looks at one kind of evidence (server log text, ``/get_server_info`` JSON or resolved server args,
notebook 02's layer-id table, notebook 03's per-request acceptance, the benchmark's prompts) and returns a
``Finding`` with the line that proves it, or ``None`` when the evidence it needs is absent: a rule never
guesses from missing data. The log patterns and field names are sglang 0.5.9's own (``srt/server_args.py``
``_handle_speculative_decoding``, ``srt/managers/scheduler.py``, ``scheduler_metrics_mixin.py``,
``bench_serving.py``); each pattern below names where its line is written.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import logging
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from eagle3lab.errors import DiagnosticsError
from eagle3lab.trace.contract import CaptureMode, RunCondition
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, load_requests


@dataclass(frozen=True)
class Finding:
    """One cause checked: does it apply, and the evidence line either way."""

    rule: str
    applies: bool
    evidence: str

    def line(self) -> str:
        return f"[{'APPLIES' if self.applies else 'clear'}] {self.rule}: {self.evidence}"


# ------------------------------------------------------------------------------------------- log patterns
# srt/server_args.py _handle_speculative_decoding (logged while the server arguments are resolved)
RESET_48 = re.compile(r"Max running requests is reset to (\d+) for speculative decoding[^\n]*")
OVERLAP_OFF = re.compile(r"Overlap scheduler is disabled when spec v2 is off[^\n]*")
SPEC_V2_ON = re.compile(r"Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is "
                        r"turned on[^\n]*")
MIXED_OFF = re.compile(r"Mixed chunked prefill is disabled because of using eagle speculative decoding[^\n]*")
RADIX_OFF = re.compile(r"Disabling radix cache since speculative decoding for \S+ is not supported[^\n]*")
# srt/managers/scheduler.py, rank 0 after the memory pool is sized
SCHEDULER_LIMITS = re.compile(r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
                              r"max_running_requests=(\d+)[^\n]*")
# srt/managers/scheduler_metrics_mixin.py log_decode_stats
DECODE_LINE = re.compile(r"Decode batch[^\n]*?#running-req: (?P<running>\d+)[^\n]*")
_ACCEPT = re.compile(r"accept len: (?P<v>[\d.]+)")
_GRAPH = re.compile(r"(?:cuda|cpu|npu) graph: (?P<v>True|False)")
_QUEUE = re.compile(r"#queue-req: (?P<v>\d+)")
_GEN = re.compile(r"gen throughput \(token/s\): (?P<v>[\d.]+)")


@dataclass(frozen=True)
class DecodeLine:
    """One 'Decode batch' log line, the fields the rules use."""

    running: int
    queued: Optional[int]
    accept_len: Optional[float]
    graph: Optional[bool]
    gen_tok_s: Optional[float]
    text: str


def decode_lines(log_text: str) -> list[DecodeLine]:
    """Every 'Decode batch' line of a server log, parsed."""
    out = []
    for match in DECODE_LINE.finditer(log_text):
        text = match.group(0)

        def grab(pattern: re.Pattern[str], cast: Callable[[str], Any]) -> Any:
            found = pattern.search(text)
            return cast(found.group("v")) if found else None

        out.append(DecodeLine(running=int(match.group("running")), queued=grab(_QUEUE, int),
                              accept_len=grab(_ACCEPT, float), graph=grab(_GRAPH, lambda v: v == "True"),
                              gen_tok_s=grab(_GEN, float), text=text.strip()))
    return out


def _first_line(pattern: re.Pattern[str], text: Optional[str]) -> Optional[str]:
    found = pattern.search(text or "")
    return found.group(0).strip() if found else None


# ------------------------------------------------------------------------------------------- server info
SERVER_ARGS_LINE = re.compile(r"server_args=ServerArgs\((?P<body>.*)\)\s*$", re.MULTILINE)


def server_args_from_log(log_text: Optional[str]) -> Optional[dict[str, Any]]:
    """The resolved ``ServerArgs`` sglang logs at start-up (``server_args=ServerArgs(...)``), as a dict.

    The repr is a Python call expression, so ``ast`` reads it; fields whose repr is not a literal are skipped.
    This is the only record of the resolved arguments when the server died before /get_server_info answered.
    """
    found = SERVER_ARGS_LINE.search(log_text or "")
    if not found:
        return None
    try:
        call = ast.parse(f"f({found.group('body')})", mode="eval").body
    except SyntaxError:
        return None
    out: dict[str, Any] = {}
    for kw in getattr(call, "keywords", []):
        with contextlib.suppress(ValueError, SyntaxError, TypeError):
            out[kw.arg] = ast.literal_eval(kw.value)
    return out


def _info_or_log(info: Any, log_text: Optional[str], what: str) -> Optional[Mapping[str, Any]]:
    return _check_info(info, what) or server_args_from_log(log_text)


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


# ----------------------------------------------------------------------------------------------- the rules
def rule_running_request_limit(spec_info: Any = None, spec_log: Optional[str] = None, baseline_info: Any = None,
                               baseline_log: Optional[str] = None,
                               concurrency: Optional[int] = None) -> Optional[Finding]:
    """sglang caps running requests at 48 under EAGLE unless --max-running-requests is given; the baseline's
    limit is sized by KV memory (thousands). At high concurrency speculation then runs fewer requests per step."""
    name = "running-request limit under speculative decoding"
    spec_info = _info_or_log(spec_info, spec_log, "speculative run")
    baseline_info = _info_or_log(baseline_info, baseline_log, "baseline run")
    spec = running_limit(spec_info, spec_log)
    reset = RESET_48.search(spec_log or "")
    if spec is None and reset is None:
        return None
    limit = spec[0] if spec else int(reset.group(1))  # type: ignore[union-attr]
    parts = [f"speculative limit {spec[0]} ({spec[1]})"] if spec else []
    if reset:
        parts.append(f"log: {reset.group(0).strip()}")
    base = running_limit(baseline_info, baseline_log)
    queued = [line for line in decode_lines(spec_log or "") if (line.queued or 0) > 0]
    if queued:
        worst = max(queued, key=lambda line: (line.queued or 0, line.running))
        parts.append(f"requests waited while the limit was full: {worst.text}")
    if base is not None:
        parts.append(f"baseline limit {base[0]} ({base[1]})")
        applies = limit < base[0] and (concurrency is None or concurrency > limit)
    elif concurrency is not None:
        parts.append(f"benchmark concurrency {concurrency}")
        applies = concurrency > limit
    else:
        applies = reset is not None or bool(queued)
    return Finding(name, applies, "; ".join(parts))


_FEATURES = (
    # (server-args field, value meaning "off", what it is, log line that says sglang turned it off)
    ("disable_overlap_schedule", True, "overlap scheduler (CPU scheduling hidden behind GPU work)", OVERLAP_OFF),
    ("enable_mixed_chunk", False, "mixed chunked prefill (prefill chunks ride along decode batches)", MIXED_OFF),
    ("disable_radix_cache", True, "radix (prefix) cache", RADIX_OFF),
)


def rule_scheduler_features_off(spec_info: Any = None, spec_log: Optional[str] = None,
                                baseline_info: Any = None, baseline_log: Optional[str] = None) -> Optional[Finding]:
    """Scheduler features the baseline had that sglang 0.5.9 turns off for EAGLE: the overlap scheduler (unless
    SGLANG_ENABLE_SPEC_V2), mixed chunked prefill, and for some architectures the radix cache."""
    name = "scheduler features turned off by speculative decoding"
    spec_info = _info_or_log(spec_info, spec_log, "speculative run")
    baseline_info = _info_or_log(baseline_info, baseline_log, "baseline run")
    if spec_info is None and not spec_log:
        return None
    off, kept = [], []
    for key, off_value, what, pattern in _FEATURES:
        line = _first_line(pattern, spec_log)
        spec_off = spec_info.get(key) == off_value if spec_info and key in spec_info else line is not None
        base_on = None if not baseline_info or key not in baseline_info else baseline_info[key] != off_value
        if spec_off and base_on is not False:
            why = f"log: {line}" if line else f"server args {key}={spec_info.get(key) if spec_info else off_value}"
            base = f", baseline {key}={baseline_info[key]}" if base_on else ""
            off.append(f"{what} off ({why}{base})")
        elif spec_off:
            kept.append(f"{what} off in both runs")
    v2 = _first_line(SPEC_V2_ON, spec_log)
    if v2:
        kept.append(f"log: {v2}")
    if off:
        return Finding(name, True, "; ".join(off + kept))
    return Finding(name, False, "; ".join(kept) or "overlap scheduler, mixed chunk and radix cache unchanged from "
                                                   "the baseline")


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


def rule_captured_layers_inconsistent(layer_table: Any) -> Optional[Finding]:
    """Notebook 02's layer-id table: every ``set_eagle3_layers_to_capture`` call in start-up order and what it
    wrote. The CUDA-graph runner calls it without ids (default [2, n/2, n-3]) and the model runner with the
    drafter's ids (+1); if the graphs were recorded with one list and eager forwards run with the other, the
    drafter is fed different hidden states in prefill and in decode."""
    name = "captured layers differ between CUDA-graph and eager forwards"
    if layer_table is None:
        return None
    tables = layer_table if isinstance(layer_table, list) else [layer_table]
    if not all(isinstance(t, Mapping) and isinstance(t.get("rows"), list) for t in tables):
        raise DiagnosticsError("layer table: expected notebook 02's mapping with a 'rows' list (or a list of them)",
                               what="layer table", problem="no_rows")
    verdicts = [v for v in (_table_verdict(t) for t in tables) if v is not None]
    if not verdicts:
        return None
    return Finding(name, any(v[0] for v in verdicts), " | ".join(v[1] for v in verdicts))


def accept_lengths_from_records(records: Iterable[Any]) -> list[float]:
    """Per-request acceptance: completion_tokens / spec_verify_ct (sglang's own definition), measured phase only.

    Takes notebook 03's JSONL rows (dicts) or ``metrics.RequestRecord`` objects; rows without speculation fields
    are skipped.
    """
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


def rule_acceptance_below_break_even(accept_lengths: Optional[Sequence[float]], break_even: Optional[float],
                                     where: str = "") -> Optional[Finding]:
    """Mean acceptance length per verify below the cost model's break-even: speculation costs more than it saves."""
    name = "acceptance length below break-even"
    if not accept_lengths or break_even is None:
        return None
    if any(not isinstance(a, (int, float)) or a < 0 for a in accept_lengths):
        raise DiagnosticsError("acceptance: per-request acceptance lengths must be non-negative numbers",
                               what="acceptance", problem="negative")
    mean = statistics.fmean(accept_lengths)
    below = sum(1 for a in accept_lengths if a < break_even)
    evidence = (f"mean accept length {mean:.2f} over {len(accept_lengths)} requests (median "
                f"{statistics.median(accept_lengths):.2f}; {below} below) vs break-even {break_even:.2f}"
                f"{' ' + where if where else ''} (cost model)")
    return Finding(name, mean < break_even, evidence)


def _looks_synthetic(ids: Sequence[int]) -> Optional[str]:
    if len(ids) >= 8:
        steps = sum(1 for a, b in zip(ids, ids[1:]) if b - a == 1 or (b == 0 < a))  # % vocab wraps to 0
        if steps >= 0.9 * (len(ids) - 1):
            return "a run of consecutive token ids"
    if len(ids) >= 64 and len(set(ids)) >= 0.9 * len(ids):
        return f"{len(set(ids))} distinct ids in {len(ids)} tokens (natural text repeats tokens)"
    return None


def rule_prompts_defeat_drafter(dataset_name: Optional[str] = None, prompt_kind: Optional[str] = None,
                                prompts: Optional[Sequence[Sequence[int]]] = None) -> Optional[Finding]:
    """Prompts of random or synthetic token ids give the drafter nothing to predict from, so acceptance is low
    whatever the hardware. sglang's bench_serving 'random-ids' builds runs of consecutive ids
    ((offset + i + j) % vocab in sample_random_requests); 'random' samples real ShareGPT text."""
    name = "prompts that defeat the drafter"
    if dataset_name is None and prompt_kind is None and not prompts:
        return None
    reasons = []
    if dataset_name == "random-ids":
        reasons.append("bench_serving --dataset-name random-ids: prompts are runs of consecutive token ids, not text")
    if prompt_kind == "ids":
        reasons.append("the benchmark sends random token ids (workload prompt_kind='ids')")
    if prompts:
        flagged = [(i, why) for i, p in enumerate(prompts) if (why := _looks_synthetic(list(p)))]
        if flagged and len(flagged) * 2 >= len(prompts):
            i, why = flagged[0]
            reasons.append(f"{len(flagged)} of {len(prompts)} prompts look synthetic (prompt {i}: {why})")
    if reasons:
        return Finding(name, True, "; ".join(reasons))
    described = f"dataset {dataset_name!r}" if dataset_name else f"prompt kind {prompt_kind!r}" if prompt_kind else ""
    checked = f"{len(prompts)} prompts checked" if prompts else ""
    return Finding(name, False, ", ".join(x for x in (described, checked) if x) + ": natural-looking prompts")


def rule_decode_without_graphs(spec_log: Optional[str], baseline_log: Optional[str] = None) -> Optional[Finding]:
    """Decode steps of the speculative run that did not replay a CUDA graph (batch above the captured sizes, or
    graphs off) while the baseline's did: those steps pay full kernel-launch overhead."""
    name = "speculative decode steps ran without CUDA graphs"
    spec_lines = [line for line in decode_lines(spec_log or "") if line.graph is not None]
    if not spec_lines:
        return None
    eager = [line for line in spec_lines if not line.graph]
    base_lines = [line for line in decode_lines(baseline_log or "") if line.graph is not None]
    base_eager = [line for line in base_lines if not line.graph]
    evidence = f"{len(eager)} of {len(spec_lines)} speculative decode lines without graphs"
    if eager:
        evidence += f" (e.g. {eager[0].text})"
    if base_lines:
        evidence += f"; baseline {len(base_eager)} of {len(base_lines)}"
    applies = bool(eager) and (not base_lines or len(base_eager) / len(base_lines) < len(eager) / len(spec_lines))
    return Finding(name, applies, evidence)


# ---------------------------------------------------------------------------------------------- all at once
@dataclass
class RunEvidence:
    """Everything one EAGLE-3 run (and its baseline) left behind; any field may be missing."""

    spec_log: Optional[str] = None
    baseline_log: Optional[str] = None
    spec_server_info: Optional[Mapping[str, Any]] = None
    baseline_server_info: Optional[Mapping[str, Any]] = None
    layer_table: Any = None
    accept_lengths: Optional[Sequence[float]] = None
    break_even: Optional[float] = None
    break_even_where: str = ""
    concurrency: Optional[int] = None
    dataset_name: Optional[str] = None
    prompt_kind: Optional[str] = None
    prompts: Optional[Sequence[Sequence[int]]] = field(default=None, repr=False)


def diagnose(ev: RunEvidence) -> list[Finding]:
    """Run every rule; rules without the evidence they need are left out (they return None)."""
    results = [
        rule_running_request_limit(ev.spec_server_info, ev.spec_log, ev.baseline_server_info, ev.baseline_log,
                                   ev.concurrency),
        rule_scheduler_features_off(ev.spec_server_info, ev.spec_log, ev.baseline_server_info, ev.baseline_log),
        rule_captured_layers_inconsistent(ev.layer_table),
        rule_acceptance_below_break_even(ev.accept_lengths, ev.break_even, ev.break_even_where),
        rule_prompts_defeat_drafter(ev.dataset_name, ev.prompt_kind, ev.prompts),
        rule_decode_without_graphs(ev.spec_log, ev.baseline_log),
    ]
    return [f for f in results if f is not None]


# ------------------------------------------------------------------------------- real server args, in-process
def resolve_server_args(argv: Sequence[str]) -> tuple[dict[str, Any], str]:
    """sglang's own argument resolution for a ``launch_server`` command line, without starting a server.

    Returns the resolved arguments (what ``/get_server_info`` reports at top level) and the log text sglang wrote
    while resolving them (the 'reset to 48', 'overlap scheduler disabled' ... lines). The model path must be a
    local directory with a config (sglang reads the architecture).
    """
    from sglang.srt.server_args import prepare_server_args

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
def _read_text(path: Optional[Path], what: str) -> Optional[str]:
    if path is None:
        return None
    if not Path(path).is_file():
        raise DiagnosticsError(f"{what} {path} does not exist; run the notebook that writes it or leave it out",
                               what=what, path=Path(path), problem="missing")
    return Path(path).read_text(encoding="utf-8", errors="replace")


def evidence_from_artifacts(bench_report: Any = None, requests_dir: Optional[Path] = None,
                            spec_log: Optional[Path] = None, baseline_log: Optional[Path] = None,
                            layer_tables: Optional[Sequence[Mapping[str, Any]]] = None,
                            layer_profile: Optional[str] = None,
                            break_even: Optional[float] = None, break_even_where: str = "") -> RunEvidence:
    """Gather a run's evidence from what the notebooks wrote: the bench report (``bench.BenchReport``), the
    per-request JSONL files in ``requests_dir``, server logs, and notebook 02's layer-id tables (its sidecar's
    ``layer_ids``, restricted to ``layer_profile`` -- 'cpu' or 'gpu' -- when given, so a run is judged by its
    own start-up).

    The speculative arm is the one of kind ``eagle3`` (the headline arm; its experiments are left out); its
    highest measured concurrency supplies the server info and the concurrency the request limit is judged against.
    """
    ev = RunEvidence(spec_log=_read_text(spec_log, "speculative server log"),
                     baseline_log=_read_text(baseline_log, "baseline server log"),
                     break_even=break_even, break_even_where=break_even_where)
    if layer_tables is not None:
        tables = [dict(t) for t in layer_tables]
        if layer_profile is not None:
            tables = [t for t in tables if t.get("profile") == layer_profile]
        ev.layer_table = tables or None
    if bench_report is None:
        return ev

    for arm in bench_report.arms:
        if arm.kind not in (ARM_KIND_BASELINE, ARM_KIND_EAGLE3):
            continue
        points = arm.measured_points()
        speculative = arm.kind == ARM_KIND_EAGLE3
        info = next((p.server_info for p in reversed(points) if p.server_info), None)
        if speculative:
            ev.spec_server_info = info
            ev.concurrency = max((p.concurrency for p in points), default=None)
            ev.prompt_kind = (arm.sweep or {}).get("prompt_kind")
            if requests_dir is not None and arm.requests_file:

                path = Path(requests_dir) / arm.requests_file
                if not path.is_file():
                    raise DiagnosticsError(f"requests file {path} of arm '{arm.name}' does not exist; pass the arm's "
                                           "output folder", what="requests file", path=Path(path), problem="missing")
                ev.accept_lengths = accept_lengths_from_records(load_requests(path))
            elif points:
                ev.accept_lengths = [p.metrics.accept_length_mean for p in points
                                     if p.metrics and p.metrics.accept_length_mean is not None] or None
        else:
            ev.baseline_server_info = info
    return ev


def findings_table(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Rows for a notebook table or a JSON sidecar."""
    return [dataclasses.asdict(f) for f in findings]
