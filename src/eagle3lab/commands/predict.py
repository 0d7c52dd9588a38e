"""``python -m eagle3lab predict``: "should I turn on EAGLE-3?" for a model, a GPU and a batch range.

Argument parsing errors are one line (no usage dump), like every other eagle3lab error.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from typing import Any, Callable

from eagle3lab.costmodel.curve import parse_curve
from eagle3lab.costmodel.engine import ENGINES
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.costmodel.gpus import HARDWARE, SPEC_KEYS, parse_gpu_spec
from eagle3lab.costmodel.hub import stored_names
from eagle3lab.errors import PerfModelError

# Upper bounds of the numeric flags: far above any real launch, so a value beyond one is a typo (or an overflow
# probe), refused at once instead of modelled as if real. Each failure names the flag, the value and the range.
MAX_BATCH = 16_384  # requests decoding at once on one deployment: past every engine's running-request cap
MAX_STEPS = 32  # --speculative-num-steps: EAGLE-3 launches use 1 to 10 draft steps
MAX_TOPK = 64  # --speculative-eagle-topk: launches use 1 to 10 candidates per step
MAX_DRAFT_TOKENS = 1_024  # --speculative-num-draft-tokens: tokens verified per request per cycle
MAX_CONTEXT = 10_000_000  # tokens cached per request: the longest published context window (10M)
MAX_TP = 1_024  # GPUs of one tensor-parallel group (and of a decode-context-parallel one)
MAX_TOK_S = 1_000_000.0  # a measured plain single-stream rate: far above any GPU's
MAX_ALLREDUCE_BYTES = 1024**3  # a custom all-reduce cut-off: engines use kilobytes to a few megabytes


def whole_number(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse ``type=``: an integer in [low, high], else one line (argparse adds the flag) saying what to pass."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: '{text}'; pass a whole number of {what} from {low} "
                                             f"to {high:,}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range; pass a whole number of {what} from {low} to "
                                             f"{high:,}")
        return value

    return parse


def finite_number(low: float, high: float, what: str, low_open: bool = False) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number in [low, high] (or (low, high]), else one line saying what to pass.

    Why: ``float()`` takes 'nan' and 'inf', which the model would carry into every point (a nan break-even, a
    division by zero) instead of refusing."""
    bounds = f"{'above' if low_open else 'from'} {low:g} {'and at most' if low_open else 'to'} {high:,.0f}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid float value: '{text}'; pass a number of {what} "
                                             f"{bounds}") from None
        if not math.isfinite(value) or value > high or (value <= low if low_open else value < low):
            raise argparse.ArgumentTypeError(f"{text} is not a usable value; pass a finite number of {what} "
                                             f"{bounds}")
        return value

    return parse


