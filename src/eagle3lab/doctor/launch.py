"""A user's ``launch_server`` command line, read with the installed sglang's own argument parser.

A file may hold several commands (shell lines, ``docker run``, a Kubernetes manifest, SpecForge's
``bench_eagle3.py``: ``launch_text``); the speculative command is the one with a ``--speculative-algorithm``
flag, and another command without one is the baseline. Flags the installed sglang does not know, abbreviations it
finds ambiguous, or a command cut short are read by a tolerant fallback (``--flag value`` pairs, literals only),
which reads each flag as the releases that have it do (``flag_table``: ``--speculative-draft`` is the draft model
path for sglang 0.4.x), and the note says so: a pasted command never ends in a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import warnings
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

from eagle3lab.doctor import flag_table
from eagle3lab.doctor.launch_text import CommandLine, command_lines, split

# sglang's dest names differ from ServerArgs' fields for these (ServerArgs.from_cli_args maps them)
DEST_TO_FIELD = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
                 "data_parallel_size": "dp_size"}
MAX_TOKENS = 4_000  # words of one command read (sglang has about 400 flags)
MAX_COMMANDS = 50  # commands of one launch text read, in order
# abbreviations and other engines' spellings the tolerant reader maps to sglang's field names
# (sglang's own abbreviations, such as --speculative-draft or --mem-fraction, are read with flag_table instead)
ALIASES = {"model": "model_path", "tp": "tp_size", "tensor_parallel_size": "tp_size",
           "speculative_draft_model": "speculative_draft_model_path", "max_num_seqs": "max_running_requests",
           "enforce_eager": "disable_cuda_graph"}


@dataclass
class ParsedCommand:
    """One command line: its flags as sglang's field names, and how they were read."""

    text: str
    args: dict[str, Any]
    parser: str  # "sglang x.y.z argument parser" | "tolerant fallback"
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # set for the launch (docker -e, KEY=VALUE, Kubernetes env)
    origin: str = "shell"

    @property
    def speculative(self) -> bool:
        return bool(self.args.get("speculative_algorithm"))


@dataclass
class ParsedLaunch:
    speculative: Optional[ParsedCommand]
    baseline: Optional[ParsedCommand]
    notes: list[str] = field(default_factory=list)


