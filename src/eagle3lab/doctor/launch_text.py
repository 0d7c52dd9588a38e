"""Launch commands as users write them, found in the text they paste: shell lines (``$ `` prompts, ``\\``
continuations, ``KEY=VALUE`` prefixes, ``bash -c "..."``), ``docker run ... python -m sglang.launch_server ...``
(its ``-e``/``--env`` settings kept), Kubernetes manifests (``command:`` and ``args:`` lists and ``env:``, read
with PyYAML, or item by item where the YAML is cut short), and SpecForge's ``benchmarks/bench_eagle3.py``, which
launches one server per ``--config-list`` entry (``bs,steps,topk,num_draft``) with ``--cuda-graph-max-bs bs
--max-running-requests bs`` and only the server flags it forwards (sgl-project/SpecForge, ``launch_sglang_server``).

Each command comes back as the launcher's own arguments, the environment set for it, and where it was found."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import yaml

LAUNCHERS = ("sglang.launch_server", "sglang serve", "launch_server", "vllm serve", "bench_eagle3.py")
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
MAX_DEPTH = 8  # nested "bash -c" / "sh -c" strings unwrapped at most this deep
SPECFORGE_KEPT = ("--model-path", "--model", "--speculative-draft-model-path", "--mem-fraction-static", "--tp-size",
                  "--tp", "--trust-remote-code", "--disable-radix-cache", "--ep-size", "--attention-backend",
                  "--quantization", "--dtype")
SPECFORGE_VALUELESS = ("--trust-remote-code", "--disable-radix-cache")


@dataclass
class CommandLine:
    """One launch: its arguments (after ``launch_server`` / ``serve``), the environment set for it, its origin."""

    text: str
    tokens: list[str]
    env: dict[str, str] = field(default_factory=dict)
    origin: str = "shell"
    notes: list[str] = field(default_factory=list)


def split(command: str) -> tuple[list[str], list[str]]:
    """Shell words; a command cut inside a quote is split on spaces, and the note says so."""
    try:
        return shlex.split(command, comments=True), []
    except ValueError as exc:
        return command.split(), [f"the command does not tokenise ({exc}); split on spaces"]


def _unwrap(tokens: list[str], depth: int = 0) -> list[str]:
    """``bash -c "python -m sglang.launch_server ..."``: the inner command's words, however deep (bounded)."""
    for i, token in enumerate(tokens):
        if depth < MAX_DEPTH and " " in token and any(launcher in token for launcher in LAUNCHERS):
            inner, _ = split(token)
            return tokens[:i] + _unwrap(inner, depth + 1) + tokens[i + 1:]
    return tokens


def _env_and_args(tokens: list[str]) -> tuple[dict[str, str], list[str], str]:
    """The environment (``-e K=V``, ``--env K=V``, ``K=V`` prefixes), the launcher's arguments, and the origin."""
    env: dict[str, str] = {}
    origin = "docker run" if "docker" in tokens[:3] or "podman" in tokens[:3] else "shell"
    start = None
    for i, token in enumerate(tokens):
        if token in ("-e", "--env") and i + 1 < len(tokens) and "=" in tokens[i + 1]:
            key, _, value = tokens[i + 1].partition("=")
            env[key] = value
        elif token.startswith("--env=") and "=" in token[6:]:
            key, _, value = token[6:].partition("=")
            env[key] = value
        elif ENV.match(token) and start is None:
            key, _, value = token.partition("=")
            env[key] = value
        if token in ("sglang.launch_server", "serve") or token.endswith("launch_server") or \
                token.endswith("bench_eagle3.py"):
            start = i + 1
            if token.endswith("bench_eagle3.py"):
                origin = "SpecForge bench_eagle3.py"
            break
    if start is None:
        start = next((i for i, t in enumerate(tokens) if t.startswith("--")), len(tokens))
    return env, tokens[start:], origin


