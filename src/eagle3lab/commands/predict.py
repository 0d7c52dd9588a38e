"""``python -m eagle3lab predict``: "should I turn on EAGLE-3?" for a model, a GPU and a batch range.

Argument parsing errors are one line (no usage dump), like every other eagle3lab error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from eagle3lab.costmodel.engine import ENGINES
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.costmodel.presets import HARDWARE
from eagle3lab.errors import PerfModelError



def parse_batches(text: str) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]; anything else is one clear error."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise PerfModelError(f"--batch expects comma-separated integers such as 1,2,4,8, got '{text}'", parameter="batch",
                             value=text) from None
    if not values or min(values) < 1:
        raise PerfModelError(f"--batch needs batch sizes >= 1, got '{text}'", parameter="batch", value=text)
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help="the target's config.json (file or model folder), or a stored config name")
    parser.add_argument("--hardware", required=True, help=f"GPU preset: {', '.join(sorted(HARDWARE))}")
    parser.add_argument("--tp", type=int, required=True, help="tensor-parallel size")
    parser.add_argument("--steps", type=int, required=True, help="--speculative-num-steps")
    parser.add_argument("--topk", type=int, required=True, help="--speculative-eagle-topk")
    parser.add_argument("--draft-tokens", type=int, required=True, help="--speculative-num-draft-tokens")
    parser.add_argument("--accept", type=float, required=True,
                        help="acceptance length: tokens emitted per verify (sglang's spec_accept_length)")
    parser.add_argument("--context", type=float, required=True, help="mean tokens cached per request while decoding")
    parser.add_argument("--batch", required=True, help="batch sizes, comma-separated, e.g. 1,2,4,8,16")
    parser.add_argument("--baseline-tok-s", type=float, default=None,
                        help="measured single-stream plain rate: calibrates the fixed per-step overhead only")
    parser.add_argument("--draft-config", default=None,
                        help="the drafter's config.json (LlamaForCausalLMEagle3); default: the EAGLE-3 layout "
                             "SpecForge builds for the target")
    parser.add_argument("--engine", default="sglang-0.5", choices=sorted(ENGINES), help="serving engine model")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def prediction_json(prediction) -> dict[str, Any]:
    """The --json object: the inputs, a ``points`` list of {batch, baseline_tok_s, eagle3_tok_s, speedup}, and the
    break-even acceptance per batch."""
    data = prediction.to_dict()
    points = data.pop("points")
    data["points"] = [{k: p[k] for k in ("batch", "baseline_tok_s", "eagle3_tok_s", "speedup")} for p in points]
    data["break_even_accept_length"] = {str(p["batch"]): p["break_even_accept_length"] for p in points}
    data["kind"] = "modelled"
    return data


def format_prediction(prediction) -> str:
    """The human table: one row per batch size, then the break-even acceptance and what it means."""
    p = prediction
    lines = [f"{p.model} on {p.tp}x {p.hardware}, engine {p.engine}, context {p.context:g} tokens",
             f"EAGLE-3: {p.num_steps} steps, topk {p.eagle_topk}, {p.num_draft_tokens} draft tokens; acceptance "
             f"{p.accept_length:g} of at most {p.max_accept_length}",
             f"calibration: {p.calibration}",
             "",
             f"{'batch':>6} {'baseline tok/s':>15} {'EAGLE-3 tok/s':>14} {'speedup':>8} {'break-even accept':>18}"]
    for pt in p.points:
        lines.append(f"{pt.batch:>6} {pt.baseline_tok_s:>15,.1f} {pt.eagle3_tok_s:>14,.1f} {pt.speedup:>7.2f}x "
                     f"{pt.break_even_accept_length:>18.2f}")
    lines.append("")
    paying = [pt.batch for pt in p.points if pt.speedup > 1]
    losing = [pt.batch for pt in p.points if pt.break_even_accept_length > p.max_accept_length]
    lines.append(f"break-even acceptance: {p.points[0].break_even_accept_length:.2f} at batch {p.points[0].batch}, "
                 f"{p.points[-1].break_even_accept_length:.2f} at batch {p.points[-1].batch}; EAGLE-3 pays where the "
                 f"acceptance ({p.accept_length:g}) exceeds it: "
                 f"{'batches ' + ', '.join(map(str, paying)) if paying else 'at none of these batch sizes'}")
    if losing:
        lines.append(f"at batch {', '.join(map(str, losing))} no acceptance can pay (break-even above "
                     f"{p.max_accept_length})")
    lines.extend(f"note: {n}" for n in p.notes)
    lines.append("(modelled, not measured: see eagle3lab.costmodel.perfmodel for the equations and their sources)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> None:

    batches = parse_batches(args.batch)
    prediction = predict_from_config(args.config, args.hardware, args.tp, args.steps, args.topk, args.draft_tokens,
                                     args.accept, args.context, batches, args.baseline_tok_s, args.engine,
                                     draft_config=args.draft_config)
    if args.json:
        print(json.dumps(prediction_json(prediction), indent=2))
    else:
        print(format_prediction(prediction))
