"""A launch command line checked by sglang's own ``ServerArgs``, and the values sglang chose for a run.

Two levels: sglang's argparse parser (``ServerArgs.add_cli_args``) accepts the flags or names the bad one; then
``ServerArgs.from_cli_args`` runs sglang's own ``__post_init__``, which resolves every default it derives
(memory fraction, prefill chunk, CUDA-graph batch sizes, request caps for speculative decoding). The second level
reads the models' configs, so it runs only when they are on disk. Importing sglang costs seconds and must never
happen in a notebook kernel, so both run in a child process (``python -m eagle3lab.runtime.sglang_args``) with the
launch's own environment.

``chosen_from_log`` reads the same values from a server log, where sglang prints ``server_args=ServerArgs(...)``.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import logging
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from eagle3lab.childjson import ask_child, emit
from eagle3lab.errors import EnvironmentProblem

LAUNCH_MODULE = ("-m", "sglang.launch_server")
# The values sglang derives at start-up that decide memory and speculative behaviour.
CHOSEN_KEYS = ("mem_fraction_static", "chunked_prefill_size", "cuda_graph_max_bs", "max_running_requests",
               "max_total_tokens", "attention_backend", "disable_cuda_graph", "page_size", "context_length",
               "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "tp_size", "device", "moe_runner_backend",
               "disable_flashinfer_autotune", "quantization")


@dataclass
class ParsedLaunch:
    """What sglang's own parser said about one command line."""

    label: str
    parsed: bool  # sglang's argparse accepted every flag
    validated: bool | None  # ServerArgs.__post_init__ ran through (None: not attempted)
    error: str | None = None
    # ServerArgs.check_server_args() passed, the full check sglang's engine runs before any model code
    # (engine.py:1026 in 0.5.9); None: not attempted (not asked, or the command line failed earlier)
    checked: bool | None = None
    check_error: str | None = None
    skipped_because: str | None = None
    chosen: dict[str, Any] = field(default_factory=dict)  # sglang's resolved values (after __post_init__)
    warnings: list[str] = field(default_factory=list)  # what sglang logged while resolving them
    seconds: float = 0.0
    # sglang's own memory arithmetic for this launch (``sizing`` asked): the GPU memory its sizing saw (MiB), the
    # fraction ``_handle_gpu_memory_settings`` computed before ``adjust_mem_fraction_for_vlm`` scaled it for the
    # vision tower and after, and the KV cache's bytes per token from ``get_cell_size_per_token``
    sizing: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def launch_flags(argv: Sequence[str]) -> list[str]:
    """The flags after ``python -m sglang.launch_server``."""
    argv = list(argv)
    for i in range(len(argv) - 1):
        if (argv[i], argv[i + 1]) == LAUNCH_MODULE:
            return argv[i + 2:]
    return argv


def parse_launches(argvs: Mapping[str, Sequence[str]], env: Mapping[str, str] | None = None, *,
                   validate: bool = True, check: bool = True, python: str = sys.executable,
                   timeout_s: float = 300.0, sizing: bool = False,
                   gpu_memory_mib: float | None = None) -> dict[str, ParsedLaunch]:
    """Each labelled command line through sglang's parser in one child process (the launch's environment).

    ``check`` also runs ``ServerArgs.check_server_args()`` on each validated command line: the check sglang's
    engine runs at start-up (``engine.py:1026``) and ``from_cli_args`` never does, which holds, among others,
    the torch 2.9.1 / cuDNN refusal (``server_args.py:5263-5298``). ``env`` must be the launch's own environment,
    since that refusal reads ``SGLANG_DISABLE_CUDNN_CHECK``.

    ``sizing`` records sglang's own memory arithmetic for each validated launch (``ParsedLaunch.sizing``).
    ``gpu_memory_mib`` is the GPU memory sglang's sizing is given instead of asking ``nvidia-smi``
    (``get_device_memory_capacity``, ``server_args.py:730``): the memory of the GPUs a preflight found, or of GPUs
    it is told about; None lets sglang ask the machine, which off a GPU falls back to its 0.88."""
    request = json.dumps({"launches": {label: launch_flags(argv) for label, argv in argvs.items()},
                          "validate": validate, "check": check, "sizing": sizing, "gpu_memory_mib": gpu_memory_mib})
    answer = ask_child("eagle3lab.runtime.sglang_args", stdin=request, env={**os.environ, **(env or {})},
                       timeout_s=timeout_s, python=python)
    if answer.timed_out:
        raise EnvironmentProblem(f"sglang's argument parser did not answer within {timeout_s:.0f} s",
                                 package="sglang", problem="timeout")
    if not answer.ok:
        raise EnvironmentProblem(f"could not run sglang's argument parser: {answer.failure()}",
                                 package="sglang", problem="parser_failed")
    data = answer.payload
    return {label: ParsedLaunch(**value) for label, value in data.items()}


