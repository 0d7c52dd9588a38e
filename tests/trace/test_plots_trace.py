"""Notebook 02's conformance matrix reads at 100%: no column header runs into its neighbour."""

from __future__ import annotations

import matplotlib.pyplot as plt

from eagle3lab.report.plots.trace import draw_conformance_matrix, wrap_name

MEMBERS = ["get_embed_and_head", "set_eagle3_layers_to_capture", "load_lm_head_from_target"]


def test_member_names_wrap_at_underscores_and_keep_every_character():
    wrapped = wrap_name("set_eagle3_layers_to_capture")
    assert wrapped.replace("\n", "") == "set_eagle3_layers_to_capture"
    assert all(len(line) <= 16 for line in wrapped.splitlines())
    assert wrap_name("short") == "short"


def test_no_two_column_headers_overlap():
    rows = [{"entry": f"Wrapper{i}ForConditionalGeneration", "missing": MEMBERS[:i % 3],
             "status": {m: ("missing" if j < i % 3 else "delegated") for j, m in enumerate(MEMBERS)}} for i in range(6)]
    fig = draw_conformance_matrix({"rows": rows, "members": MEMBERS, "sglang_version": "0.5.9"})
    renderer = fig.canvas.get_renderer()
    (ax,) = [a for a in fig.axes if a.get_xticklabels()]
    boxes = [label.get_window_extent(renderer) for label in ax.get_xticklabels()]
    for left, right in zip(boxes, boxes[1:]):
        assert left.x1 < right.x0, "two column headers overlap"
    title = ax.title.get_window_extent(renderer)
    assert all(title.y0 > box.y1 for box in boxes)  # the title sits above the headers
    plt.close(fig)
