"""``eagle3lab preflight``: every check of a deployment, without launching anything; exit 2 on the first problem."""

from __future__ import annotations

import argparse

from eagle3lab import preflight
from eagle3lab.commands.common import add_profile_arguments, profile_of
from eagle3lab.errors import PreflightFailed



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser, default="blackwell-8x")
    parser.add_argument("--json", action="store_true", help="print every check and its outcome as JSON")
    parser.add_argument("--quick", action="store_true", help="skip sglang's parser once a check has failed")


def run(args: argparse.Namespace) -> None:
    result = preflight.run_preflight(profile_of(args), quick=args.quick)
    preflight.save(result)
    print(preflight.as_json(result) if args.json else result.text())
    if not result.ok:
        raise PreflightFailed(result.problem_line(), check=result.failures[0].name, profile=result.profile,
                              failed=tuple(c.name for c in result.failures))
