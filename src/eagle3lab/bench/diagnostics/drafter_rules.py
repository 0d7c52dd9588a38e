"""The rules on the drafter: its acceptance against the break-even, whether it was trained for this target, and
whether the layers it reads are the layers the target captures.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Optional
from eagle3lab.errors import DiagnosticsError
from eagle3lab.trace.contract import CaptureMode, RunCondition
from eagle3lab.bench.diagnostics.evidence import Evidence, Finding, NO, UNKNOWN, YES
from eagle3lab.bench.diagnostics.readings import make_finding, served_acceptance, text_config


def rule_low_acceptance(ev: Evidence) -> Finding:
    cause = "low_acceptance"
    fix = ("a drafter trained for this target and workload (SpecForge), fewer draft steps, or no speculation at "
           "this batch")
    served, where = served_acceptance(ev)
    if not served:
        return make_finding(cause, UNKNOWN, "no served acceptance length (server log 'accept len', benchmark or run records)",
                  fix)
    if any(not isinstance(a, (int, float)) or a < 0 for a in served):
        raise DiagnosticsError("acceptance: acceptance lengths must be non-negative numbers")
    mean = statistics.fmean(served)
    text = f"served acceptance {mean:.2f} ({where})"
    if ev.break_even is None:
        return make_finding(cause, UNKNOWN, f"{text}; no break-even to compare with (a control arm, or --hardware with "
                                  "--target-config for the cost model's)", fix)
    parts = [text, f"break-even {ev.break_even.text()}"]
    if ev.modelled_break_even is not None and ev.modelled_break_even is not ev.break_even:
        parts.append(f"modelled break-even beside it {ev.modelled_break_even.text()}")
    if ev.speedups:
        slow = {c: s for c, s in sorted(ev.speedups.items()) if s < 1}
        parts.append("measured speedup " + ", ".join(f"{s:.2f}x at {c}" for c, s in sorted(ev.speedups.items()))
                     + (f" ({ev.speedup_where})" if ev.speedup_where else "")
                     + ("; slower than plain decoding" if slow else ""))
    return make_finding(cause, YES if mean < ev.break_even.value else NO, "; ".join(parts), fix, ev.break_even.provenance)


def rule_drafter_target_mismatch(ev: Evidence) -> Finding:
    cause = "drafter_target_mismatch"
    fix = "serve the drafter trained for this exact target (same hidden size and vocabulary)"
    if not ev.drafter_config or not ev.target_config:
        return make_finding(cause, UNKNOWN, "needs both the drafter's and the target's config.json", fix)
    draft, target = text_config(ev.drafter_config), text_config(ev.target_config)
    checks = []
    for key, draft_key in (("hidden_size", "target_hidden_size"), ("hidden_size", "hidden_size"),
                           ("vocab_size", "vocab_size")):
        if draft_key in draft and key in target:
            checks.append((f"drafter {draft_key}={draft[draft_key]} vs target {key}={target[key]}",
                           draft[draft_key] == target[key]))
            if draft_key == "target_hidden_size":
                break
    checks = [c for i, c in enumerate(checks) if c[0] not in [x[0] for x in checks[:i]]]
    if not checks:
        return make_finding(cause, UNKNOWN, "the configs hold no hidden_size / vocab_size to compare", fix)
    bad = [text for text, ok in checks if not ok]
    return make_finding(cause, YES if bad else NO, "; ".join(bad or [text for text, _ in checks]), fix, "config")


def drafter_kind(ev: Evidence) -> tuple[Optional[str], str]:
    archs = (ev.drafter_config or {}).get("architectures") or []
    for arch in archs:
        if "eagle3" in str(arch).lower():
            return "EAGLE3", f"drafter config architectures {archs}"
    if isinstance((ev.drafter_config or {}).get("eagle_config"), Mapping):
        return "EAGLE3", "drafter config has an eagle_config (aux hidden-state layers)"
    for arch in archs:
        if "eagle" in str(arch).lower():
            return "EAGLE", f"drafter config architectures {archs}"
    path, _ = ev.arg("speculative_draft_model_path")
    if isinstance(path, str):
        name = path.rstrip("/").split("/")[-1].lower()
        if "eagle3" in name or "eagle-3" in name or "eagle_3" in name:
            return "EAGLE3", f"drafter path '{path}' names EAGLE-3"
    return None, ""


def _captured(result: Mapping[str, Any]) -> Optional[tuple[int, ...]]:
    for key, value in result.items():
        if "layers_to_capture" in key and isinstance(value, (list, tuple)):
            return tuple(int(v) for v in value)
    return None


def _table_verdict(table: Mapping[str, Any]) -> Optional[tuple[bool, str]]:
    """(inconsistent?, evidence) for one profile's table; None if no call ran in that profile."""
    rows = [r for r in table["rows"] if r.get("startup_rank") is not None and _captured(r.get("result") or {})]
    if not rows:
        return None
    rows.sort(key=lambda r: r["startup_rank"])
    graph_rows = [r for r in rows
                  if r.get("uses") == CaptureMode.CUDA_GRAPH or RunCondition.CUDA_GRAPHS_ON in r.get("runs_when", ())]
    eager = rows[-1]  # forwards after start-up see whatever the last call wrote
    parts = [f"profile {table.get('profile', '?')} (depth {table.get('depth', '?')})"]
    if graph_rows:
        graph = graph_rows[-1]  # a captured graph keeps the ids in effect when it was recorded
        parts.append(f"CUDA-graph replays use layers_to_capture={list(_captured(graph['result']) or ())} "
                     f"(set at {graph.get('where', '?')})")
        inconsistent = _captured(graph["result"]) != _captured(eager["result"])
    else:
        inconsistent = len({_captured(r["result"]) for r in rows}) > 1
    parts.append(f"eager forwards use layers_to_capture={list(_captured(eager['result']) or ())} "
                 f"(set last at {eager.get('where', '?')})")
    aux = list(table.get("aux_layer_ids") or ())
    if aux:
        parts.append(f"drafter aux ids {aux} -> layers_to_capture={[i + 1 for i in aux]} "
                     "(sglang captures id i at the input of layer i + 1)")
    return inconsistent, ", ".join(parts)