_SERVER_ARGS_LINE = re.compile(r"server_args=ServerArgs\((?P<body>.*?)(?:\)\s*)?$")
_FIELD = re.compile(r"(?:^|, )(?P<key>[a-z_][a-z0-9_]*)=(?P<value>'[^']*'|\"[^\"]*\"|\[[^\]]*\]|[^,()\[\]]*)")


def logged_server_args(log_text: str | None) -> dict[str, Any] | None:
    """Every field of the first ``server_args=ServerArgs(...)`` line sglang logs at start-up, as a dict (None: no
    such line). The repr is a Python call, so ``ast`` reads it whole; a line cut short (a log pasted into an issue,
    another release's fields) falls back to reading its ``key=value`` pairs one by one, literals only."""
    for line in (log_text or "").splitlines():
        match = _SERVER_ARGS_LINE.search(line)
        if not match:
            continue
        body = match["body"]
        try:
            call = ast.parse(f"f({body})", mode="eval").body
        except SyntaxError:
            call = None
        found: dict[str, Any] = {}
        if call is not None:
            for kw in getattr(call, "keywords", []):
                try:
                    found[kw.arg] = ast.literal_eval(kw.value)
                except (ValueError, SyntaxError, TypeError):
                    continue
            return found
        for field_match in _FIELD.finditer(body):
            value = _literal(field_match["value"].strip())
            if value != "":
                found[field_match["key"]] = value
        return found
    return None


