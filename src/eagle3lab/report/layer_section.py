"""The layer-convention experiment as the report shows it (issue 37, item 3): the table of served acceptance per
convention x capture and one sentence on what each mismatch cost, from the record ``bench.layer_cells`` ships.

Why a module: the record is measured once (``python -m eagle3lab layer-experiment --record``), not by the
notebooks, so the report reads it beside the sidecars and prints only what it holds.
"""

from __future__ import annotations

from typing import Any, Optional

from eagle3lab.bench import layer_cells

OFFSET_TEXT = {0: "matched", -1: "one layer early", 1: "one layer late"}


def _cell_text(cell: Optional[dict[str, Any]]) -> str:
    if cell is None:
        return "not measured"
    text = f"{cell['accept_length']:.3f}"
    if cell.get("low") is not None:
        text += f" ({cell['low']:.3f}-{cell['high']:.3f})"
    return f"{text}, {OFFSET_TEXT.get(cell['offset'], str(cell['offset']))}"


def _paired(cost: dict[str, Any], record: dict[str, Any]) -> str:
    if cost.get("drop_low") is None:
        return ""
    return (f"; paired {record['bootstrap']['level_pct']}% interval of the loss {cost['drop_low']:.3f} to "
            f"{cost['drop_high']:.3f}")


def context(record: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """What the appendix and REPORT.md print; None without a record."""
    if not record:
        return None
    rows = [{"convention": row["convention"], "label": row["label"],
             "trained": (row[layer_cells.PLUS_ONE] or row[layer_cells.AS_GIVEN] or {}).get("trained_outputs"),
             "cells": [_cell_text(row[cap]) for cap in layer_cells.CAPTURES]}
            for row in layer_cells.table_rows(record)]
    costs = record.get("costs") or []
    sentence = None
    if costs:
        parts = [f"a drafter trained on the {c['convention']} convention loses {c['drop']:.3f} tokens per verify step "
                 f"({c['matched']:.3f} to {c['mismatched']:.3f}{_paired(c, record)}) when served the other capture"
                 for c in costs]
        sentence = (f"On the CPU miniature ({record['target_layers']}-layer tiny target, sglang {record['sglang']}, "
                    f"{record['date'][:10]}), {' and '.join(parts)} **[measured]**.")
    return {"record": record, "rows": rows, "captures": list(layer_cells.CAPTURES.values()),
            "sentence": sentence, "workload": record["workload"], "mixed": record["mixed"],
            "command": layer_cells.RECORD_COMMAND}
