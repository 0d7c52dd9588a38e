"""``eagle3lab bench``'s own result (``bench.remote.RESULT_FILE``): one entry per arm and concurrency under
``points``, the workload's temperature, dataset and chat-template setting, and for an A/B the bootstrap interval
of each concurrency's speedup (kept in the note)."""

from __future__ import annotations

import json
from typing import Any, Callable

from eagle3lab.bench.diagnostics.evidence import BenchFigures
from eagle3lab.bench.remote import TOOL
from eagle3lab.doctor.readers.text import Reading, Row, as_float, as_int


def _row(point: Any, workload: dict[str, Any], label: str, n: int) -> Row | None:
    if not isinstance(point, dict) or point.get("arm") not in ("speculative", "baseline"):
        return None
    fig = BenchFigures(arm=point["arm"], concurrency=as_int(point.get("concurrency")) or None,
                       num_prompts=as_int(point.get("num_prompts")), completed=as_int(point.get("completed")),
                       failed=as_int(point.get("failed")), output_tok_s=as_float(point.get("output_tok_s")),
                       mean_input_len=as_float(point.get("mean_input_len")),
                       mean_output_len=as_float(point.get("mean_output_len")),
                       accept_length=as_float(point.get("accept_length")) if point["arm"] == "speculative" else None,
                       dataset=str(workload.get("dataset")) if workload.get("dataset") else None,
                       chat_template=workload.get("chat_template") if isinstance(workload.get("chat_template"), bool)
                       else None, temperature=as_float(workload.get("temperature")),
                       source=f"{label}: {TOOL} point {n} ({point.get('server', '?')})")
    return Row(fig)


def result_file(text: str, label: str) -> Reading:
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else None
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict) or data.get("tool") != TOOL:
        return Reading([], f"{TOOL} JSON")
    found_workload, found_points = data.get("workload"), data.get("points")
    workload: dict[str, Any] = found_workload if isinstance(found_workload, dict) else {}
    points: list[Any] = found_points if isinstance(found_points, list) else []
    rows = [r for n, p in enumerate(points, 1) if (r := _row(p, workload, label, n)) is not None]
    skipped = [f"{label}: {TOOL}: {len(points) - len(rows)} point(s) not readable"] if len(rows) < len(points) else []
    found_samples = data.get("interleaved")
    for sample in found_samples if isinstance(found_samples, list) else []:
        if not isinstance(sample, dict):
            continue
        speedup, low, high = (as_float(sample.get(k)) for k in ("speedup", "speedup_low", "speedup_high"))
        if speedup is not None and low is not None and high is not None:
            skipped.append(f"{label}: {TOOL} A/B at concurrency {as_int(sample.get('concurrency'))}: speedup "
                           f"{speedup:.2f}x, 95% interval over rounds [{low:.2f}, {high:.2f}]")
    return Reading(rows, f"{TOOL} JSON", skipped)


READERS: tuple[Callable[[str, str], Reading], ...] = (result_file,)
