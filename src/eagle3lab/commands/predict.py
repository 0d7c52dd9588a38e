"""``python -m eagle3lab predict``: "should I turn on EAGLE-3?" for a model, a GPU and a batch range.

Argument parsing errors are one line (no usage dump), like every other eagle3lab error.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from eagle3lab.costmodel.engine import ENGINES
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.costmodel.gpus import HARDWARE, SPEC_KEYS, parse_gpu_spec
from eagle3lab.costmodel.hub import stored_names
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
                        help="the target: a config.json (file or model folder), a stored config name "
                             f"({', '.join(sorted(stored_names().values()))}), or a Hugging Face hub id such as "
                             "Qwen/Qwen3-235B-A22B (config.json only, via huggingface_hub: HF_ENDPOINT, HF_TOKEN)")
    gpu = parser.add_mutually_exclusive_group(required=True)
    gpu.add_argument("--hardware", help=f"GPU preset: {', '.join(sorted(HARDWARE))}")
    gpu.add_argument("--gpu", help="a GPU by its datasheet: " + ", ".join(f"{k}=<{v}>" for k, v in SPEC_KEYS.items()))
    parser.add_argument("--tp", type=int, default=None,
                        help="tensor-parallel size (default: the --gpu spec's count)")
    parser.add_argument("--steps", type=int, required=True, help="--speculative-num-steps")
    parser.add_argument("--topk", type=int, required=True, help="--speculative-eagle-topk")
    parser.add_argument("--draft-tokens", type=int, required=True, help="--speculative-num-draft-tokens")
    parser.add_argument("--accept", type=float, required=True,
                        help="acceptance length: tokens emitted per verify (sglang's spec_accept_length)")
    parser.add_argument("--context", type=float, required=True, help="mean tokens cached per request while decoding")
    parser.add_argument("--batch", required=True, help="batch sizes, comma-separated, e.g. 1,2,4,8,16")
    calib = parser.add_mutually_exclusive_group()
    calib.add_argument("--baseline-tok-s", type=float, default=None,
                       help="measured single-stream plain rate: calibrates the fixed per-step overhead only")
    calib.add_argument("--baseline-curve", default=None,
                       help="measured plain-decode curve as batch:tok/s pairs, e.g. 1:63.6,128:2370: the overhead "
                            "at the smallest batch, the router concentration (MoE) or achieved bandwidth at the largest")
    parser.add_argument("--draft-config", default=None,
                        help="the drafter's config.json (LlamaForCausalLMEagle3); default: the EAGLE-3 layout "
                             "SpecForge builds for the target")
    parser.add_argument("--engine", default="sglang-0.5", choices=sorted(ENGINES), help="serving engine model")
    parser.add_argument("--kv-cache-dtype", default=None, help="the launch's --kv-cache-dtype (bf16, fp8)")
    parser.add_argument("--attention-backend", default=None, choices=sorted(ATTENTION_BACKENDS),
                        help="triton_mla: vLLM's TRITON_MLA runs each verify query token as its own request")
    parser.add_argument("--pcie-custom-allreduce", default=None, metavar="BYTES[,ROWS]",
                        help="the engine's custom all-reduce runs on PCIe up to BYTES (e.g. 56KB; vLLM "
                             "VLLM_ENABLE_PCIE_ALLREDUCE with its cut-off), or at any size for at most ROWS tokens")
    parser.add_argument("--dcp", type=int, default=1, help="decode context parallel size (not modelled: noted)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


ATTENTION_BACKENDS = {"default": {}, "triton_mla": {"verify_kv_per_query": True}}


def parse_size(text: str) -> float:
    """'56KB' / '8MiB' / '57344' -> bytes; one clear error otherwise."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([kKmM]i?[bB]?)?\s*", text)
    if not match:
        raise PerfModelError(f"--pcie-custom-allreduce expects a size such as 56KB, got '{text}'",
                             parameter="pcie_custom_allreduce", value=text, problem="unparsable")
    unit = (match.group(2) or "").lower()
    return float(match.group(1)) * (1024 if unit.startswith("k") else 1024**2 if unit.startswith("m") else 1)


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Engine fields the launch's options set."""
    options: dict[str, Any] = dict(ATTENTION_BACKENDS[args.attention_backend or "default"])
    if args.pcie_custom_allreduce:
        size, _, rows = args.pcie_custom_allreduce.partition(",")
        options.update(custom_allreduce="nvlink+pcie", custom_allreduce_max_bytes=parse_size(size))
        if rows.strip():
            if not rows.strip().isdigit():
                raise PerfModelError(f"--pcie-custom-allreduce: ROWS must be an integer, got '{rows}'",
                                     parameter="pcie_custom_allreduce", value=args.pcie_custom_allreduce)
            options["custom_allreduce_any_size_rows"] = int(rows)
    return options


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
    lines = [*(f"understood: {u}" for u in p.understood), "",
             f"{p.model} on {p.tp}x {p.hardware}, engine {p.engine}, context {p.context:g} tokens",
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
    hardware = args.hardware or args.gpu
    tp = args.tp
    if tp is None:
        count = parse_gpu_spec(args.gpu)[1] if args.gpu else None
        if count is None:
            raise PerfModelError("--tp is required (or give count=N in --gpu)", parameter="tp", problem="missing")
        tp = count
    if tp < 1 or args.dcp < 1:
        raise PerfModelError(f"--tp and --dcp must be >= 1, got {tp} and {args.dcp}", parameter="tp", value=tp)
    prediction = predict_from_config(args.config, hardware, tp, args.steps, args.topk, args.draft_tokens,
                                     args.accept, args.context, batches, args.baseline_tok_s, args.engine,
                                     draft_config=args.draft_config, baseline_curve=args.baseline_curve,
                                     kv_cache_dtype=args.kv_cache_dtype, engine_options=engine_options(args),
                                     dcp=args.dcp)
    if args.json:
        print(json.dumps(prediction_json(prediction), indent=2))
    else:
        print(format_prediction(prediction))
