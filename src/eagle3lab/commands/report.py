"""``eagle3lab report``: the main job, 01 -> 02 -> 03, HTML, figures and REPORT.md."""

from __future__ import annotations

import argparse

from eagle3lab.commands.common import add_profile_arguments, notebook_parameters
from eagle3lab.pipeline import build_report



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--notebooks", nargs="*", help="notebook numbers or names (default: all)")
    parser.add_argument("--hide-code", action="store_true", help="also write HTML without code cells")
    parser.add_argument("--no-run", action="store_true", help="reuse executed notebooks and sidecars")


def run(args: argparse.Namespace) -> None:
    out = build_report(args.profile, run=not args.no_run, hide_code=args.hide_code,
                       notebooks=args.notebooks or None, parameters=notebook_parameters(args))
    for path in [*out.executed, *out.html, *out.figures, out.report_md]:
        print(f"wrote: {path}")
