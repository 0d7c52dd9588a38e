"""Doctor's command: read the user's files, build the evidence, run the rules, print JSON or a table."""

from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.bench import launch_spread
from eagle3lab.doctor.bench import parse_bench
from eagle3lab.doctor.launch import parse_launch
from eagle3lab.doctor.model import model_figures
from eagle3lab.errors import DiagnosticsError, Eagle3LabError
from eagle3lab.bench.diagnostics import (YES, Evidence, Finding, Threshold, diagnose, log_accept_lengths,
                                         server_args_from_log)
from eagle3lab.costmodel.presets import load_config
from eagle3lab.trace import audit
from eagle3lab.trace.sources import installed_source
from eagle3lab.trace.startup import StartupProfile


@dataclass
class DoctorInput:
    """What the user gave, already read (text, not paths)."""

    launch: Optional[str] = None
    server_log: Optional[str] = None
    baseline_log: Optional[str] = None
    bench: Optional[str] = None
    concurrency: Optional[list[int]] = None
    hardware: Optional[str] = None
    gpus: Optional[int] = None
    drafter_config: Optional[Mapping[str, Any]] = None
    target_config: Optional[Mapping[str, Any]] = None
    input_len: Optional[float] = None
    output_len: Optional[float] = None
    context: Optional[float] = None
    temperature: Optional[float] = None
    use_sglang_parser: bool = True


@dataclass
class DoctorResult:
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings], "notes": self.notes}


def _read(path: Optional[str], what: str) -> Optional[str]:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise DiagnosticsError(f"{what} {path} does not exist; give the file's path or leave the option out")
    return p.read_text(encoding="utf-8", errors="replace")


def _launch_text(value: Optional[str]) -> Optional[str]:
    """--launch is a file or the command itself; a single word that is no file is a mistyped path."""
    if value is None:
        return None
    if Path(value).is_file():
        return Path(value).read_text(encoding="utf-8", errors="replace")
    if "--" not in value and " " not in value.strip():
        raise DiagnosticsError(f"--launch {value}: no such file, and not a command line; give the file holding the "
                               "launch command or the command in quotes")
    return value


def _config(value: Optional[str], what: str) -> Optional[dict[str, Any]]:
    if value is None:
        return None
    if not Path(value).exists() and ("/" in value or value.endswith(".json")):
        raise DiagnosticsError(f"{what} {value} does not exist; give a config.json (or its folder) or a stored "
                               "config name")
    return load_config(value)[0]


def parse_concurrency(text: Optional[str]) -> Optional[list[int]]:
    if text is None:
        return None
    try:
        values = [int(part) for part in str(text).split(",") if part.strip()]
    except ValueError:
        raise DiagnosticsError(f"--concurrency expects integers such as 8 or 1,8,32, got '{text}'") from None
    if not values or min(values) < 1:
        raise DiagnosticsError(f"--concurrency needs values >= 1, got '{text}'")
    return values


