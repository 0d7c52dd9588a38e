"""``eagle3lab evaluate-sealed``: the sealed held-out set's one evaluation, with the frozen constants.

Why a command of its own: the evaluation runs once; it refuses in one line (exit 2) if its result exists, if the
constants differ from the recorded freeze, or if the set no longer matches its seal (``costmodel.sealed_eval``).
"""

from __future__ import annotations

import argparse
import json

from eagle3lab.costmodel.sealed import SET
from eagle3lab.costmodel.sealed_eval import Paths, evaluate, summary_lines

HELP = "evaluate the sealed held-out set once with the frozen constants (refuses if already evaluated)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", default=SET, help=f"the sealed set (data/seals.yaml; default {SET})")
    parser.add_argument("--json", action="store_true", help="print the stored record instead of the summary lines")


def run(args: argparse.Namespace) -> None:
    paths = Paths.for_set(args.set)
    record = evaluate(paths)
    if args.json:
        print(json.dumps(record, indent=2))
        return
    print("\n".join(summary_lines(record)))
    print(f"wrote: {paths.result}")
