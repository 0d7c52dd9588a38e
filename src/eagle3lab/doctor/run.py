"""Doctor's command: read the user's files and numbers, build the evidence, run the rules, rank the answer, print
JSON or a table. The answer leads with the measured speedup, then the causes that apply ranked by how much of the
gap each explains, then every cause's finding, then one line on what was read and what was not."""

from __future__ import annotations

import argparse
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from eagle3lab.bench.diagnostics.evidence import UNKNOWN, YES, Finding
from eagle3lab.costmodel.hardware import GB, TB, Hardware
from eagle3lab.costmodel.presets import load_config
from eagle3lab.costmodel.understood import dcp_note
from eagle3lab.doctor.bench import BENCH_HEAD, BENCH_TAIL
from eagle3lab.doctor.checked import guarded_diagnose
from eagle3lab.doctor.evidence import GIVEN, LAUNCH_HEAD, Built, DoctorInput, Measured, build, checked_input
from eagle3lab.doctor.rank import Ranked, rank
from eagle3lab.doctor.readers.serverlog import read_log
from eagle3lab.doctor.readers.text import file_chunks, read_text
from eagle3lab.errors import DiagnosticsError, PerfModelError

__all__ = ["DoctorInput", "DoctorResult", "build_evidence", "doctor", "format_table", "add_arguments", "run"]


CONTEXT_ONLY = ("--concurrency", "--temperature")  # numbers that qualify evidence but are none themselves


@dataclass
class DoctorResult:
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    ranking: list[Ranked] = field(default_factory=list)
    measured: Optional[Measured] = None
    modelled_speedup: Optional[float] = None  # the cost model's speedup as deployed, at the served acceptance
    read: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)

    @property
    def read_nothing(self) -> bool:
        """Nothing that is evidence was read: --concurrency and --temperature only say how a benchmark ran, so
        beside files that held nothing recognisable they make no answer."""
        return not [name for name in self.read if name not in CONTEXT_ONLY]

    def to_dict(self) -> dict[str, Any]:
        return {"measured": None if self.measured is None else vars(self.measured),
                "modelled_speedup": self.modelled_speedup,
                "ranking": [r.to_dict() for r in self.ranking],
                "findings": [f.to_dict() for f in self.findings], "read": self.read, "unread": self.unread,
                "notes": self.notes}


def build_evidence(given: DoctorInput) -> tuple[Any, list[str]]:
    """The rules engine's evidence from the user's inputs, and notes on how each was read."""
    built = build(given)
    return built.evidence, built.notes


def doctor(given: DoctorInput) -> DoctorResult:
    given = checked_input(given)
    built: Built = build(given)
    findings = guarded_diagnose(built.evidence, built.notes)
    ranking, modelled = rank(findings, built, given)
    return DoctorResult(findings, built.notes, ranking, built.measured, modelled, built.read, built.unread)


