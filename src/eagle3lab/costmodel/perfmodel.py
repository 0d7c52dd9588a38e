"""The decode cost model's public face: "should I turn on EAGLE-3?" for any deployment.

Why a model: EAGLE-3 cannot run on a GPU here, and the incident reports only two numbers (63.6 tok/s single
stream, 2,370 tok/s peak). A stated, parameterised model explains why speculation did not pay on 8x PCIe GPUs
and says when it would. The physics lives in ``report.costmodel`` (one module per job); this module gathers what
callers use:

    dep = Deployment(target, drafter, hardware, tp, engine, context)          # what runs where
    dep = calibrate_baseline(dep, measured_single_stream_tok_s, "where")      # optional: fit the fixed overhead
    prediction = predict(dep, spec, accept_length, batches=[1, 8, 64])        # plain vs EAGLE-3 per batch size
    predict_from_config("config.json", "h100-sxm", tp=1, ...)                 # all of that from a config.json

``spec`` is the launch's own ``runtime.speculative.SpeculativeSpec`` (or anything with num_steps, eagle_topk,
num_draft_tokens and verify_tokens), so the model and the server read the speculative flags from one object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from eagle3lab.costmodel.arch import (  # noqa: F401  (re-exported)
    DRAFTERS,
    ModelArch,
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

def predict_from_config(config: str | Path | dict, hardware: str | Hardware, tp: int, steps: int, topk: int,
                        draft_tokens: int, accept_length: float, context: float, batches: Sequence[int],
                        baseline_tok_s: Optional[float] = None, engine: str | Engine = "sglang-0.5",
                        draft_vocab: Optional[int] = None, draft_config: str | Path | dict | None = None) -> Prediction:
    """Plain and EAGLE-3 throughput per batch size for a model given by its config.json, on a named GPU (or any
    ``Hardware``, such as this machine's ``presets.cpu_hardware()``).

    ``baseline_tok_s``, a measured single-stream plain rate, calibrates the fixed per-step overhead and nothing
    else; without it the engine's default constants stand. This is the one call for checking the model against a
    measured run: calibrate on its plain single-stream rate, compare the predicted speedups with the measured ones.
    """

    if isinstance(config, dict):
        cfg, source, name = config, "config dict", None
    else:
        cfg, source = load_config(config)
        path = Path(config)
        name = (path.parent.name if path.name == "config.json" else path.stem) if path.is_file() else \
            path.name if path.is_dir() else str(config)
    target = model_from_config(cfg, name, source)
    if draft_config is not None:
        dcfg, dsource = (draft_config, "draft config dict") if isinstance(draft_config, dict) else \
            load_config(draft_config)
        drafter = drafter_from_config(dcfg, dsource)
    else:
        drafter = eagle3_drafter(target, draft_vocab) if draft_vocab else eagle3_drafter(target)
    hw = hardware if isinstance(hardware, Hardware) else hardware_preset(hardware)
    # a named engine carries the orchestration per cycle and per draft step fitted on development sources and
    # frozen by the validation protocol (data/spec_validation.yaml); an Engine object is taken as given
    eng = engine if isinstance(engine, Engine) else frozen_engine(engine, load_dataset().protocol.current)
    dep = Deployment(target, drafter, hw, tp, eng, context)
    calibration = "none: default engine constants (no measured single-stream rate given)"
    if baseline_tok_s is not None:
        dep = calibrate_baseline(dep, baseline_tok_s, "--baseline-tok-s")
        calibration = f"kernel overhead fitted to the measured single-stream rate {baseline_tok_s:g} tok/s"
    spec = speculative_flags(steps, topk, draft_tokens)
    if eng.spec_cycle_extra_s or eng.spec_step_extra_s or eng.spec_tp_extra_s:
        calibration += (f"; orchestration {eng.spec_cycle_extra_s * 1e3:.2f} ms per cycle + "
                        f"{eng.spec_step_extra_s * 1e3:.2f} ms per draft step + "
                        f"{eng.spec_tp_extra_s * 1e3:.2f} ms per cycle per TP rank beyond the first "
                        f"({eng.sources['spec_cycle_extra_s']})")
    return predict(dep, spec, accept_length, batches, calibration)
