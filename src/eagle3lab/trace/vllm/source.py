"""A vLLM release's Python source, read from its wheel on the package index (only the ``.py`` members, by HTTP
range requests, cached once per release; ``package.ranged_wheel``)."""

from __future__ import annotations

import zipfile
from functools import lru_cache

from eagle3lab.package.ranged_wheel import fetch_python_sources, releases
from eagle3lab.trace.sources import SglangSource, wheel_source

PROJECT = "vllm"
PACKAGE = "vllm"


@lru_cache(maxsize=4)
def open_vllm(version: str) -> SglangSource:
    """The release's source, package-relative paths (``model_executor/models/kimi_k25.py``); memoised per process."""
    path = fetch_python_sources(PROJECT, version, PACKAGE)
    src = wheel_source(path, version, package=PACKAGE)
    with zipfile.ZipFile(path) as archive:
        wheel = archive.comment.decode() or path.name
    src.origin = wheel  # the wheel's file name, never a machine path
    return src


def vllm_releases() -> list[str]:
    """vLLM releases with a wheel on the index, oldest first."""
    return releases(PROJECT)
