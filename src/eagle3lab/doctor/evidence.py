"""The rules engine's evidence from what a user has: their launch, logs and benchmark text (each read by the
readers, each guarded: input nobody foresaw costs its own item and a note, never the run), the numbers they state
(``--accept``, ``--baseline-tok-s`` ...: provenance "given by the user"), configs, and the cost model's figures
where a GPU is named. A value read for one purpose is there for all: a log's ``#running-req`` is the batch the
cost model is run at when no concurrency is given."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from eagle3lab.bench import launch_spread
from eagle3lab.bench.diagnostics.evidence import BenchFigures, Evidence, Threshold
from eagle3lab.bench.diagnostics.logs import (OVERLAP_OFF, RESET_CAP, SCHEDULER_LIMITS, SPEC_V2_ON, VLLM_TRUNCATED,
                                              decode_lines, log_accept_lengths, server_args_from_log)
from eagle3lab.costmodel.hardware import Hardware
from eagle3lab.doctor.bench import read_bench
from eagle3lab.doctor.checked import checked_args, checked_config
from eagle3lab.doctor.launch import parse_launch, sglang_default_flags
from eagle3lab.doctor.model import model_figures
from eagle3lab.doctor.readers.serving import GREEDY_DEFAULT, sglang_greedy_default
from eagle3lab.doctor.readers.serverlog import read_log
from eagle3lab.doctor.readers.text import Row, chunks_of, looks_binary, read_text
from eagle3lab.doctor.trace import capture_trace

GIVEN = "given by the user"
LAUNCH_HEAD = 100_000  # characters of a launch text read from its start, and from its end (a manifest is ~10 KB)
SPEC_KEYS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


@dataclass
class DoctorInput:
    """What the user gave, already read (text, not paths), and the numbers they state."""

    launch: Optional[str] = None
    server_log: Optional[str] = None
    baseline_log: Optional[str] = None
    bench: Optional[str] = None
    concurrency: Optional[list[int]] = None
    hardware: Optional[str] = None
    hardware_sheet: Optional[Hardware] = None  # a GPU by its datasheet numbers (--gpu-*), instead of a preset
    gpus: Optional[int] = None
    tp: Optional[int] = None
    drafter_config: Optional[Mapping[str, Any]] = None
    target_config: Optional[Mapping[str, Any]] = None
    input_len: Optional[float] = None
    output_len: Optional[float] = None
    context: Optional[float] = None
    temperature: Optional[float] = None
    accept: Optional[float] = None
    baseline_tok_s: Optional[float] = None
    spec_tok_s: Optional[float] = None
    speedup: Optional[float] = None
    use_sglang_parser: bool = True
    notes: list[str] = field(default_factory=list)  # how the files were read (cut, thinned), said in the answer


@dataclass
class Measured:
    """The speedup the evidence measured (or the user stated), where, and at which concurrency."""

    speedup: float
    concurrency: Optional[int]
    where: str


@dataclass
class Built:
    """The evidence, how each input was read, and what the answer leads with."""

    evidence: Evidence
    notes: list[str]
    read: list[str] = field(default_factory=list)  # inputs something was recognised in
    unread: list[str] = field(default_factory=list)  # inputs given that held nothing recognisable
    measured: Optional[Measured] = None
    flags: dict[str, Any] = field(default_factory=dict)  # steps/topk/draft tokens wherever they were found
    flags_where: str = ""
    batch: Optional[int] = None
    batch_where: str = ""
    gpus: int = 1  # GPUs per replica the cost model ran with
    context: float = 1024.0  # mean cached tokens per request the cost model ran with


def clean_text(text: Optional[str], label: str, notes: list[str], log: bool = False) -> Optional[str]:
    """Text with its lines bounded (a log: ``readers.serverlog``, the lines the rules read; else its first and
    last ``LAUNCH_HEAD`` characters); None (with a note) for binary data."""
    if text is None:
        return None
    if looks_binary(text):
        notes.append(f"{label}: binary data, not text: nothing read")
        return None
    if log:
        reading = read_log(chunks_of(text), label)
        notes.extend(reading.notes)
        return reading.text
    text, said = read_text(chunks_of(text), label, LAUNCH_HEAD, LAUNCH_HEAD)
    notes.extend(said)
    return text


def _log_read(text: Optional[str]) -> bool:
    if not text:
        return False
    return bool(server_args_from_log(text) or decode_lines(text) or log_accept_lengths(text) or
                any(p.search(text) for p in (RESET_CAP, OVERLAP_OFF, SPEC_V2_ON, SCHEDULER_LIMITS, VLLM_TRUNCATED)))


def _user_rows(given: DoctorInput, concurrency: Optional[int]) -> list[Row]:
    rows = []
    if given.baseline_tok_s is not None:
        rows.append(Row(BenchFigures(arm="baseline", concurrency=concurrency, output_tok_s=given.baseline_tok_s,
                                     source=f"{GIVEN} (--baseline-tok-s)")))
    if given.spec_tok_s is not None:
        rows.append(Row(BenchFigures(arm="speculative", concurrency=concurrency, output_tok_s=given.spec_tok_s,
                                     accept_length=given.accept, source=f"{GIVEN} (--spec-tok-s)")))
    return rows


def _measured(rows: list[Row], given: DoctorInput) -> tuple[dict[int, float], Optional[Measured]]:
    """Speedup per concurrency (speculative over baseline rate, first pair at each), and the one that leads."""
    by_level: dict[Optional[int], dict[str, BenchFigures]] = {}
    for row in rows:
        f = row.figures
        if f.arm in ("speculative", "baseline") and f.output_tok_s:
            by_level.setdefault(f.concurrency, {}).setdefault(f.arm, f)
    speedups: dict[int, float] = {}
    lead: Optional[Measured] = None
    for level, arms in sorted(by_level.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        if "speculative" in arms and "baseline" in arms:
            s, b = arms["speculative"], arms["baseline"]
            value = float(s.output_tok_s or 0) / float(b.output_tok_s or 1)
            if level:
                speedups[level] = value
            lead = lead or Measured(value, level, f"{s.source} / {b.source}")
    if given.speedup is not None:
        level = max(given.concurrency) if given.concurrency else None
        if level:
            speedups.setdefault(level, given.speedup)
        lead = Measured(given.speedup, level, f"{GIVEN} (--speedup)")
    stated = next((r for r in rows if r.speedup is not None), None)
    if lead is None and stated is not None and stated.speedup is not None:
        lead = Measured(stated.speedup, stated.figures.concurrency, f"{stated.figures.source} (stated speedup)")
    return speedups, lead


def _flags(ev: Evidence, rows: list[Row], given: DoctorInput, notes: list[str]) -> tuple[dict[str, Any], str]:
    """Steps, topk and draft tokens: the resolved arguments or the launch, else a benchmark row that names them,
    else the installed sglang's own default for the target's architecture."""
    found = {k: ev.arg(k)[0] for k in SPEC_KEYS}
    if all(isinstance(found[k], int) for k in SPEC_KEYS):
        return found, ev.arg(SPEC_KEYS[0])[1]
    row = next((r for r in rows if r.figures.arm == "speculative" and all(k in r.flags for k in SPEC_KEYS)), None)
    if row is not None:
        notes.append(f"speculative flags from the benchmark ({row.figures.source}): "
                     + ", ".join(f"{k}={row.flags[k]}" for k in SPEC_KEYS))
        ev.flag_defaults = {k: row.flags[k] for k in SPEC_KEYS}
        ev.flag_defaults_where = f"benchmark output ({row.figures.source})"
        return dict(ev.flag_defaults), row.figures.source
    archs = (given.target_config or {}).get("architectures") or []
    if archs and not any(isinstance(found[k], int) for k in SPEC_KEYS):
        algorithm = str(ev.arg("speculative_algorithm")[0] or "EAGLE3").upper()
        default, where = sglang_default_flags(str(archs[0]), algorithm)
        notes.append(where)
        if default is not None:
            ev.flag_defaults, ev.flag_defaults_where = dict(zip(SPEC_KEYS, default)), where
            return dict(ev.flag_defaults), where
    return found, ev.arg(SPEC_KEYS[0])[1]


def _batch(ev: Evidence) -> tuple[Optional[int], str]:
    if ev.concurrency:
        return max(ev.concurrency), "the benchmark's concurrency"
    running = [d.running for d in decode_lines(ev.spec_log)]
    if running:
        return max(running), f"the server log's #running-req (up to {max(running)})"
    return None, ""


def checked_input(given: DoctorInput) -> DoctorInput:
    """The input with its configs' ill-typed fields left out (``checked``), said in its notes; idempotent."""
    notes = list(given.notes)
    return replace(given, drafter_config=checked_config(given.drafter_config, "--drafter-config", notes),
                   target_config=checked_config(given.target_config, "--target-config", notes), notes=notes)


