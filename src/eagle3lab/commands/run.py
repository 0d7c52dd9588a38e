"""``eagle3lab run``: execute notebooks with papermill on the project's kernel."""

from __future__ import annotations

import argparse

from eagle3lab.commands.common import add_profile_arguments, notebook_parameters
from eagle3lab.runbook import run_all



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--notebooks", nargs="*", help="notebook numbers or names, e.g. 01 03")


def run(args: argparse.Namespace) -> None:
    for path in run_all(args.profile, args.notebooks or None, notebook_parameters(args)):
        print(f"executed: {path}")
