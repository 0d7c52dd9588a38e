"""Values the rules compute with, checked before any rule sees them: a server argument, launch flag or config field
that should be a whole number but is a word, a list or ``1.2.3`` is left out (one note each), and a rule that
still fails on a value nobody foresaw answers "unknown" for its own cause with a note, never a traceback.

Why: a log's ``server_args=ServerArgs(tp_size='abc')``, a hand-edited config (``"architectures": true``) or a
tolerantly read flag reach ``int(...)``, ``/`` and ``for ... in`` inside the rules, which trust sglang's types."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

from eagle3lab.bench.diagnostics.engine import RULES
from eagle3lab.bench.diagnostics.evidence import CAUSES, UNKNOWN, Evidence, Finding
from eagle3lab.doctor.readers.text import as_float

# sglang ServerArgs fields the rules and the ranking compute with, by their type there
INT_ARGS = ("tp_size", "dp_size", "pp_size", "cuda_graph_max_bs", "max_running_requests", "speculative_num_steps",
            "speculative_eagle_topk", "speculative_num_draft_tokens", "chunked_prefill_size", "max_total_tokens",
            "max_prefill_tokens", "context_length")
INT_LIST_ARGS = ("cuda_graph_bs",)
TEXT_ARGS = ("speculative_algorithm", "device", "speculative_draft_model_path", "model_path")
# config.json fields the rules and the cost model compute with
INT_CONFIG = ("num_hidden_layers", "hidden_size", "vocab_size", "draft_vocab_size", "intermediate_size",
              "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
              "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


def whole(value: Any) -> Optional[int]:
    """A whole number as sglang would hold it (``8``, ``8.0``, ``"8"``), else None (booleans, words, lists)."""
    number = as_float(value)
    return int(number) if number is not None and number == int(number) else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def checked_args(args: Optional[Mapping[str, Any]], label: str, notes: list[str]) -> Optional[dict[str, Any]]:
    """Server arguments (a log's server_args, a launch's flags) with ill-typed values left out, one note for all."""
    if args is None:
        return None
    out, dropped = dict(args), []
    for key in INT_ARGS:
        value = out.get(key)
        if value is not None and whole(value) is None:
            dropped.append(f"{key}={_shown(out.pop(key))}")
        elif value is not None:
            out[key] = whole(value)
    for key in INT_LIST_ARGS:
        value = out.get(key)
        if value is None:
            continue
        items = [whole(v) for v in value] if isinstance(value, (list, tuple)) else [None]
        if None in items:
            dropped.append(f"{key}={_shown(out.pop(key))}")
        else:
            out[key] = items
    for key in TEXT_ARGS:
        value = out.get(key)
        if value is not None and not isinstance(value, str):
            dropped.append(f"{key}={_shown(out.pop(key))}")
    if dropped:
        notes.append(f"{label}: left out, not of the type sglang holds: {', '.join(dropped)}")
    return out


def checked_config(config: Optional[Mapping[str, Any]], label: str, notes: list[str]) -> Optional[dict[str, Any]]:
    """A config.json with ill-typed fields left out (its ``text_config`` and ``eagle_config`` too), one note."""
    if config is None:
        return None
    dropped: list[str] = []
    out = _config_fields(dict(config), "", dropped)
    for nested in ("text_config", "eagle_config"):
        value = out.get(nested)
        if value is not None and not isinstance(value, Mapping):
            dropped.append(f"{nested}={_shown(out.pop(nested))}")
        elif value is not None:
            out[nested] = _config_fields(dict(value), f"{nested}.", dropped)
    if dropped:
        notes.append(f"{label}: left out, not of the type a config.json holds: {', '.join(dropped)}")
    return out


def _config_fields(config: dict[str, Any], prefix: str, dropped: list[str]) -> dict[str, Any]:
    for key in INT_CONFIG:
        value = config.get(key)
        if value is not None and whole(value) is None:
            dropped.append(f"{prefix}{key}={_shown(config.pop(key))}")
    archs = config.get("architectures")
    if isinstance(archs, str):
        config["architectures"] = [archs]
    elif archs is not None and not (isinstance(archs, (list, tuple)) and all(isinstance(a, str) for a in archs)):
        dropped.append(f"{prefix}architectures={_shown(config.pop('architectures'))}")
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    if ids is not None and not (isinstance(ids, (list, tuple)) and all(whole(i) is not None for i in ids)):
        dropped.append(f"{prefix}eagle_aux_hidden_state_layer_ids={_shown(config.pop('eagle_aux_hidden_state_layer_ids'))}")
    elif ids is not None:
        config["eagle_aux_hidden_state_layer_ids"] = [whole(i) for i in ids]
    return config


def guarded_diagnose(ev: Evidence, notes: list[str],
                     rules: Sequence[Callable[[Evidence], Finding]] = RULES) -> list[Finding]:
    """Every rule on the evidence (``engine.diagnose``), a rule that fails answering "unknown" for its cause."""
    findings = []
    for cause, rule in zip(CAUSES, rules):
        try:
            findings.append(rule(ev))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, RecursionError) as exc:
            notes.append(f"{cause}: the evidence held a value this rule cannot read ({type(exc).__name__}: "
                         f"{str(exc)[:120]}); answered unknown")
            findings.append(Finding(cause, UNKNOWN, f"could not be decided: a value in the evidence is unreadable "
                                                    f"({type(exc).__name__})", ""))
    return findings
