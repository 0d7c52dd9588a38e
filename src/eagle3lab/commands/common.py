"""What every subcommand shares: the profile arguments, ``--set`` overrides, one-line argument errors."""

from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn, Sequence

from eagle3lab.errors import ProfileError
from eagle3lab.runtime.profiles import Profile, load_profile, parse_override


def overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``key=value`` pairs, values parsed as YAML plain data (so ``port=30123`` is an int); one line otherwise."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ProfileError(f"--set expects key=value, got '{pair}'", source="override", value=pair,
                               problem="bad_override")
        result[key.strip()] = parse_override(key.strip(), value)
    return result


def add_profile_arguments(parser: argparse.ArgumentParser, default: str = "cpu") -> None:
    parser.add_argument("--profile", default=default, help=f"params/<profile>.yaml or a path (default: {default})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")


def profile_of(args: argparse.Namespace) -> Profile:
    """The profile named by ``--profile`` with every ``--set`` applied: resolved once per command."""
    return load_profile(args.profile, overrides=overrides(args.set))


def notebook_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """Papermill parameters for a run: the ``--set`` overrides, if any."""
    return {"overrides": overrides(args.set)} if args.set else {}


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report bad arguments as one line on stderr (exit status 2) instead of a usage dump."""

    def error(message: str) -> NoReturn:
        print(f"{parser.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)

    parser.error = error  # type: ignore[method-assign]
    return parser
