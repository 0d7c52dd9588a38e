"""``python -m eagle3lab ...``: the command-line entry points.

Every ``Eagle3LabError`` becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

import yaml

from eagle3lab.errors import Eagle3LabError


def _overrides(pairs: Sequence[str]) -> dict:
    """``key=value`` pairs, values parsed as YAML (so ``port=30123`` is an int)."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise Eagle3LabError(f"--set expects key=value, got '{pair}'")
        result[key] = yaml.safe_load(value)
    return result


def cmd_run(args: argparse.Namespace) -> None:
    from eagle3lab.runbook import run_all

    parameters = {"overrides": _overrides(args.set)} if args.set else {}
    for path in run_all(args.profile, args.notebooks or None, parameters):
        print(f"executed: {path}")


def cmd_tiny_model(args: argparse.Namespace) -> None:
    from eagle3lab.deployment import resolve_models
    from eagle3lab.profiles import load_profile

    models = resolve_models(load_profile(args.profile))
    print(json.dumps({"target": models.target, "draft": models.draft, "cache_key": models.cache_key}, indent=2))


def cmd_harness(args: argparse.Namespace) -> None:
    from eagle3lab.cpu_harness import build_libcuda_stub

    print(f"stub libcuda: {build_libcuda_stub()}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eagle3lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute notebooks with papermill (default: all, cpu profile)")
    run.add_argument("--profile", default="cpu", help="params/<profile>.yaml (default: cpu)")
    run.add_argument("--notebooks", nargs="*", help="notebook numbers or names, e.g. 01 03")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    run.set_defaults(func=cmd_run)

    tiny = sub.add_parser("tiny-model", help="build (or reuse) the tiny Kimi-K2.5-shaped model and drafter")
    tiny.add_argument("--profile", default="cpu")
    tiny.set_defaults(func=cmd_tiny_model)

    harness = sub.add_parser("harness", help="build the CPU harness's stub libcuda")
    harness.set_defaults(func=cmd_harness)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except Eagle3LabError as exc:
        print(f"eagle3lab: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("eagle3lab: interrupted", file=sys.stderr)
        return 130
    return 0
