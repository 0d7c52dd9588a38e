"""``eagle3lab canary``: does a new engine release break EAGLE-3 for a model you serve? (``make canary``)

Prints each release's table (and writes it, with a JSON beside it, under ``--out``); exits 1 with one line per
class that regressed against the release before it, 2 with one line on bad input (nothing written then).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eagle3lab.canary.engines import ENGINES, PENDING
from eagle3lab.canary.run import SUMMARY, default_out, run_canary, summary

HELP = ("does a new engine release break EAGLE-3 for a model you serve? (static audit and preflight-model over the "
        "wrappers, from the wheels' source)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", action="append", choices=[*ENGINES, *PENDING], default=[],
                        help=f"engine to check (repeatable; default: every one the canary reads: {', '.join(ENGINES)})")
    parser.add_argument("--release", action="append", default=[], metavar="[ENGINE==]VERSION",
                        help="a release to check besides or instead of the newest (repeatable)")
    parser.add_argument("--releases", default="", metavar="'SPEC SPEC ...'",
                        help="releases as one blank-separated string (for CI inputs passed through the environment)")
    parser.add_argument("--newest", action="store_true",
                        help="also check each engine's newest release (the default when no release is given)")
    parser.add_argument("--against", default=None, metavar="VERSION",
                        help="compare with this release instead of the one before on the index (the index is not "
                             "asked then)")
    parser.add_argument("--from-record", action="store_true",
                        help="read rows from the release records the package ships (offline; sglang: the "
                             "incident's wrapper only; vLLM: every class its audits hold)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"folder for the JSON and markdown per release and {SUMMARY} (default: artifacts/canary)")
    parser.add_argument("--json", action="store_true", help="print the comparisons as JSON instead of the tables")


def run(args: argparse.Namespace) -> None:
    specs = [*args.release, *args.releases.split()]
    result = run_canary(args.engine, specs, args.newest, args.against, args.from_record, args.out)
    if args.json:
        print(json.dumps([c.to_dict() for c in result.comparisons], indent=2))
    else:
        print(summary(result), end="")
    print(f"wrote: {len(result.written)} files under {(args.out or default_out())}", file=sys.stderr)
    for line in result.regressions:
        print(line, file=sys.stderr)
    if result.regressions:
        raise SystemExit(1)
