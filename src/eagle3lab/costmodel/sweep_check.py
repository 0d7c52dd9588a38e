"""The model on the rtx6kpro Kimi-K2.6 sweeps: the public measurements nearest to the incident (issue 36).

Each cell (one concurrency, one context, DCP 1 or 8 of the v4 page) is predicted the way a user would: the target is
the stored Kimi-K2.5 config (Kimi-K2.6 is the same architecture), TP 8 on the RTX PRO 6000 preset, the engine vLLM
0.19-class (the page's May-2026 build: async scheduling, zero-bubble speculation), the launch's own options from the
page's start script, each context calibrated on its own published single-stream plain rate, and the cell's published
acceptance rate as 1 + 3 x rate. Nothing is fitted to these cells; the model's structure was revised while looking at
them, so every figure here is development data (fit quality), never a validation.
"""

from __future__ import annotations

from typing import Any, Optional

from eagle3lab.costmodel.arch import eagle3_drafter
from eagle3lab.costmodel.cycle import Deployment, plain_step, spec_cycle
from eagle3lab.costmodel.engine import Engine
from eagle3lab.costmodel.freeze import current_engine
from eagle3lab.costmodel.gpus import hardware_preset
from eagle3lab.costmodel.perfmodel import with_kv_dtype
from eagle3lab.costmodel.predict import calibrate_baseline
from eagle3lab.costmodel.presets import kimi_k25, speculative_flags
from eagle3lab.costmodel.public_sweeps import Cell, accept_length, load_sweeps

PAGE = "k26-v4"
ROLE = "development (fit quality): the sweep was seen while the model was revised; nothing is fitted to it"
_LAUNCH = ("https://github.com/local-inference-lab/rtx6kpro/blob/6fbbc0969318cce47e3c1cfa2fe117f4951f42c6/models/"
           "kimi-k26-v4.md")
# the page's start script (run-kimi-k26-v4): the options that change the model's inputs, each with its line
LAUNCH_OPTIONS: dict[str, tuple[Any, str]] = {
    "custom_allreduce": ("nvlink+pcie", f"VLLM_ENABLE_PCIE_ALLREDUCE=1, {_LAUNCH}#L94"),
    "custom_allreduce_max_bytes": (56 * 1024, f"VLLM_CPP_AR_1STAGE_NCCL_CUTOFF=56KB, {_LAUNCH}#L96"),
    "custom_allreduce_any_size_rows": (8, f"VLLM_CPP_AR_IGNORE_CUTOFF_MAX_ROWS=8, {_LAUNCH}#L97"),
    "verify_kv_per_query": (True, f"ATTENTION_BACKEND=TRITON_MLA, {_LAUNCH}#L114: the Triton decode kernel runs each "
                                  "verify query token as its own request (the same repository's "
                                  "models/kimi-k26-mtp-long-ctx-wip/README.md, Phase 1)"),
}
KV_CACHE_DTYPE = ("fp8", f"KV_CACHE_DTYPE=fp8, {_LAUNCH}#L113")
ENGINE = ("vllm-0.19", f"vLLM upstream base f887aa1a (May 2026), {_LAUNCH}#L28: after v0.19's zero-bubble async "
                       "speculation")
NUM_SPECULATIVE_TOKENS = 3


def sweep_engine() -> Engine:
    """The engine preset with the page's launch options applied, each with its line as the source."""
    engine = current_engine(ENGINE[0])
    for field, (value, source) in LAUNCH_OPTIONS.items():
        engine = engine.with_(source, **{field: value})
    return engine


def cells(dcp: int) -> list[Cell]:
    """The page's paired cells with a published acceptance at this DCP size."""
    return [c for c in load_sweeps().cells(PAGE, dcp) if c.acceptance_rate is not None]


def predict_cells(dcp: int) -> list[dict[str, Any]]:
    """One row per cell: published and predicted speedup and plain rate, the acceptance used, the calibration."""
    sweeps = load_sweeps()
    page = sweeps.page(PAGE)
    target = with_kv_dtype(kimi_k25(), KV_CACHE_DTYPE[0])
    drafter = eagle3_drafter(target)
    hw, engine = hardware_preset("rtx-pro-6000-blackwell"), sweep_engine()
    spec = speculative_flags(page.num_speculative_tokens, 1, page.num_speculative_tokens + 1)
    chosen = cells(dcp)
    single = {c.context_tokens: c for c in chosen if c.concurrency == 1}
    rows = []
    for c in chosen:
        base = single.get(c.context_tokens)
        if base is None or base.no_spec_tok_s is None:
            continue
        dep = Deployment(target, drafter, hw, 8, engine, float(c.context_tokens))
        dep = calibrate_baseline(dep, base.no_spec_tok_s, f"{base.id} (published single-stream plain rate)")
        accept = accept_length(c, page.num_speculative_tokens)
        assert accept is not None and c.speedup is not None and c.no_spec_tok_s is not None
        step, cycle = plain_step(dep, c.concurrency), spec_cycle(dep, spec, c.concurrency)
        rows.append({"id": c.id, "url": c.url, "dcp": c.dcp, "context": c.context, "context_tokens": c.context_tokens,
                     "concurrency": c.concurrency, "accept_length": accept, "published_speedup": c.speedup,
                     "predicted_speedup": accept * step.total_s / cycle.total_s,
                     "published_plain_tok_s": c.no_spec_tok_s, "predicted_plain_tok_s": step.tok_s,
                     "calibrated_on": base.id, "cycle_ms": cycle.total_s * 1e3, "step_ms": step.total_s * 1e3})
    return rows


def dcp_note(dcp: int) -> Optional[str]:
    return None if dcp == 1 else (f"DCP {dcp}: decode context parallelism is not modelled (predicted as DCP 1, "
                                  "calibrated on the DCP's own single-stream plain rate)")