def build(given: DoctorInput) -> Built:
    """The evidence and everything around it (see the module docstring)."""
    given = checked_input(given)
    notes: list[str] = list(given.notes)
    read: list[str] = []
    unread: list[str] = []
    launch = clean_text(given.launch, "--launch", notes)
    spec_log = clean_text(given.server_log, "--server-log", notes, log=True)
    base_log = clean_text(given.baseline_log, "--baseline-log", notes, log=True)
    bench_text = given.bench
    ev = Evidence(spec_log=spec_log, baseline_log=base_log, concurrency=given.concurrency,
                  drafter_config=given.drafter_config, target_config=given.target_config,
                  input_len=given.input_len, output_len=given.output_len, temperature=given.temperature,
                  temperature_where="--temperature, given by the user" if given.temperature is not None else "")
    if launch is not None:
        parsed = parse_launch(launch, given.use_sglang_parser)
        said = list(parsed.notes)
        for role, command in (("speculative", parsed.speculative), ("baseline", parsed.baseline)):
            if command is not None:
                env = f", environment {', '.join(f'{k}={v}' for k, v in command.env.items())}" if command.env else ""
                said.append(f"{role} command ({command.origin}{env}) read by the {command.parser}")
                said.extend(command.notes)
        if parsed.speculative is not None:
            ev.launch = checked_args(parsed.speculative.args, "--launch (speculative command)", notes)
            ev.launch_note = parsed.speculative.parser
            ev.launch_env = parsed.speculative.env or None
        if parsed.baseline is not None:
            ev.baseline_launch = checked_args(parsed.baseline.args, "--launch (baseline command)", notes)
            if ev.launch is None and ev.baseline_launch:
                ev.launch = ev.baseline_launch  # its flags (tp, graphs) are the deployment's either way
        notes.append("launch: " + "; ".join(dict.fromkeys(said)))
        (read if parsed.speculative or parsed.baseline else unread).append("--launch")
    elif given.launch is not None:
        unread.append("--launch")
    for label, text in (("--server-log", spec_log), ("--baseline-log", base_log)):
        given_text = given.server_log if label == "--server-log" else given.baseline_log
        if given_text is None:
            continue
        (read if _log_read(text) else unread).append(label)
    if spec_log is not None:
        ev.server_args = checked_args(server_args_from_log(spec_log), "--server-log server_args", notes)
        notes.append("server log: " + ("server_args line read" if ev.server_args else "no server_args line") +
                     f", {len(log_accept_lengths(spec_log))} accept-length figure(s)")
    if base_log is not None:
        ev.baseline_server_args = checked_args(server_args_from_log(base_log), "--baseline-log server_args",
                                               notes)
    rows: list[Row] = []
    if bench_text is not None:
        reading = read_bench(bench_text)
        notes.extend(reading.notes)
        rows = reading.rows
        (read if rows else unread).append("--bench")
        if rows and ev.temperature is None and sglang_greedy_default(rows):
            ev.temperature, ev.temperature_where = 0.0, GREEDY_DEFAULT
    if ev.concurrency is None:
        levels = sorted({r.figures.concurrency for r in rows if r.figures.concurrency})
        ev.concurrency = levels or None
    level = max(ev.concurrency) if ev.concurrency else None
    user_rows = _user_rows(given, level)
    rows = rows + user_rows
    ev.bench = [r.figures for r in rows]
    if given.accept is not None:
        ev.accept_lengths, ev.accept_where = [given.accept], f"{GIVEN} (--accept)"
    speedups, measured = _measured(rows, given)
    if speedups:
        ev.speedups = speedups
        ev.speedup_where = measured.where if measured else "benchmark output"
    spec = next((b for b in ev.bench if b.arm == "speculative" and b.output_tok_s and b.concurrency), None)
    if spec is not None and spec.concurrency in speedups:
        spread = launch_spread.spread_record(launch_spread.samples_from_runs(ev.bench, spec.concurrency),
                                             spec.concurrency, "as given in the benchmark output")
        if spread is not None:
            ev.launch_spread = spread.model_dump()
            notes.append(f"{len(spread.launches)} runs of each arm at concurrency {spec.concurrency}: speedup "
                         f"{spread.speedup_min:.2f}x to {spread.speedup_max:.2f}x")
    numbers = [f"--{name.replace('_', '-')}" for name in ("accept", "baseline_tok_s", "spec_tok_s", "speedup",
                                                          "concurrency", "temperature")
               if getattr(given, name) is not None]
    read.extend(numbers)
    read.extend(name for name, cfg in (("--drafter-config", given.drafter_config),
                                       ("--target-config", given.target_config)) if cfg is not None)
    built = Built(ev, notes, read, unread, measured)
    built.flags, built.flags_where = _flags(ev, rows, given, notes)
    built.batch, built.batch_where = _batch(ev)
    _cost_model(built, given)
    if given.target_config is not None:
        ev.layer_table, note = capture_trace(ev)
        notes.append(note)
    return built


