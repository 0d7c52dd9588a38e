"""``eagle3lab layer-experiment``: the layer-convention experiment on the CPU miniature (issue 37, item 3).

Trains (once, cached) the second tiny drafter, then serves each convention x capture cell on the real sglang 0.5.9
CPU server and writes served acceptance with its 95% interval to a JSON record after every cell. ``--record``
writes the record the package ships (``bench/data/layer_experiment.<profile>.json``, read by the report's
appendix); without it the record goes to ``artifacts/``. About a minute per cell on 2 cores, plus a few minutes of
training on a cold cache.
"""

from __future__ import annotations

import argparse

from eagle3lab import runguard
from eagle3lab.bench import layer_cells
from eagle3lab.commands.common import add_profile_arguments, profile_of
from eagle3lab.notebook import layer_experiment
from eagle3lab.paths import repo_dir

HELP = "served acceptance of tiny drafters under each layer-id convention x each capture (CPU miniature)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--prompts", type=int, default=32,
                        help="measured prompts per cell (2-256; default 32), at concurrency 1")
    parser.add_argument("--record", action="store_true",
                        help="write the package's shipped record (bench/data/) instead of artifacts/")


def run(args: argparse.Namespace) -> None:
    profile = profile_of(args)
    layer_experiment.check_request(profile, args.prompts)
    out = layer_cells.record_path(profile.name, None if args.record else repo_dir("artifacts"))
    work = repo_dir("artifacts") / f"layer_experiment.{profile.name}"
    with runguard.run_lock("layer-experiment"):
        layer_experiment.run(profile, args.prompts, out, work, repo_dir("artifacts") / "logs")
    print(f"wrote: {out}")