def build_evidence(given: DoctorInput) -> tuple[Evidence, list[str]]:
    """The rules engine's evidence from the user's inputs, and notes on how each was read."""
    notes: list[str] = []
    ev = Evidence(spec_log=given.server_log, baseline_log=given.baseline_log, concurrency=given.concurrency,
                  drafter_config=given.drafter_config, target_config=given.target_config,
                  input_len=given.input_len, output_len=given.output_len, temperature=given.temperature,
                  temperature_where="--temperature" if given.temperature is not None else "")
    if given.launch is not None:
        parsed = parse_launch(given.launch, given.use_sglang_parser)
        notes.extend(parsed.notes)
        if parsed.speculative is not None:
            ev.launch = parsed.speculative.args
            ev.launch_note = parsed.speculative.parser
            notes.append(f"speculative command read by the {parsed.speculative.parser}")
            notes.extend(parsed.speculative.notes)
        if parsed.baseline is not None:
            ev.baseline_launch = parsed.baseline.args
            notes.append(f"baseline command read by the {parsed.baseline.parser}")
    if given.server_log is not None:
        ev.server_args = server_args_from_log(given.server_log)
        notes.append("server log: " + ("server_args line read" if ev.server_args else "no server_args line") +
                     f", {len(log_accept_lengths(given.server_log))} accept-length figure(s)")
    if given.bench is not None:
        ev.bench, note = parse_bench(given.bench)
        notes.append(note)
        if ev.concurrency is None:
            levels = sorted({b.concurrency for b in ev.bench if b.concurrency})
            ev.concurrency = levels or None
        spec = next((b for b in ev.bench if b.arm == "speculative" and b.output_tok_s), None)
        base = next((b for b in ev.bench if b.arm == "baseline" and b.output_tok_s), None)
        if spec and base and spec.concurrency == base.concurrency and spec.concurrency:
            ev.speedups = {spec.concurrency: spec.output_tok_s / base.output_tok_s}
            ev.speedup_where = "bench_serving output throughput, speculative / baseline"
            # each arm benchmarked more than once at that concurrency: how far the pairs of runs agree
            spread = launch_spread.spread_record(launch_spread.samples_from_runs(ev.bench, spec.concurrency),
                                                 spec.concurrency, "as given in the benchmark output")
            if spread is not None:
                ev.launch_spread = spread.model_dump()
                notes.append(f"{len(spread.launches)} runs of each arm at concurrency {spec.concurrency}: speedup "
                             f"{spread.speedup_min:.2f}x to {spread.speedup_max:.2f}x")
    steps, topk, tokens = (ev.arg(k)[0] for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                  "speculative_num_draft_tokens"))
    batch = max(ev.concurrency) if ev.concurrency else None
    if given.hardware and given.target_config and all(isinstance(v, int) for v in (steps, topk, tokens)) and batch:
        if given.context is not None:
            context, where = given.context, "--context"
        elif given.input_len is not None or any(b.mean_input_len for b in ev.bench):
            first = given.input_len if given.input_len is not None else \
                next(b.mean_input_len for b in ev.bench if b.mean_input_len)
            out = given.output_len or next((b.mean_output_len for b in ev.bench if b.mean_output_len), 0.0) or 0.0
            context, where = first + out / 2, "mean prompt + half the output"
        else:
            context, where = 1024.0, "assumed, not measured: give --context"
        tp = ev.arg("tp_size")[0]
        gpus = given.gpus or (int(tp) if isinstance(tp, int) else 1)
        ev.model, note = model_figures(given.hardware, gpus, given.target_config, given.drafter_config,
                                       steps, topk, tokens, batch, context, where)
        notes.append(note)
        if ev.model is not None:
            ev.break_even = Threshold(ev.model.break_even, "modelled", ev.model.where)
            ev.modelled_break_even = ev.break_even
    elif given.hardware:
        notes.append("--hardware given, but the cost model also needs --target-config, the speculative flags and "
                     "a concurrency")
    if given.target_config is not None:
        ev.layer_table, note = capture_trace(ev)
        notes.append(note)
    return ev, notes


def capture_trace(ev: Evidence) -> tuple[Optional[list[dict[str, Any]]], str]:
    """The installed sglang's start-up order of ``set_eagle3_layers_to_capture`` for this target class, depth and
    drafter aux ids (``trace.audit.layer_table``, GPU start-up: CUDA graphs on), or why it was not traced."""
    algorithm = str(ev.arg("speculative_algorithm")[0] or "").upper()
    target = ev.target_config or {}
    text = {**target, **(target.get("text_config") or {})} if isinstance(target.get("text_config"), dict) else target
    eagle = (ev.drafter_config or {}).get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    archs = target.get("architectures") or []
    if algorithm != "EAGLE3" or not archs or not text.get("num_hidden_layers") or not ids:
        return None, "capture order not traced (needs EAGLE3, the target's architectures and depth, and the " \
                     "drafter's aux layer ids)"
    if ev.arg("disable_cuda_graph")[0] is True:
        return None, "capture order not traced: CUDA graphs are off"
    try:
        src = installed_source()
        table = audit.layer_table(src, str(archs[0]), int(text["num_hidden_layers"]), [int(i) for i in ids],
                                  StartupProfile.gpu())
    except (Eagle3LabError, KeyError, ValueError, TypeError, AttributeError) as exc:
        return None, f"capture order not traced: {type(exc).__name__}: {exc}"
    return [{**table, "profile": "gpu"}], (f"capture order traced on the installed sglang {src.version} for "
                                           f"{archs[0]} (the server's release may differ)")