def _context(given: DoctorInput, ev: Evidence) -> tuple[float, str]:
    if given.context is not None:
        return given.context, "--context, given by the user"
    first = given.input_len if given.input_len is not None else \
        next((b.mean_input_len for b in ev.bench if b.mean_input_len), None)
    if first is not None:
        out = given.output_len or next((b.mean_output_len for b in ev.bench if b.mean_output_len), 0.0) or 0.0
        return first + out / 2, "mean prompt + half the output"
    return 1024.0, "assumed, not measured: give --context"


def _cost_model(built: Built, given: DoctorInput) -> None:
    ev, notes = built.evidence, built.notes
    hardware: Optional[Hardware | str] = given.hardware_sheet or given.hardware
    if hardware is None:
        return
    steps, topk, tokens = (built.flags.get(k) for k in SPEC_KEYS)
    missing = [what for what, ok in (("--target-config", given.target_config is not None),
                                     ("the speculative flags (a launch, or a target config sglang has defaults "
                                      "for)", all(isinstance(v, int) for v in (steps, topk, tokens))),
                                     ("a concurrency (--concurrency, a benchmark, or a log's #running-req)",
                                      built.batch is not None)) if not ok]
    if missing:
        notes.append(f"a GPU is given, but the cost model also needs {missing[0]}")
        return
    assert isinstance(steps, int) and isinstance(topk, int) and isinstance(tokens, int) and built.batch
    tp = ev.arg("tp_size")[0]
    gpus = given.gpus or given.tp or (int(tp) if isinstance(tp, int) else 1)
    context, where = _context(given, ev)
    built.gpus, built.context = gpus, context
    ev.model, note = model_figures(hardware, gpus, given.target_config or {}, given.drafter_config, steps, topk,
                                   tokens, built.batch, context, where)
    notes.append(note)
    if ev.model is not None:
        ev.break_even = Threshold(ev.model.break_even, "modelled", ev.model.where)
        ev.modelled_break_even = ev.break_even
