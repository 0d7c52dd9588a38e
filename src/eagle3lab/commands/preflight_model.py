"""``eagle3lab preflight-model``: will an EAGLE-3 launch of this model crash on this sglang release?"""

from __future__ import annotations

import argparse
import json

from eagle3lab.fix.preflight_model import drafter_inputs, preflight, read_architectures, text

HELP = ("will an EAGLE-3 launch of this model crash on this sglang release? (from sglang's source, offline once "
        "cached)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", help="the model's config.json (or its folder)")
    what.add_argument("--arch", help="an architecture name, as in config.json's 'architectures'")
    parser.add_argument("--sglang", default=None, metavar="VERSION",
                        help="sglang release to check (default: the installed one)")
    parser.add_argument("--draft-config", default=None,
                        help="the EAGLE-3 drafter's config.json (or folder): its aux layer ids, for the capture-order "
                             "check (the target's depth comes from --config)")
    parser.add_argument("--no-cuda-graph", action="store_true",
                        help="the launch passes --disable-cuda-graph (the capture-order defect needs graphs)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def run(args: argparse.Namespace) -> None:
    archs = read_architectures(args.config) if args.config else [args.arch]
    depth, ids = drafter_inputs(args.config, args.draft_config)
    answer = preflight(archs, args.sglang, depth=depth, drafter_ids=ids, cuda_graphs=not args.no_cuda_graph)
    print(json.dumps(answer, indent=2) if args.json else text(answer))
