"""Executed notebooks -> standalone HTML for sharing, optionally without code cells.

Figures are embedded in the notebook outputs as PNG data, so the HTML is one self-contained file per notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from eagle3lab.atomic import write_text_atomic


def export_html(executed: Path, hide_code: bool = False, out_dir: Path | None = None) -> Path:
    """Write ``<name>.html`` (or ``<name>.nocode.html``) next to the executed notebook."""
    from nbconvert import HTMLExporter  # heavy third-party (seconds to import): only when HTML is written

    executed = Path(executed)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = hide_code
    exporter.exclude_input_prompt = hide_code
    exporter.exclude_output_prompt = hide_code
    body, _ = exporter.from_notebook_node(nbformat.read(executed, as_version=4))
    target = Path(out_dir or executed.parent) / f"{executed.stem}{'.nocode' if hide_code else ''}.html"
    return write_text_atomic(target, body)