def parse_batches(text: str) -> list[int]:
    """'1,2,4,8' -> [1, 2, 4, 8]; anything else is one clear error."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise PerfModelError(f"--batch expects comma-separated integers such as 1,2,4,8, got '{text}'", parameter="batch",
                             value=text) from None
    if not values or min(values) < 1:
        raise PerfModelError(f"--batch needs batch sizes >= 1, got '{text}'", parameter="batch", value=text)
    if max(values) > MAX_BATCH:
        raise PerfModelError(f"--batch: {max(values)} is above the largest batch modelled ({MAX_BATCH:,} requests "
                             f"decoding at once); pass batch sizes from 1 to {MAX_BATCH:,}", parameter="batch",
                             value=text, problem="out_of_range")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True,
                        help="the target: a config.json (file or model folder), a stored config name "
                             f"({', '.join(sorted(stored_names().values()))}), or a Hugging Face hub id such as "
                             "Qwen/Qwen3-235B-A22B (config.json only, via huggingface_hub: HF_ENDPOINT, HF_TOKEN)")
    gpu = parser.add_mutually_exclusive_group(required=True)
    gpu.add_argument("--hardware", help=f"GPU preset: {', '.join(sorted(HARDWARE))}")
    gpu.add_argument("--gpu", help="a GPU by its datasheet: " + ", ".join(f"{k}=<{v}>" for k, v in SPEC_KEYS.items()))
    parser.add_argument("--tp", type=whole_number(1, MAX_TP, "GPUs"), default=None,
                        help="tensor-parallel size: it must split the model's attention heads evenly (default: the "
                             "--gpu spec's count)")
    parser.add_argument("--steps", type=whole_number(1, MAX_STEPS, "draft steps"), required=True,
                        help=f"--speculative-num-steps (1 to {MAX_STEPS})")
    parser.add_argument("--topk", type=whole_number(1, MAX_TOPK, "candidates per step"), required=True,
                        help=f"--speculative-eagle-topk (1 to {MAX_TOPK})")
    parser.add_argument("--draft-tokens", type=whole_number(1, MAX_DRAFT_TOKENS, "draft tokens"), required=True,
                        help=f"--speculative-num-draft-tokens (1 to {MAX_DRAFT_TOKENS:,})")
    parser.add_argument("--accept", type=finite_number(1, MAX_STEPS + 1, "tokens per verify (at most --steps + 1)"), required=True,
                        help="acceptance length: tokens emitted per verify (sglang's spec_accept_length), from 1 "
                             "to --steps + 1")
    parser.add_argument("--context", type=finite_number(0, MAX_CONTEXT, "tokens"), required=True,
                        help=f"mean tokens cached per request while decoding (0 to {MAX_CONTEXT:,})")
    parser.add_argument("--batch", required=True,
                        help=f"batch sizes, comma-separated, e.g. 1,2,4,8,16 (each 1 to {MAX_BATCH:,})")
    calib = parser.add_mutually_exclusive_group()
    calib.add_argument("--baseline-tok-s", type=finite_number(0, MAX_TOK_S, "tok/s", low_open=True), default=None,
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
    parser.add_argument("--dcp", type=whole_number(1, MAX_TP, "GPUs"), default=1,
                        help="decode context parallel size (not modelled: noted)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


ATTENTION_BACKENDS = {"default": {}, "triton_mla": {"verify_kv_per_query": True}}


def parse_size(text: str) -> float:
    """'56KB' / '8MiB' / '57344' -> bytes; one clear error otherwise."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kKmM]i?[bB]?)?\s*", text)
    if not match:
        raise PerfModelError(f"--pcie-custom-allreduce expects a size such as 56KB, got '{text}'",
                             parameter="pcie_custom_allreduce", value=text, problem="unparsable")
    unit = (match.group(2) or "").lower()
    size = float(match.group(1)) * (1024 if unit.startswith("k") else 1024**2 if unit.startswith("m") else 1)
    if not size <= MAX_ALLREDUCE_BYTES:  # also inf: a digit string too long for a float
        raise PerfModelError(f"--pcie-custom-allreduce: {text.strip()} is above {MAX_ALLREDUCE_BYTES // 1024**2:,} MB; "
                             "pass the engine's cut-off, such as 56KB", parameter="pcie_custom_allreduce", value=text,
                             problem="out_of_range")
    return size


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Engine fields the launch's options set."""
    options: dict[str, Any] = dict(ATTENTION_BACKENDS[args.attention_backend or "default"])
    if args.pcie_custom_allreduce:
        size, _, rows = args.pcie_custom_allreduce.partition(",")
        options.update(custom_allreduce="nvlink+pcie", custom_allreduce_max_bytes=parse_size(size))
        if rows.strip():
            if not re.fullmatch(r"[0-9]{1,9}", rows.strip()) or int(rows) > MAX_DRAFT_TOKENS * MAX_BATCH:
                raise PerfModelError(f"--pcie-custom-allreduce: ROWS must be an integer from 0 to "
                                     f"{MAX_DRAFT_TOKENS * MAX_BATCH:,}, got '{rows}'",
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
    if args.baseline_curve and max(p.batch for p in parse_curve(args.baseline_curve)) > MAX_BATCH:
        raise PerfModelError(f"--baseline-curve: a batch above {MAX_BATCH:,} in '{args.baseline_curve}'; pass measured "
                             f"batch sizes from 1 to {MAX_BATCH:,}", parameter="baseline_curve",
                             value=args.baseline_curve, problem="out_of_range")
    hardware = args.hardware or args.gpu
    tp = args.tp
    if tp is None:
        count = parse_gpu_spec(args.gpu)[1] if args.gpu else None
        if count is None:
            raise PerfModelError("--tp is required (or give count=N in --gpu)", parameter="tp", problem="missing")
        tp = count
    if not 1 <= tp <= MAX_TP:
        raise PerfModelError(f"--gpu count={tp} is out of range; pass a count from 1 to {MAX_TP:,} (or --tp)",
                             parameter="tp", value=tp, problem="out_of_range")
    prediction = predict_from_config(args.config, hardware, tp, args.steps, args.topk, args.draft_tokens,
                                     args.accept, args.context, batches, args.baseline_tok_s, args.engine,
                                     draft_config=args.draft_config, baseline_curve=args.baseline_curve,
                                     kv_cache_dtype=args.kv_cache_dtype, engine_options=engine_options(args),
                                     dcp=args.dcp)
    if args.json:
        print(json.dumps(prediction_json(prediction), indent=2))
    else:
        print(format_prediction(prediction))