def chosen_from_log(log_text: str, keys: Sequence[str] = CHOSEN_KEYS) -> dict[str, Any]:
    """The values in the ``server_args=ServerArgs(...)`` line sglang logs at start-up (the first one)."""
    found = logged_server_args(log_text) or {}
    return {key: found[key] for key in keys if key in found}


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def memory_rows(profile_value: float | None, logs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """For each labelled server log: who set ``mem_fraction_static`` and the value sglang ran with."""
    from pathlib import Path

    rows = []
    for label, path in logs.items():
        text = Path(path).read_text(encoding="utf-8", errors="replace") if Path(path).is_file() else ""
        rows.append({"launch": label, **memory_setting(profile_value, chosen_from_log(text), f"server log {path}")})
    return rows


def memory_setting(profile_value: float | None, chosen: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Who set ``mem_fraction_static`` for a run, and its value: the profile's, or sglang's own sizing."""
    return {"mem_fraction_static": chosen.get("mem_fraction_static"),
            "set_by": "profile" if profile_value is not None else "sglang",
            "source": source if chosen else f"{source} (no server_args line found)",
            "chunked_prefill_size": chosen.get("chunked_prefill_size"),
            "cuda_graph_max_bs": chosen.get("cuda_graph_max_bs"),
            "max_running_requests": chosen.get("max_running_requests")}


# ---------------------------------------------------------------------------------------------------------
# Child side: imports sglang


class _ParserError(Exception):
    """argparse's refusal of a command line, raised instead of its exit and caught in this module (never escapes):
    a private signal, not an error the user sees, so it is not in ``errors.py``."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ParserError(message)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("sglang"):
            self.messages.append(record.getMessage().strip())


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


def _parse_one(label: str, flags: list[str], validate: bool, check: bool = False, sizing: bool = False,
               gpu_memory_mib: float | None = None) -> ParsedLaunch:
    from sglang.srt.server_args import ServerArgs

    started = time.monotonic()
    parser = _Parser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    try:
        namespace = parser.parse_args(flags)
    except _ParserError as exc:
        return ParsedLaunch(label, parsed=False, validated=None, error=str(exc))
    if not validate:
        return ParsedLaunch(label, parsed=True, validated=None, skipped_because="validation not asked for")
    collect = _Collect()
    logging.getLogger().addHandler(collect)
    environ = dict(os.environ)  # __post_init__ exports some settings; the next command line must not see them
    recorded: dict[str, Any] = {}
    try:
        with _recording_sizing(recorded, gpu_memory_mib):
            args = ServerArgs.from_cli_args(namespace)
    except Exception as exc:  # noqa: BLE001 -- sglang's own validation error is the result
        message = (str(exc).strip().splitlines() or [""])[0]
        return ParsedLaunch(label, parsed=True, validated=False, error=f"{type(exc).__name__}: {message}",
                            warnings=collect.messages, seconds=round(time.monotonic() - started, 2))
    finally:
        logging.getLogger().removeHandler(collect)
        os.environ.clear()
        os.environ.update(environ)
    chosen = {key: _jsonable(getattr(args, key, None)) for key in CHOSEN_KEYS}
    checked, check_error = _full_check(args) if check else (None, None)
    if sizing:
        recorded.update(_kv_cell(args))
    return ParsedLaunch(label, parsed=True, validated=True, chosen=chosen, warnings=collect.messages,
                        seconds=round(time.monotonic() - started, 2), checked=checked, check_error=check_error,
                        sizing=recorded if sizing else {})


@contextlib.contextmanager
def _recording_sizing(recorded: dict[str, Any], gpu_memory_mib: float | None) -> Iterator[None]:
    """Run sglang's ``__post_init__`` as it is, recording what its memory arithmetic saw and chose: the GPU memory
    (``get_device_memory_capacity``, replaced by ``gpu_memory_mib`` when given) and the fraction before and after
    ``adjust_mem_fraction_for_vlm`` (``server_args.py:1068-1069``, ``:5483-5519``), the one sglang computed from
    its reserve for activations, CUDA graphs and the drafter (``:911-1066``) and the one it launches with."""
    import sglang.srt.server_args as module

    measure, adjust = module.get_device_memory_capacity, module.ServerArgs.adjust_mem_fraction_for_vlm

    def capacity(device: str | None = None) -> float | None:
        value = gpu_memory_mib if gpu_memory_mib is not None else measure(device)
        recorded["gpu_memory_mib"] = value
        return value

    def vlm(self: Any, model_config: Any) -> None:
        recorded["fraction_before_vlm"] = self.mem_fraction_static
        adjust(self, model_config)
        recorded["fraction_after_vlm"] = self.mem_fraction_static

    module.get_device_memory_capacity = capacity  # type: ignore[assignment]
    module.ServerArgs.adjust_mem_fraction_for_vlm = vlm  # type: ignore[method-assign]
    try:
        yield
    finally:
        module.get_device_memory_capacity = measure
        module.ServerArgs.adjust_mem_fraction_for_vlm = adjust  # type: ignore[method-assign]


def _kv_cell(args: Any) -> dict[str, Any]:
    """The target's KV cache bytes per token as sglang's ``ModelRunnerKVCacheMixin.get_cell_size_per_token``
    computes them (``model_runner_kv_cache_mixin.py:47-114``), on sglang's own ``ModelConfig`` of the launch; the
    runner it expects is stood in for by the three attributes the function reads (its cache dtype is the model's
    dtype when ``--kv-cache-dtype`` is auto, as ``ModelRunner`` sets it)."""
    import types

    import torch
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.model_executor.model_runner_kv_cache_mixin import ModelRunnerKVCacheMixin

    try:
        config = ModelConfig.from_server_args(args)
        kv_dtype = config.dtype if args.kv_cache_dtype == "auto" else getattr(torch, args.kv_cache_dtype, None)
        runner = types.SimpleNamespace(kv_cache_dtype=kv_dtype, model_config=config,
                                       use_mla_backend=config.attention_arch == AttentionArch.MLA)
        layers = config.num_hidden_layers
        cell = ModelRunnerKVCacheMixin.get_cell_size_per_token(runner, layers)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 -- reported, not raised: the launch itself was validated
        return {"kv_cell_error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}
    return {"kv_cell_bytes": int(cell), "kv_layers": int(layers), "kv_dtype": str(kv_dtype).removeprefix("torch."),
            "mla": bool(runner.use_mla_backend), "context_len": int(config.context_len)}


def _full_check(args: Any) -> tuple[bool, str | None]:
    """sglang's own ``check_server_args()`` on resolved ServerArgs: (passed, its first error line)."""
    environ = dict(os.environ)
    try:
        args.check_server_args()
    except Exception as exc:  # noqa: BLE001 -- sglang's refusal is the result
        lines = [line for line in _ANSI.sub("", str(exc)).splitlines() if line.strip().strip("-")]
        return False, f"{type(exc).__name__}: {' / '.join(line.strip() for line in lines[:3])}"
    finally:
        os.environ.clear()
        os.environ.update(environ)
    return True, None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def main() -> int:
    request = json.loads(sys.stdin.read())
    results = {label: _parse_one(label, list(flags), bool(request.get("validate", True)),
                                 bool(request.get("check", False)), bool(request.get("sizing", False)),
                                 request.get("gpu_memory_mib")).to_dict()
               for label, flags in request["launches"].items()}
    emit(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
