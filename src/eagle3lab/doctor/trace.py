"""The installed sglang's start-up order of ``set_eagle3_layers_to_capture`` for the user's target, traced from
its source (the aux-layer rule's evidence)."""

from __future__ import annotations

from typing import Any, Optional

from eagle3lab.bench.diagnostics.evidence import Evidence
from eagle3lab.errors import Eagle3LabError
from eagle3lab.trace import audit
from eagle3lab.trace.sources import installed_source
from eagle3lab.trace.startup import StartupProfile


def capture_trace(ev: Evidence) -> tuple[Optional[list[dict[str, Any]]], str]:
    """The installed sglang's start-up order of ``set_eagle3_layers_to_capture`` for this target class, depth and
    drafter aux ids (``trace.audit.layer_table``, GPU start-up: CUDA graphs on), or why it was not traced."""
    algorithm = str(ev.arg("speculative_algorithm")[0] or "").upper()
    target = ev.target_config or {}
    text = {**target, **(target.get("text_config") or {})} if isinstance(target.get("text_config"), dict) else target
    eagle = (ev.drafter_config or {}).get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    archs = target.get("architectures") or []
    if algorithm != "EAGLE3" or not archs or not text.get("num_hidden_layers") or not ids:
        return None, "capture order not traced (needs EAGLE3, the target's architectures and depth, and the " \
                     "drafter's aux layer ids)"
    if ev.arg("disable_cuda_graph")[0] is True:
        return None, "capture order not traced: CUDA graphs are off"
    try:
        src = installed_source()
        table = audit.layer_table(src, str(archs[0]), int(text["num_hidden_layers"]), [int(i) for i in ids],
                                  StartupProfile.gpu())
    except (Eagle3LabError, KeyError, ValueError, TypeError, AttributeError) as exc:
        return None, f"capture order not traced: {type(exc).__name__}: {exc}"
    return [{**table, "profile": "gpu"}], (f"capture order traced on the installed sglang {src.version} for "
                                           f"{archs[0]} (the server's release may differ)")