def _specforge(tokens: list[str], env: dict[str, str], text: str) -> list[CommandLine]:
    """The servers bench_eagle3.py launches: one per --config-list entry, with the flags it forwards."""
    if "--skip-launch-server" in tokens:
        return []
    configs: list[str] = []
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name = token.split("=", 1)[0]
        if name == "--config-list":
            j = i + 1
            while j < len(tokens) and not tokens[j].startswith("--"):
                configs.append(tokens[j])
                j += 1
            i = j
            continue
        if name in SPECFORGE_KEPT:
            kept.append(token)
            if "=" not in token and name not in SPECFORGE_VALUELESS and i + 1 < len(tokens) and \
                    not tokens[i + 1].startswith("--"):
                kept.append(tokens[i + 1])
                i += 1
        i += 1
    out = []
    for config in configs or ["1,0,0,0", "1,3,1,4"]:  # bench_eagle3.py's default --config-list
        parts = config.split(",")
        if len(parts) != 4 or not all(p.strip().isdigit() for p in parts):
            continue
        bs, steps, topk, draft = (int(p) for p in parts)
        spec = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(steps), "--speculative-eagle-topk",
                str(topk), "--speculative-num-draft-tokens", str(draft)] if steps > 0 else []
        args = spec + kept + ["--cuda-graph-max-bs", str(bs),
                                      "--max-running-requests", str(bs)]
        if steps == 0:
            args = _without(args, "--speculative-draft-model-path")
        out.append(CommandLine(text, args, dict(env), f"SpecForge bench_eagle3.py config {config}",
                               [] if configs else ["bench_eagle3.py's default --config-list 1,0,0,0 1,3,1,4"]))
    return out


def _without(tokens: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for token in tokens:
        if skip:
            skip = False
            continue
        if token == flag:
            skip = True
            continue
        if token.startswith(flag + "="):
            continue
        out.append(token)
    return out


def _walk(node: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 64:
        return
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value, depth + 1)


def _strings(value: Any) -> Optional[list[str]]:
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return [str(v) for v in value]
    if isinstance(value, str):
        return [value]
    return None


def _manifest(text: str) -> list[CommandLine]:
    """Containers of a Kubernetes manifest (``command:`` + ``args:``, ``env:``), read with PyYAML."""
    try:
        documents = list(yaml.safe_load_all(text))
    except (yaml.YAMLError, RecursionError, ValueError):
        return []
    out = []
    for document in documents:
        for node in _walk(document):
            command, args = _strings(node.get("command")) or [], _strings(node.get("args")) or []
            words: list[str] = []
            for part in command + args:
                words.extend(split(part)[0] if " " in part and len(command + args) <= 3 else [part])
            if not any(w.startswith("--") for w in words):
                continue
            env = {str(e.get("name")): str(e.get("value")) for e in node.get("env") or []
                   if isinstance(e, dict) and e.get("name") is not None and e.get("value") is not None}
            found, rest, _ = _env_and_args(_unwrap(words))
            out.append(CommandLine(" ".join(words), rest, {**env, **found}, "Kubernetes manifest"))
    return out


def _item_list(text: str) -> Optional[CommandLine]:
    """A YAML ``args:`` list read item by item (``- --flag`` / ``- "value"``), for one cut short."""
    items = [line.strip()[2:].strip() for line in text.splitlines() if line.strip().startswith("- ")]
    if len([i for i in items if i.startswith("--")]) < 2:
        return None
    words = [i.strip("'\"") for i in items]
    env, rest, _ = _env_and_args(words)
    return CommandLine(" ".join(shlex.quote(w) for w in words), rest, env, "Kubernetes args list (read item by item)")


def command_lines(text: str) -> list[CommandLine]:
    """Every launch in a text (see the module docstring), in the order written."""
    if re.search(r"^\s*(?:- )?(?:args|command|containers):", text, re.MULTILINE):
        found = _manifest(text)
        if found:
            return found
        cut = _item_list(text)
        if cut is not None:
            return [cut]
    joined = re.sub(r"\\[ \t]*\r?\n", " ", text)
    out: list[CommandLine] = []
    for line in joined.splitlines():
        line = re.sub(r"^\s*(?:\$|>>>|#\s*\$)\s+", "", line).strip()
        if not line or line.startswith("#") or line.startswith("```"):
            continue
        if "--" not in line and not any(launcher in line for launcher in LAUNCHERS):
            continue
        words, notes = split(line)
        env, rest, origin = _env_and_args(_unwrap(words))
        if origin == "SpecForge bench_eagle3.py":
            out.extend(_specforge(rest, env, line))
            continue
        out.append(CommandLine(line, rest, env, origin, notes))
    return out