def _literal(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if text.startswith("{"):
        with contextlib.suppress(ValueError, RecursionError):
            return json.loads(text)
    return text


def _field(flag: str, notes: Optional[list[str]] = None) -> str:
    """A flag's field name: another engine's spelling (``ALIASES``), else as sglang's releases read it (an exact
    flag, or an abbreviation unambiguous there), else the flag's own name."""
    name = flag.lstrip("-").replace("-", "_")
    if name in ALIASES:
        return ALIASES[name]
    resolved = flag_table.resolve(flag) if flag.startswith("--") else None
    if resolved is None:
        return DEST_TO_FIELD.get(name, name)
    if resolved.option != flag and notes is not None:
        span = resolved.releases[0] if len(resolved.releases) == 1 else \
            f"{resolved.releases[0]} to {resolved.releases[-1]}"
        notes.append(f"{flag} read as {resolved.option}, as sglang {span} reads the abbreviation")
    return DEST_TO_FIELD.get(resolved.dest, resolved.dest)


def tolerant_flags(tokens: list[str], notes: Optional[list[str]] = None) -> dict[str, Any]:
    """``--flag value`` / ``--flag=value`` / ``--switch`` pairs as field names; values that are shell variables
    (``$CONC``) are dropped. vLLM's ``--speculative-config`` JSON is read into sglang's speculative fields."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--"):
            i += 1
            continue
        flag, eq, value = token.partition("=")
        if not eq:
            if i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
                value, i = tokens[i + 1], i + 1
            else:
                value = "true"
        i += 1
        if "$" in value:
            continue
        out[_field(flag, notes)] = _literal(value)
    spec = out.pop("speculative_config", None)
    if isinstance(spec, dict):
        method = str(spec.get("method", "")).upper()
        out.setdefault("speculative_algorithm", method or "(--speculative-config without a method)")
        if spec.get("model"):
            out.setdefault("speculative_draft_model_path", spec["model"])
        k = spec.get("num_speculative_tokens")
        if isinstance(k, int):
            out.setdefault("speculative_num_steps", k)
            out.setdefault("speculative_eagle_topk", 1)
            out.setdefault("speculative_num_draft_tokens", k + 1)
    return out


# fields the rules compare as numbers or switches: a value of another type (``--tp two``) is dropped, and said
INT_FIELDS = ("tp_size", "pp_size", "dp_size", "speculative_num_steps", "speculative_eagle_topk",
              "speculative_num_draft_tokens", "cuda_graph_max_bs", "max_running_requests", "context_length",
              "chunked_prefill_size", "max_total_tokens")
BOOL_FIELDS = ("disable_cuda_graph", "disable_overlap_schedule", "enable_mixed_chunk", "disable_radix_cache")


def checked_types(args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The flags with every number-or-switch field of the wrong type dropped, and one note per dropped flag."""
    out, dropped = dict(args), []
    for key in INT_FIELDS:
        value = out.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            dropped.append(f"--{key.replace('_', '-')} {value!r} is not a whole number: left out")
            del out[key]
    for key in BOOL_FIELDS:
        if key in out and not isinstance(out[key], bool):
            dropped.append(f"--{key.replace('_', '-')} {out[key]!r} is not a switch: left out")
            del out[key]
    graph = out.get("cuda_graph_bs")
    if graph is not None and not (isinstance(graph, list) and all(isinstance(v, int) for v in graph)):
        dropped.append(f"--cuda-graph-bs {graph!r} is not a list of whole numbers: left out")
        del out["cuda_graph_bs"]
    return out, dropped


class _ParserError(Exception):
    """argparse's refusal of a command line, raised instead of its exit and caught in this module (never escapes):
    a private signal, not an error the user sees, so it is not in ``errors.py``."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ParserError(message)


@functools.lru_cache(maxsize=1)
def _sglang_parser() -> tuple[Optional[_Parser], str]:
    """The installed sglang's own launch_server parser (every flag optional here), or why there is none."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            from sglang.srt.server_args import ServerArgs  # heavy: imports torch; only where a command is read
            from sglang.version import __version__
    except Exception as exc:  # noqa: BLE001 -- any import failure means: no sglang parser here
        return None, f"sglang is not importable here ({type(exc).__name__})"
    parser = _Parser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    for action in parser._actions:
        action.required = False
    return parser, f"sglang {__version__} argument parser"


def parse_command(command: str | CommandLine, use_sglang: bool = True) -> ParsedCommand:
    """One command through sglang's parser where it knows every flag, else the tolerant fallback."""
    line = command if isinstance(command, CommandLine) else \
        (command_lines(command) or [CommandLine(command, split(command)[0])])[0]
    tokens, notes = line.tokens[:MAX_TOKENS], list(line.notes)
    if len(line.tokens) > MAX_TOKENS:
        notes.append(f"a command of {len(line.tokens)} words: its first {MAX_TOKENS} read")
    read_notes: list[str] = []
    fallback, dropped = checked_types(tolerant_flags(tokens, read_notes))
    notes += dropped
    parser, name = _sglang_parser() if use_sglang else (None, "not asked for")
    done = lambda args, how, more: ParsedCommand(line.text, args, how, notes + more, line.env, line.origin)  # noqa: E731
    if parser is None:
        return done(fallback, "tolerant fallback", [f"no sglang parser: {name}"] + read_notes)
    try:
        namespace, unknown = parser.parse_known_args(tokens)
    except _ParserError as exc:
        return done(fallback, "tolerant fallback",
                    [f"the {name} rejected the command ({exc}); flags read one by one"] + read_notes)
    args = {DEST_TO_FIELD.get(k, k): v for k, v in vars(namespace).items() if v is not None}
    more: list[str] = []
    if unknown:
        extra_notes: list[str] = []
        extra, dropped = checked_types(tolerant_flags(unknown, extra_notes))
        args.update(extra)
        flags = [t for t in unknown if t.startswith("--")]
        more = dropped + [f"flags the {name} does not know, read by the tolerant fallback: "
                          f"{', '.join(flags) or unknown}"] + extra_notes
    return done(args, name, more)


def parse_launch(text: str, use_sglang: bool = True) -> ParsedLaunch:
    """The speculative command of a launch text (and a baseline command when there is one)."""
    lines = command_lines(text)
    found = [parse_command(c, use_sglang) for c in lines[:MAX_COMMANDS]]
    if not found:
        return ParsedLaunch(None, None, ["no command line with flags in the launch text"])
    spec = next((c for c in found if c.speculative), None)
    base = next((c for c in found if not c.speculative and c is not spec), None)
    notes = []
    if spec is None:
        notes.append(f"{len(found)} command(s), none with --speculative-algorithm: no speculative command")
    if len(found) > 2:
        notes.append(f"{len(lines)} commands: the first speculative one and the first other one are used"
                     + (f" (of the first {MAX_COMMANDS})" if len(lines) > MAX_COMMANDS else ""))
    return ParsedLaunch(spec, base, notes)


@functools.lru_cache(maxsize=16)
def sglang_default_flags(architecture: str, algorithm: str = "EAGLE3") -> tuple[Optional[tuple[int, int, int]], str]:
    """(steps, topk, draft tokens) the installed sglang picks when a launch names none of them
    (``server_args.auto_choose_speculative_params``, called with the target's architecture), and where from."""
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            from sglang.srt.server_args import auto_choose_speculative_params  # heavy: imports torch
            from sglang.version import __version__
    except Exception as exc:  # noqa: BLE001 -- any import failure means: no sglang defaults here
        return None, f"speculative flags unknown and sglang is not importable here ({type(exc).__name__})"
    hf_config = SimpleNamespace(architectures=[architecture])
    fake = SimpleNamespace(speculative_algorithm=algorithm, get_model_config=lambda: SimpleNamespace(hf_config=hf_config))
    try:
        steps, topk, tokens = auto_choose_speculative_params(fake)
    except Exception as exc:  # noqa: BLE001 -- another release's function may read more than the architecture
        return None, f"speculative flags unknown: sglang {__version__}'s defaults need more ({type(exc).__name__})"
    return (int(steps), int(topk), int(tokens)), (
        f"speculative flags assumed: sglang {__version__}'s defaults for {architecture} when a launch names none "
        f"(server_args.auto_choose_speculative_params): {steps} steps, topk {topk}, {tokens} draft tokens")
