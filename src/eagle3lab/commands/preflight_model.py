"""``eagle3lab preflight-model``: will an EAGLE-3 launch of this model crash on this sglang or vLLM release?"""

from __future__ import annotations

import argparse
import json

from eagle3lab.fix.preflight_model import drafter_inputs, preflight, read_architectures, text
from eagle3lab.trace import engine_audit
from eagle3lab.trace.vllm import preflight as vllm_preflight

HELP = ("will an EAGLE-3 launch of this model crash on this sglang or vLLM release? (from the engine's source, "
        "offline once cached)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--config", help="the model's config.json (or its folder)")
    what.add_argument("--arch", help="an architecture name, as in config.json's 'architectures'")
    parser.add_argument("--engine", choices=engine_audit.ENGINES, default="sglang",
                        help="the engine to check (default: sglang)")
    parser.add_argument("--release", default=None, metavar="VERSION",
                        help="the engine's release (sglang default: the installed one; vLLM: required)")
    parser.add_argument("--sglang", default=None, metavar="VERSION",
                        help="sglang release to check (the same as --engine sglang --release VERSION)")
    parser.add_argument("--draft-config", default=None,
                        help="sglang: the EAGLE-3 drafter's config.json (or folder): its aux layer ids, for the "
                             "capture-order check (the target's depth comes from --config)")
    parser.add_argument("--no-cuda-graph", action="store_true",
                        help="sglang: the launch passes --disable-cuda-graph (the capture-order defect needs graphs)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def run(args: argparse.Namespace) -> None:
    if args.engine == "vllm":
        run_vllm(args)
        return
    archs = read_architectures(args.config) if args.config else [args.arch]
    depth, ids = drafter_inputs(args.config, args.draft_config)
    answer = preflight(archs, args.sglang or args.release, depth=depth, drafter_ids=ids,
                       cuda_graphs=not args.no_cuda_graph)
    print(json.dumps(answer, indent=2) if args.json else text(answer))


def run_vllm(args: argparse.Namespace) -> None:
    config = vllm_preflight.read_config(args.config) if args.config else None
    archs = list(config["architectures"]) if config else [args.arch]
    model_type = vllm_preflight.text_model_type(config) if config else None
    audit = engine_audit.engine_audit("vllm", args.release)
    answer = vllm_preflight.answer(audit, archs, model_type)
    answer["fixed_in"] = vllm_preflight.fixed_in(engine_audit.vllm_audits(), archs, model_type)
    print(json.dumps(answer, indent=2) if args.json else vllm_preflight.text(answer))
