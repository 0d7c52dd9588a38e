"""Figures of notebook 02, drawn from the sidecar data only (so they can be redrawn without re-tracing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from eagle3lab.atomic import save_figure_atomic  # noqa: E402

_COLORS = {"provided": "#4c9a2a", "inherited": "#7fbf5f", "delegated": "#2a6f9a", "proxied": "#8fb8d8",
           "unresolved": "#b59b3b", "missing": "#c0392b", "not required": "#f2f2f2"}


def wrap_name(name: str, width: int = 16) -> str:
    """A member name broken at its underscores into lines of at most ``width`` characters (a column header that
    does not run into its neighbour's)."""
    lines: list[str] = []
    for part in name.split("_"):
        if lines and len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += "_" + part
        else:
            lines.append(part if not lines else "_" + part)
    return "\n".join(lines)


def conformance_matrix(conf: dict[str, Any], path: Path) -> Path:
    """Wrappers (rows) by contract members (columns), coloured by status, saved to ``path``."""
    fig = draw_conformance_matrix(conf)
    try:
        save_figure_atomic(fig, path, dpi=110)
    finally:
        plt.close(fig)
    return path


def draw_conformance_matrix(conf: dict[str, Any]) -> Any:
    """The conformance matrix as a figure (``conformance_matrix`` saves it)."""
    rows, members = conf["rows"], conf["members"]
    if not rows or not members:
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, f"sglang {conf['sglang_version']}: no wrapper of an EAGLE-3-capable model, or no contract",
                ha="center", va="center", fontsize=9)
        return fig
    headers = [wrap_name(m) for m in members]
    lines = max(h.count("\n") + 1 for h in headers)
    # a column as wide as its longest header line at 8 pt (about 0.075 in a character), never narrower than its cells
    column_in = max(1.3, 0.075 * max(len(part) for h in headers for part in h.split("\n")) + 0.3)
    fig, ax = plt.subplots(figsize=(2.6 + column_in * len(members), 1.0 + 0.15 * lines + 0.28 * max(len(rows), 1)))
    names = sorted(rows, key=lambda r: (-len(r["missing"]), r["entry"]))
    for y, row in enumerate(names):
        for x, member in enumerate(members):
            status = row["status"][member]
            ax.add_patch(plt.Rectangle((x, y), 1, 1, color=_COLORS.get(status, "#999999"), ec="white"))
            ax.text(x + 0.5, y + 0.5, status, ha="center", va="center", fontsize=7, color="white")
    ax.set_xlim(0, len(members))
    ax.set_ylim(len(names), 0)
    ax.set_xticks([i + 0.5 for i in range(len(members))], headers, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(names))], [r["entry"] for r in names], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_title(f"EAGLE-3 contract of wrapper models, sglang {conf['sglang_version']}", fontsize=9,
                 pad=12 + 11 * lines)
    shown = sorted({row["status"][m] for row in names for m in members})
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=_COLORS.get(st, "#999999")) for st in shown], labels=shown,
              title="cell colour: status", fontsize=7, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1),
              frameon=False)
    fig.tight_layout()
    return fig


def bisect_timeline(bis: dict[str, Any], path: Path) -> Path:
    """Releases (x) by contract member (y): absent file, missing, or satisfied."""
    rows = bis["rows"]
    members = sorted({m for r in rows if r["present"] for m in r["status"]})
    fig, ax = plt.subplots(figsize=(1.0 + 0.45 * len(rows), 1.2 + 0.45 * max(len(members), 1)))
    for x, row in enumerate(rows):
        for y, member in enumerate(members):
            if not row["present"]:
                color, label = "#dddddd", ""
            else:
                status = row["status"].get(member, "not required")
                color = _COLORS.get(status, "#999999")
                label = "" if status == "not required" else status[0].upper()
            ax.add_patch(plt.Rectangle((x, y), 1, 1, color=color, ec="white"))
            ax.text(x + 0.5, y + 0.5, label, ha="center", va="center", fontsize=7, color="white")
    ax.set_xlim(0, len(rows))
    ax.set_ylim(len(members), 0)
    ax.set_xticks([i + 0.5 for i in range(len(rows))], [r["version"] for r in rows], rotation=70, fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(len(members))], members, fontsize=8)
    title = (
        f"{bis['entry_class']}: appears {bis['appeared']}, first fixed {bis['first_fixed']}\n"
        "grey: no such class; white: not in that release's contract; "
        "M missing, D delegated, I inherited, P provided"
    )
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, path, dpi=110)
    plt.close(fig)
    return path
