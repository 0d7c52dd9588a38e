"""``eagle3lab ci-summary``: the run's verdict table as markdown, for a CI job's summary (``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import argparse

from eagle3lab.ci_summary import markdown
from eagle3lab.runtime.profiles import load_profile

HELP = "the run's verdicts (crash, trace, patch, relaunch, speedup) as a markdown table, from the sidecars"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", default="cpu", help="the profile the notebooks ran on (default: cpu)")


def run(args: argparse.Namespace) -> None:
    print(markdown(load_profile(args.profile).name), end="")
