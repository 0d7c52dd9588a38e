"""The engines the canary knows, each as the same few functions, so the canary itself names no engine.

An engine lists its releases on the package index, opens one release's source without installing it, names the
classes to check in a set of releases, and gives one release's rows; it may also read rows from a release record
the package ships (offline). Another engine joins by adding one ``Engine`` to ``ENGINES`` once its trace exists;
until then ``PENDING`` may name it, with the reason the canary prints instead of a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from eagle3lab.canary import sglang_engine, vllm_engine
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
    recorded_rows: Callable[[Sequence[str]], list[ReleaseRows]]  # these releases' rows from the release record


ENGINES: dict[str, Engine] = {
    sglang_engine.NAME: Engine(sglang_engine.NAME, sglang_engine.releases, sglang_engine.recorded_releases,
                               sglang_engine.open_release, sglang_engine.candidates, sglang_engine.rows,
                               lambda versions: [sglang_engine.recorded_rows(v) for v in versions]),
    vllm_engine.NAME: Engine(vllm_engine.NAME, vllm_engine.releases, vllm_engine.recorded_releases,
                             vllm_engine.open_release, vllm_engine.candidates, vllm_engine.rows,
                             vllm_engine.recorded_rows),
}
# Engines the canary is meant to watch but cannot read yet, with the reason it prints in their place (none now).
PENDING: dict[str, str] = {}


def engine(name: str) -> Engine:
    """The engine called ``name``; one line for one the canary does not read."""
    if name in ENGINES:
        return ENGINES[name]
    why = PENDING.get(name, f"unknown engine; the canary reads {', '.join(ENGINES)}")
    raise SourceError(f"{name}: {why}", problem="unknown_engine", engine=name)