def _file(path: str, what: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise DiagnosticsError(f"{what} {path} does not exist; give the file's path or leave the option out")
    return p


def _read(path: Optional[str], what: str, notes: list[str], log: bool = False) -> Optional[str]:
    """A file read in one streaming pass, never held whole: a log as the rules read it (``read_log``), other
    text by its first and last megabytes (``read_text``); what was cut or skipped goes in ``notes``."""
    if path is None:
        return None
    p = _file(path, what)
    try:
        if log:
            reading = read_log(file_chunks(p), what)
            text, said = reading.text, reading.notes
        else:
            head, tail = (BENCH_HEAD, BENCH_TAIL) if what == "--bench" else (LAUNCH_HEAD, LAUNCH_HEAD)
            text, said = read_text(file_chunks(p), what, head, tail)
    except OSError as exc:
        raise DiagnosticsError(f"{what} {path} cannot be read ({exc.strerror or type(exc).__name__}); give a "
                               "readable file") from None
    notes.extend(said)
    return text


def _launch_text(value: Optional[str], notes: list[str]) -> Optional[str]:
    """--launch is a file or the command itself; a single word that is no file is a mistyped path."""
    if value is None:
        return None
    if Path(value).is_file():
        return _read(value, "--launch", notes)
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
    try:
        return load_config(value)[0]
    except (ValueError, RecursionError) as exc:
        raise DiagnosticsError(f"{what} {value} is not a readable config.json ({type(exc).__name__}); give the "
                               "model's config.json") from None


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


# a GPU by its datasheet numbers: (flag, Hardware field, unit factor, help)
GPU_SHEET = (("--gpu-mem-bw", "mem_bandwidth", TB, "memory bandwidth, TB/s (datasheet peak)"),
             ("--gpu-memory", "memory_bytes", GB, "memory per GPU, GB"),
             ("--gpu-bf16-tflops", "peak_bf16_flops", 1e12, "dense BF16 tensor-core TFLOP/s"),
             ("--gpu-fp8-tflops", "peak_fp8_flops", 1e12, "dense FP8 tensor-core TFLOP/s (leave out: none)"),
             ("--gpu-link-bw", "link_bandwidth", GB, "GB/s per direction per GPU into the TP group"))
ALLREDUCE_S = {"nvlink": 8e-6, "pcie": 30e-6, "none": 30e-6}


def gpu_from_sheet(args: argparse.Namespace) -> Optional[Hardware]:
    """A ``Hardware`` from the --gpu-* datasheet numbers (every number's source: given by the user), or None."""
    values = {field_name: getattr(args, flag[2:].replace("-", "_"), None) for flag, field_name, _, _ in GPU_SHEET}
    if all(v is None for v in values.values()) and not getattr(args, "gpu_name", None):
        return None
    missing = [flag for flag, name, _, _ in GPU_SHEET if values[name] is None and name != "peak_fp8_flops"]
    if missing:
        raise DiagnosticsError(f"a GPU by its datasheet also needs {missing[0]} (or name a preset with --hardware)")
    kind = getattr(args, "gpu_interconnect", None) or "nvlink"
    numbers: dict[str, Optional[float]] = {}
    for _, name, factor, _ in GPU_SHEET:
        value = values[name]
        numbers[name] = float(value) * factor if value is not None else None
    sources = {name: f"{GIVEN} ({flag})" for flag, name, _, _ in GPU_SHEET}
    sources["allreduce_latency_s"] = ("assumption: the cost model's all-reduce latency for the interconnect "
                                      f"named ({kind}: the presets' value)")
    try:
        return Hardware(name=getattr(args, "gpu_name", None) or "GPU given by datasheet", interconnect=kind,
                        allreduce_latency_s=ALLREDUCE_S[kind], sources=sources, **numbers)  # type: ignore[arg-type]
    except PerfModelError as exc:
        raise DiagnosticsError(f"the --gpu-* numbers: {exc}") from None


def _wrap(text: str, width: int, indent: int, first: str = "", rest: str = "") -> list[str]:
    parts = textwrap.wrap(text, width - indent - len(first)) or [""]
    return [" " * indent + (first if i == 0 else rest) + part for i, part in enumerate(parts)]


def headline(result: DoctorResult) -> list[str]:
    """The measured speedup, first, with where it comes from."""
    m = result.measured
    if m is None:
        return ["measured speedup: unknown (give the benchmark of both arms, or --baseline-tok-s and --spec-tok-s, "
                "or --speedup)"]
    at = f" at concurrency {m.concurrency}" if m.concurrency else ""
    verdict = "slower than without speculation" if m.speedup < 1 else "faster than without speculation"
    lines = [f"measured speedup: {m.speedup:.2f}x{at}, {verdict} ({m.where})"]
    if result.modelled_speedup is not None:
        gap = result.modelled_speedup - m.speedup
        lines.append(f"modelled speedup as deployed: {result.modelled_speedup:.2f}x at the served acceptance"
                     + (f"; {gap:.2f}x of the measured shortfall is beyond what the model holds (graphs, caps, the "
                        "benchmark: see the unknown causes)" if gap > 0.05 else ""))
    return lines


def format_table(result: DoctorResult, width: int = 110) -> str:
    """The answer: measured speedup, the ranked causes, every finding (applying first), then what was read."""
    lines = headline(result)
    applying = [r for r in result.ranking if r.applies == YES]
    if applying:
        lines.append("causes that apply, by how much of the gap each explains (modelled speedup gained were it "
                     "removed):")
        for i, r in enumerate(applying, 1):
            gain = f"+{r.gain:.2f}x" if r.gain is not None else "not modelled"
            lines.append(f"  {i}. {r.cause} ({gain})" + (f": {r.how}" if r.gain is not None else ""))
    unknown = [r for r in result.ranking if r.applies == UNKNOWN and r.decide]
    if unknown:
        lines.append("to decide the unknown causes, give:")
        lines.extend(f"  {r.cause}: {r.decide}" for r in unknown)
    lines.append("")
    order = {"yes": 0, "unknown": 1, "no": 2}
    rows = sorted(result.findings, key=lambda f: order.get(f.applies, 3))
    lines += [f"{'cause':<34} {'applies':<8} {'threshold':<12} evidence", "-" * width]
    for f in rows:
        wrapped = textwrap.wrap(f.evidence, width - 57) or [""]
        lines.append(f"{f.cause:<34} {f.applies:<8} {(f.threshold_provenance or '-'):<12} {wrapped[0]}")
        lines.extend(" " * 56 + part for part in wrapped[1:])
        if f.applies == YES and f.fix:
            lines.extend(_wrap(f.fix, width, 56, "fix: ", "     "))
    lines.append("")
    lines.append("read: " + (", ".join(result.read) or "nothing") +
                 (f"; not read (nothing recognised): {', '.join(result.unread)}" if result.unread else ""))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--launch", help="the launch_server command: a file (may hold a baseline and a speculative "
                                         "command, comments, docker run, a Kubernetes args list) or the command text")
    parser.add_argument("--server-log", help="the speculative server's log (sglang 0.4.x-0.5.x)")
    parser.add_argument("--baseline-log", help="the baseline server's log, if any")
    parser.add_argument("--bench", help="benchmark output: bench_serving / vllm bench serve (text or JSON), send_one, "
                                        "bench_speculative, sglang benchmark/ scripts, SpecForge, a table, "
                                        "eagle3lab bench's JSON, or the benchmark command")
    parser.add_argument("--concurrency", help="the concurrency (or levels, comma-separated) the benchmark served")
    parser.add_argument("--accept", type=float, help="the served acceptance length (tokens per verify), as you "
                                                     "measured it")
    parser.add_argument("--baseline-tok-s", type=float, help="the baseline's output tokens/s, as you measured it")
    parser.add_argument("--spec-tok-s", type=float, help="the speculative server's output tokens/s, same workload")
    parser.add_argument("--speedup", type=float, help="speculative over baseline throughput, if that is what you have")
    parser.add_argument("--hardware", help="GPU preset for the cost model's break-even (see `predict --help`)")
    for flag, _, _, text in GPU_SHEET:
        parser.add_argument(flag, type=float, help=f"a GPU without a preset: {text}")
    parser.add_argument("--gpu-interconnect", choices=sorted(ALLREDUCE_S), help="how the GPUs of a TP group are "
                                                                                "linked (default nvlink)")
    parser.add_argument("--gpu-name", help="the GPU's name, for the answer's text")
    parser.add_argument("--gpus", type=int, help="GPUs per replica (default: the launch's --tp-size)")
    parser.add_argument("--tp", type=int, help="tensor-parallel size, where no launch says it")
    parser.add_argument("--dcp", type=int, default=1, help="decode context parallel size (the cost model answers "
                                                           "as DCP 1 and says so)")
    parser.add_argument("--drafter-config", help="the drafter's config.json (or folder)")
    parser.add_argument("--target-config", help="the target's config.json (or folder, or a stored config name)")
    parser.add_argument("--input-len", type=float, help="mean prompt tokens per request, when no bench output says")
    parser.add_argument("--output-len", type=float, help="mean output tokens per request")
    parser.add_argument("--context", type=float, help="mean tokens cached per request while decoding (cost model)")
    parser.add_argument("--temperature", type=float, help="the benchmark's sampling temperature")
    parser.add_argument("--json", action="store_true", help='print {"measured", "ranking", "findings", ...} '
                                                            'instead of a table')


def _positive(value: Optional[float], flag: str) -> Optional[float]:
    if value is not None and not value > 0:
        raise DiagnosticsError(f"{flag} needs a number > 0, got {value:g}")
    return value


def inputs_from_args(args: argparse.Namespace) -> DoctorInput:
    for flag in ("accept", "baseline_tok_s", "spec_tok_s", "speedup", "gpus", "tp", "dcp"):
        _positive(getattr(args, flag, None), f"--{flag.replace('_', '-')}")
    notes: list[str] = []
    said_dcp = dcp_note(getattr(args, "dcp", 1))
    if said_dcp is not None:
        notes.append(said_dcp)
    return DoctorInput(launch=_launch_text(args.launch, notes),
                       server_log=_read(args.server_log, "--server-log", notes, log=True),
                       baseline_log=_read(args.baseline_log, "--baseline-log", notes, log=True),
                       bench=_read(args.bench, "--bench", notes),
                       concurrency=parse_concurrency(args.concurrency), hardware=args.hardware,
                       hardware_sheet=gpu_from_sheet(args), gpus=args.gpus, tp=args.tp,
                       drafter_config=_config(args.drafter_config, "--drafter-config"),
                       target_config=_config(args.target_config, "--target-config"), input_len=args.input_len,
                       output_len=args.output_len, context=args.context, temperature=args.temperature,
                       accept=args.accept, baseline_tok_s=args.baseline_tok_s, spec_tok_s=args.spec_tok_s,
                       speedup=args.speedup, notes=notes)


def run(args: argparse.Namespace) -> None:
    given = inputs_from_args(args)
    if not any(v is not None for v in (given.launch, given.server_log, given.bench, given.drafter_config,
                                       given.target_config, given.accept, given.baseline_tok_s, given.spec_tok_s,
                                       given.speedup)):
        raise DiagnosticsError("doctor needs at least one of --launch, --server-log, --bench, --drafter-config, "
                               "--target-config, or a measured number (--accept, --baseline-tok-s, --spec-tok-s, "
                               "--speedup)")
    result = doctor(given)
    if result.read_nothing:
        raise DiagnosticsError(nothing_read(result, args))
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_table(result))


def nothing_read(result: DoctorResult, args: argparse.Namespace) -> str:
    """One line naming each file given and why nothing in it was recognised."""
    named = []
    for label in result.unread:
        value = getattr(args, label[2:].replace("-", "_"), None)
        where = f"{label} {value}" if value and Path(value).is_file() else label
        said = [n.split(": ", 1)[1] for n in result.notes if n.split(": ", 1)[0] in (label, label[2:])]
        why = next((n for n in said if n.startswith("binary data")), None) or \
            next((n for n in said if "no number" in n or "unreadable" in n), None)
        named.append(where + (f" ({why.split(' (e.g.')[0][:100]})" if why else ""))
    return (f"doctor read nothing it recognises from {', '.join(named) or 'the inputs'}: no launch command, sglang "
            "log line or benchmark result; give the text as the tool printed it (sglang/vLLM server log, "
            "bench_serving output, the launch command)")


def argv_inputs(argv: Sequence[str]) -> DoctorInput:
    """The inputs of a doctor command line (for tests and callers that hold argv)."""
    parser = argparse.ArgumentParser(prog="doctor")
    add_arguments(parser)
    return inputs_from_args(parser.parse_args(list(argv)))