def layer_table_verdict(layer_table: Any) -> Optional[tuple[bool, str]]:
    """Notebook 02's layer-id table(s): every ``set_eagle3_layers_to_capture`` call in start-up order; True when
    graphs were recorded with other ids than eager forwards use. None when no call ran."""
    if layer_table is None:
        return None
    tables = layer_table if isinstance(layer_table, list) else [layer_table]
    if not all(isinstance(t, Mapping) and isinstance(t.get("rows"), list) for t in tables):
        raise DiagnosticsError("layer table: expected notebook 02's mapping with a 'rows' list (or a list of them)",
                               what="layer table", problem="no_rows")
    verdicts = [v for v in (_table_verdict(t) for t in tables) if v is not None]
    if not verdicts:
        return None
    return any(v[0] for v in verdicts), " | ".join(v[1] for v in verdicts)


def rule_aux_layers(ev: Evidence) -> Finding:
    cause = "aux_layer_ids_mismatch"
    fix = ("a release whose capture order is fixed (or the project's patch); drafter aux ids within the target's "
           "depth, as the drafter was trained")
    parts, applies = [], None
    verdict = layer_table_verdict(ev.layer_table)
    if verdict is not None:
        applies = verdict[0]
        parts.append(verdict[1])
    eagle = (ev.drafter_config or {}).get("eagle_config") or {}
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, Mapping) else None
    depth = text_config(ev.target_config).get("num_hidden_layers") if ev.target_config else None
    if ids is not None and depth is not None:
        out = [i for i in ids if not 0 <= int(i) < int(depth) - 1]
        parts.append(f"drafter eagle_aux_hidden_state_layer_ids {list(ids)} on a {depth}-layer target"
                     + (f": {out} outside the layers sglang can capture" if out else ""))
        applies = bool(out) or bool(applies)
    elif ids is None and ev.drafter_config is not None and depth is not None:
        parts.append(f"the drafter names no aux layer ids: sglang uses its default (2, n/2, n-3) for the "
                     f"{depth}-layer target")
        applies = bool(applies)
    if applies is None:
        return make_finding(cause, UNKNOWN, "needs the drafter's and target's configs, or the start-up trace's layer table", fix)
    return make_finding(cause, YES if applies else NO, "; ".join(parts), fix,
              "traced" if verdict is not None else "config")
