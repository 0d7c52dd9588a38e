"""The engines the canary knows, each as the same few functions, so the canary itself names no engine.

An engine lists its releases on the package index, opens one release's source without installing it, names the
classes to check in a set of releases, and gives one release's rows; it may also read rows from a release record
the package ships (offline). vLLM joins by adding one ``Engine`` to ``ENGINES`` once its trace exists
(``PENDING`` says why it is not there yet, and the canary prints that instead of a table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from eagle3lab.canary import sglang_engine
from eagle3lab.canary.rows import ReleaseRows
from eagle3lab.errors import SourceError


@dataclass(frozen=True)
class Engine:
    name: str
    releases: Callable[[], list[str]]  # on the package index, oldest first
    recorded_releases: Callable[[], list[str]]  # in the shipped release record, oldest first
    open_release: Callable[[str], Any]  # a release's source, read from its wheel
    candidates: Callable[[Sequence[Any]], list[str]]  # the classes to check in every one of these releases
    rows: Callable[[Any, Sequence[str]], ReleaseRows]  # one release's rows over those classes
    recorded_rows: Callable[[str], ReleaseRows]  # one release's rows from the release record


ENGINES: dict[str, Engine] = {
    sglang_engine.NAME: Engine(sglang_engine.NAME, sglang_engine.releases, sglang_engine.recorded_releases,
                               sglang_engine.open_release, sglang_engine.candidates, sglang_engine.rows,
                               sglang_engine.recorded_rows),
}
# Engines the canary is meant to watch but cannot read yet, with the reason it prints in their place.
PENDING: dict[str, str] = {
    "vllm": "not audited: this eagle3lab has no vLLM source trace yet (the extension point is "
            "eagle3lab.canary.engines.ENGINES)",
}


def engine(name: str) -> Engine:
    """The engine called ``name``; one line for one the canary does not read."""
    if name in ENGINES:
        return ENGINES[name]
    why = PENDING.get(name, f"unknown engine; the canary reads {', '.join(ENGINES)}")
    raise SourceError(f"{name}: {why}", problem="unknown_engine", engine=name)
