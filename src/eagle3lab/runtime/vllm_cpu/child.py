"""Run inside the vLLM CPU venv (its own torch; eagle3lab is not importable there): one EAGLE-3 launch, or a plain
load that runs vLLM's own interface check on the loaded model. Prints one JSON line (prefixed ``EAGLE3LAB_RESULT``)
whatever happens; the parent reads the engine process's root cause from stderr.

    python child.py eagle3 TARGET DRAFT      # LLM(..., speculative_config=eagle3) and a short generate
    python child.py probe TARGET IDS         # LLM(...) plain, then supports_eagle3 + set_aux_hidden_state_layers
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

MARK = "EAGLE3LAB_RESULT "
PROMPT = [[5, 6, 7, 8, 9, 10, 11, 12]]  # token ids: the tiny model's tokenizer is synthetic
MAX_TOKENS = 8
MEMORY_SHARE = 0.1


def _llm(target: str, **extra: Any) -> Any:
    from vllm import LLM  # type: ignore[import-not-found]  # the venv's vLLM, not eagle3lab's environment

    # gpu_memory_utilization is the share of host memory the CPU backend reserves (from about v0.2x; older
    # releases size the cache by VLLM_CPU_KVCACHE_SPACE, set by the parent): a tiny model needs little of it.
    return LLM(model=target, max_model_len=256, trust_remote_code=True, enforce_eager=True,
               language_model_only=True, gpu_memory_utilization=MEMORY_SHARE, **extra)


def _generate(llm: Any) -> list[int]:
    from vllm import SamplingParams  # type: ignore[import-not-found]

    out = llm.generate(PROMPT, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0), use_tqdm=False)
    return list(out[0].outputs[0].token_ids)


def probe(worker: Any, layer_ids: tuple[int, ...]) -> dict[str, Any]:
    """On the worker: vLLM's own check on the loaded model, as its GPU runner makes it, then the setter."""
    from vllm.model_executor.models.interfaces import supports_eagle3  # type: ignore[import-not-found]

    model = worker.model_runner.model
    found: dict[str, Any] = {"class": type(model).__name__, "supports_eagle3": bool(supports_eagle3(model))}
    if found["supports_eagle3"]:
        model.set_aux_hidden_state_layers(layer_ids)
        inner = model.get_language_model() if hasattr(model, "get_language_model") else model
        holder = getattr(inner, "model", inner)
        found["aux_hidden_state_layers"] = list(getattr(holder, "aux_hidden_state_layers", ()))
        model.set_aux_hidden_state_layers(())  # plain generation afterwards expects no aux outputs
    return found


def main(argv: list[str]) -> dict[str, Any]:
    mode, target, extra = argv[0], argv[1], argv[2]
    started = time.perf_counter()
    result: dict[str, Any] = {"mode": mode}
    try:
        import vllm  # type: ignore[import-not-found]

        result["vllm"] = vllm.__version__
        if mode == "eagle3":
            llm = _llm(target, speculative_config={"method": "eagle3", "model": extra, "num_speculative_tokens": 3})
            result["loaded_s"] = round(time.perf_counter() - started, 2)
        else:
            llm = _llm(target)
            result["loaded_s"] = round(time.perf_counter() - started, 2)
            ids = tuple(int(i) for i in extra.split(","))
            result["probe"] = llm.collective_rpc(probe, args=(ids,))[0]
        result["tokens"] = _generate(llm)
        result["outcome"] = "served"
    except BaseException as exc:  # noqa: BLE001 - the failure is the result
        result["outcome"] = "failed"
        result["error"] = {"module": type(exc).__module__, "class": type(exc).__name__,
                           "message": str(exc).strip()[:2000],
                           "where": [f"{f.filename.rsplit('/vllm/', 1)[-1]}:{f.lineno}"
                                     for f in traceback.extract_tb(exc.__traceback__) if "/vllm/" in f.filename][-3:]}
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


if __name__ == "__main__":
    print(MARK + json.dumps(main(sys.argv[1:])), flush=True)