def doctor(given: DoctorInput) -> DoctorResult:
    ev, notes = build_evidence(given)
    return DoctorResult(diagnose(ev), notes)


def format_table(result: DoctorResult, width: int = 110) -> str:
    """A readable table: causes that apply first, each with its evidence and fix; then the notes."""
    order = {"yes": 0, "unknown": 1, "no": 2}
    rows = sorted(result.findings, key=lambda f: order.get(f.applies, 3))
    lines = [f"{'cause':<34} {'applies':<8} {'threshold':<12} evidence", "-" * width]
    for f in rows:
        wrapped = textwrap.wrap(f.evidence, width - 57) or [""]
        lines.append(f"{f.cause:<34} {f.applies:<8} {(f.threshold_provenance or '-'):<12} {wrapped[0]}")
        lines.extend(" " * 56 + part for part in wrapped[1:])
        if f.applies == YES and f.fix:
            for i, part in enumerate(textwrap.wrap(f.fix, width - 61)):
                lines.append(" " * 56 + ("fix: " if i == 0 else "     ") + part)
    lines.append("")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--launch", help="the launch_server command: a file (may hold a baseline and a speculative "
                                         "command, comments) or the command text itself")
    parser.add_argument("--server-log", help="the speculative server's log (sglang 0.4.x-0.5.x)")
    parser.add_argument("--baseline-log", help="the baseline server's log, if any")
    parser.add_argument("--bench", help="bench_serving output: its text summary, its JSONL, or the benchmark command")
    parser.add_argument("--concurrency", help="the concurrency (or levels, comma-separated) the benchmark served")
    parser.add_argument("--hardware", help="GPU preset for the cost model's break-even (see `predict --help`)")
    parser.add_argument("--gpus", type=int, help="GPUs per replica (default: the launch's --tp-size)")
    parser.add_argument("--drafter-config", help="the drafter's config.json (or folder)")
    parser.add_argument("--target-config", help="the target's config.json (or folder, or a stored config name)")
    parser.add_argument("--input-len", type=float, help="mean prompt tokens per request, when no bench output says")
    parser.add_argument("--output-len", type=float, help="mean output tokens per request")
    parser.add_argument("--context", type=float, help="mean tokens cached per request while decoding (cost model)")
    parser.add_argument("--temperature", type=float, help="the benchmark's sampling temperature")
    parser.add_argument("--json", action="store_true", help='print {"findings": [...]} instead of a table')


def inputs_from_args(args: argparse.Namespace) -> DoctorInput:
    return DoctorInput(launch=_launch_text(args.launch), server_log=_read(args.server_log, "--server-log"),
                       baseline_log=_read(args.baseline_log, "--baseline-log"), bench=_read(args.bench, "--bench"),
                       concurrency=parse_concurrency(args.concurrency), hardware=args.hardware, gpus=args.gpus,
                       drafter_config=_config(args.drafter_config, "--drafter-config"),
                       target_config=_config(args.target_config, "--target-config"), input_len=args.input_len,
                       output_len=args.output_len, context=args.context, temperature=args.temperature)


def run(args: argparse.Namespace) -> None:
    given = inputs_from_args(args)
    if not any((given.launch, given.server_log, given.bench, given.drafter_config, given.target_config)):
        raise DiagnosticsError("doctor needs at least one of --launch, --server-log, --bench, --drafter-config, "
                               "--target-config")
    result = doctor(given)
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_table(result))


def argv_inputs(argv: Sequence[str]) -> DoctorInput:
    """The inputs of a doctor command line (for tests and callers that hold argv)."""
    parser = argparse.ArgumentParser(prog="doctor")
    add_arguments(parser)
    return inputs_from_args(parser.parse_args(list(argv)))
