"""Progress bars for people, silence for machines.

Bars are plain-text tqdm (no widget dependency) and are off when ``CI`` is set or ``EAGLE3LAB_PROGRESS=0``;
the notebook runner sets the latter for papermill runs, where papermill's own per-cell bar already shows
progress and per-request bars would only fill the executed notebook with redraws.
"""

from __future__ import annotations

import os
from typing import Any

from tqdm.std import tqdm


def progress_enabled() -> bool:
    return not os.environ.get("CI") and os.environ.get("EAGLE3LAB_PROGRESS", "1") != "0"


def progress_bar(iterable: Any = None, **kwargs: Any) -> tqdm:
    """``tqdm`` with the project's on/off rule applied."""
    kwargs.setdefault("disable", not progress_enabled())
    return tqdm(iterable, **kwargs)
