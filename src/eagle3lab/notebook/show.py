"""Small display helpers so notebook cells stay one call long."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

pd.set_option("display.max_colwidth", None)  # crash messages and call sites must be read whole


def table(data: Mapping[str, Any] | Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A mapping becomes a two-column table; a list of mappings becomes one row each."""
    if isinstance(data, Mapping):
        frame = pd.DataFrame({"value": [str(v) for v in data.values()]}, index=list(data.keys()))
        frame.index.name = columns[0] if columns else "item"
        return frame
    frame = pd.DataFrame(list(data), columns=list(columns) if columns else None)
    # a missing value is shown as a dash, never as NaN/None: the executed notebooks are read as the report's evidence
    return frame.astype(object).where(frame.notna(), "--")


def images(paths: Iterable[Path | str]) -> None:
    """Display saved PNG figures inline (as image data, so executed notebooks and their HTML carry them)."""
    from IPython.display import Image, display

    for path in paths:
        display(Image(filename=str(path)))


def markdown(text: str) -> Any:
    """Text with markdown emphasis and links, rendered (a cell's last value; executed notebooks carry it as
    text/markdown)."""
    from IPython.display import Markdown  # IPython only where a notebook displays; the glue imports without it

    return Markdown(text)
