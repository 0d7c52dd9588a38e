"""The decode cost model's public face: "should I turn on EAGLE-3?" for any deployment.

Why a model: EAGLE-3 cannot run on a GPU here, and the incident reports only two numbers (63.6 tok/s single
stream, 2,370 tok/s peak). A stated, parameterised model explains why speculation did not pay on 8x PCIe GPUs
and says when it would. The physics lives in ``costmodel`` (one module per job); this module gathers what
callers use:

    dep = Deployment(target, drafter, hardware, tp, engine, context)          # what runs where
    dep = calibrate_baseline(dep, measured_single_stream_tok_s, "where")      # optional: fit the fixed overhead
    prediction = predict(dep, spec, accept_length, batches=[1, 8, 64])        # plain vs EAGLE-3 per batch size
    predict_from_config("config.json", "h100-sxm", tp=1, ...)                 # all of that from a config.json

``spec`` is the launch's own ``runtime.speculative.SpeculativeSpec`` (or anything with num_steps, eagle_topk,
num_draft_tokens and verify_tokens), so the model and the server read the speculative flags from one object.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from eagle3lab.errors import PerfModelError

from eagle3lab.costmodel.arch import (  # noqa: F401  (re-exported)
    DRAFTERS,
    ModelArch,
    check_tp,
    drafter_from_config,
    eagle1_drafter,
    eagle3_drafter,
    expected_distinct_experts,
    model_from_config,
)
from eagle3lab.costmodel.capacity import (  # noqa: F401
    DeploymentPrediction,
    kv_capacity_requests,
    predict_capacity_limited,
)
from eagle3lab.costmodel.cycle import (  # noqa: F401
    CycleTime,
    Deployment,
    SpeculativeFlags,
    StepTime,
    break_even_accept_length,
    max_accept_length,
    plain_step,
    plain_tok_s,
    spec_cycle,
    spec_tok_s,
    speedup,
    verify_tokens,
)
from eagle3lab.costmodel.engine import Engine, engine_preset  # noqa: F401
from eagle3lab.costmodel.forward import COMPONENTS, Pass, PassCost, forward_cost, gemm_efficiency  # noqa: F401
from eagle3lab.costmodel.hardware import Hardware  # noqa: F401
from eagle3lab.costmodel.predict import (  # noqa: F401
    PredictedPoint,
    Prediction,
    calibrate_accept_length,
    calibrate_baseline,
    calibrate_spec_extra,
    predict,
)
from eagle3lab.costmodel.curve import calibrate_curve, parse_curve
from eagle3lab.costmodel.freeze import current_engine
from eagle3lab.costmodel.gpus import is_spec
from eagle3lab.costmodel.hub import resolve_config
from eagle3lab.costmodel.understood import condition_notes, describe
from eagle3lab.costmodel.validation import (  # noqa: F401
    context_sensitivity,
    frozen_engine,
    load_dataset,
    validation_report,
    trend_table,
    validate,
    validation_points,
    validation_summary,
)

from eagle3lab.costmodel.presets import hardware_preset, load_config, speculative_flags

KV_DTYPES = {"bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "auto": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}


def with_kv_dtype(arch: ModelArch, kv_cache_dtype: Optional[str]) -> ModelArch:
    """The model with its KV cache stored in ``kv_cache_dtype`` (the launch's --kv-cache-dtype); None: as read."""
    if kv_cache_dtype is None:
        return arch
    key = kv_cache_dtype.lower()
    if key not in KV_DTYPES:
        raise PerfModelError(f"--kv-cache-dtype must be one of {', '.join(KV_DTYPES)}, got '{kv_cache_dtype}'",
                             parameter="kv_cache_dtype", value=kv_cache_dtype, problem="unknown")
    return replace(arch, storage=replace(arch.storage, kv=KV_DTYPES[key]))


def predict_from_config(config: str | Path | dict, hardware: str | Hardware, tp: int, steps: int, topk: int,
                        draft_tokens: int, accept_length: float, context: float, batches: Sequence[int],
                        baseline_tok_s: Optional[float] = None, engine: str | Engine = "sglang-0.5",
                        draft_vocab: Optional[int] = None, draft_config: str | Path | dict | None = None,
                        baseline_curve: Optional[str] = None, kv_cache_dtype: Optional[str] = None,
                        engine_options: Optional[Mapping[str, Any]] = None, dcp: int = 1) -> Prediction:
    """Plain and EAGLE-3 throughput per batch size for a model given by its config.json, a stored config name or a
    hub id (``hub.resolve_config``), on a GPU preset, datasheet numbers (``gpus.parse_gpu_spec``) or any
    ``Hardware``, with the engine's frozen constants (``freeze.current_engine``) and the launch's options.

    Calibration: ``baseline_tok_s`` (one measured single-stream plain rate) fits the per-step overhead;
    ``baseline_curve`` ("1:63.6,128:2370") fits it at the smallest batch and, at the largest, the router concentration
    of a MoE target or the achieved bandwidth (``curve.calibrate_curve``). Without either the engine's defaults stand.
    The prediction echoes what was understood and notes where the point lies outside the compared conditions.
    """

    if isinstance(config, dict):
        cfg, source, name = config, "config dict", None
    else:
        cfg, source, name = resolve_config(config)
    target = with_kv_dtype(model_from_config(cfg, name, source), kv_cache_dtype)
    if draft_config is not None:
        dcfg, dsource = (draft_config, "draft config dict") if isinstance(draft_config, dict) else \
            load_config(draft_config)
        drafter = drafter_from_config(dcfg, dsource)
    else:
        drafter = eagle3_drafter(target, draft_vocab) if draft_vocab else eagle3_drafter(target)
    check_tp(tp, target, drafter)
    preset = None if isinstance(hardware, Hardware) or is_spec(hardware) else hardware
    hw = hardware if isinstance(hardware, Hardware) else hardware_preset(hardware)
    # a named engine carries the frozen orchestration (data/constants.yaml); an Engine object is taken as given
    eng = engine if isinstance(engine, Engine) else current_engine(engine)
    if engine_options:
        eng = eng.with_("the launch's options (predict)", **engine_options)
    dep = Deployment(target, drafter, hw, tp, eng, context)
    calibration = "none: default engine constants (no measured plain rate given)"
    if baseline_tok_s is not None and baseline_curve is not None:
        raise PerfModelError("give either --baseline-tok-s or --baseline-curve, not both", parameter="baseline_curve",
                             problem="conflict")
    if baseline_tok_s is not None:
        dep = calibrate_baseline(dep, baseline_tok_s, "--baseline-tok-s")
        calibration = f"kernel overhead fitted to the measured single-stream rate {baseline_tok_s:g} tok/s"
    if baseline_curve is not None:
        fitted = calibrate_curve(dep, parse_curve(baseline_curve), "--baseline-curve")
        dep, calibration = fitted.deployment, fitted.description
    spec = speculative_flags(steps, topk, draft_tokens)
    if eng.spec_cycle_extra_s or eng.spec_step_extra_s or eng.spec_tp_extra_s:
        calibration += (f"; orchestration {eng.spec_cycle_extra_s * 1e3:.2f} ms per cycle + "
                        f"{eng.spec_step_extra_s * 1e3:.2f} ms per draft step + "
                        f"{eng.spec_tp_extra_s * 1e3:.2f} ms per cycle per TP rank beyond the first "
                        f"({eng.sources.get('spec_tp_extra_s') or eng.sources.get('spec_cycle_extra_s')})")
    prediction = predict(dep, spec, accept_length, batches, calibration)
    notes = condition_notes(hw, tp, batches, dcp, preset)
    if eng.spec_tp_extra_s and tp > 4:
        notes.append(f"the per-TP-rank orchestration ({eng.spec_tp_extra_s * 1e3:.2f} ms per rank beyond the first) "
                     f"was fitted on TP 1, 2 and 4 points and one TP-8 point; at TP {tp} it rests on that one point")
    return replace(prediction, understood=tuple(describe(dep.target, drafter, hw, tp, dep.engine)),
                   notes=prediction.notes + tuple(notes))
