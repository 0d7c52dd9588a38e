"""Run the canary: which releases, each against the one before it, and the files it leaves.

Everything is read and compared before anything is written, so bad input (an unknown release, no network, a corrupt
wheel) stops the run with one line and no file; then each release's JSON and markdown table and the summary of all
(what a CI job shows) are written atomically into ``out``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from packaging.version import Version

from eagle3lab.atomic import write_json_atomic, write_text_atomic
from eagle3lab.canary.engines import ENGINES, PENDING, Engine, engine as engine_named
from eagle3lab.canary.rows import Comparison, compare, markdown
from eagle3lab.errors import SourceError
from eagle3lab.package.wheels import check_version
from eagle3lab.paths import repo_dir

SUMMARY = "canary.md"


@dataclass(frozen=True)
class Target:
    """One release to check, and the one it is compared with (None: the first release there is)."""

    engine: str
    release: str
    previous: Optional[str]


@dataclass
class CanaryResult:
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)  # engines not audited, and why
    written: list[Path] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        return [line for c in self.comparisons for line in c.regressions]


def default_out() -> Path:
    return repo_dir("artifacts") / "canary"


def parse_release(spec: str, engines: Sequence[str]) -> tuple[str, str]:
    """``sglang==0.5.9`` -> (engine, version); a bare ``0.5.9`` only when one engine is asked."""
    name, sep, version = spec.partition("==")
    if not sep:
        if len(engines) != 1:
            raise SourceError(f"release '{spec}' names no engine; write it as ENGINE==VERSION (e.g. sglang=={spec}) "
                              f"when checking {', '.join(engines)}", problem="no_engine", version=spec)
        name, version = engines[0], spec
    engine_named(name)
    return name, check_version(version)


def _listing(engine: Engine, from_record: bool) -> list[str]:
    found = engine.recorded_releases() if from_record else engine.releases()
    return sorted(found, key=Version)


def _not_listed(name: str, version: str, listing: list[str], from_record: bool) -> SourceError:
    """One line for a release the index (or the record) does not list, naming what it does list."""
    if from_record:
        held = f"it holds {listing[0]} to {listing[-1]}" if listing else "none is shipped"
        return SourceError(f"{name} {version} is not in the release record ({held}); drop --from-record to read "
                           "it from the package index", version=version, problem="not_in_record")
    return SourceError(f"{name} {version} is not on the package index (newest there: "
                       f"{listing[-1] if listing else 'none'}); pick a release it lists", version=version,
                       newest=listing[-1] if listing else None, problem="not_on_index")


def plan(engines: Sequence[str], specs: Sequence[str], newest: bool, against: Optional[str] = None,
         from_record: bool = False) -> list[Target]:
    """The releases to check: each given one, and the newest of each engine (``newest``), each with the release
    before it on the index (or in the record), or ``against`` when given (then the index is not asked)."""
    asked = [parse_release(spec, engines) for spec in specs]
    targets: list[Target] = []
    for name in engines:
        mine = [version for engine_name, version in asked if engine_name == name]
        if not mine and not newest:
            continue
        listing: list[str] = []
        if newest or against is None:
            listing = _listing(engine_named(name), from_record)
        if newest:
            if not listing:
                raise _not_listed(name, "release", listing, from_record)
            mine.append(listing[-1])
        for version in dict.fromkeys(mine):
            if against is not None:
                previous: Optional[str] = check_version(against)
            elif version not in listing:
                raise _not_listed(name, version, listing, from_record)
            else:
                at = listing.index(version)
                previous = listing[at - 1] if at else None
            targets.append(Target(name, version, previous))
    return targets


def check(target: Target, from_record: bool) -> Comparison:
    """One release against its previous one: both releases' rows over the same classes."""
    eng = engine_named(target.engine)
    if from_record:
        recorded = eng.recorded_rows([target.release] + ([target.previous] if target.previous else []))
        return compare(recorded[0], recorded[1] if len(recorded) > 1 else None)
    srcs = [eng.open_release(target.release)] + ([eng.open_release(target.previous)] if target.previous else [])
    classes = eng.candidates(srcs)
    rows = [eng.rows(src, classes) for src in srcs]
    return compare(rows[0], rows[1] if len(rows) > 1 else None)


def summary(result: CanaryResult) -> str:
    """Every release's table, then the engines not audited: the text a CI job puts in its summary."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    verdict = (f"{len(result.regressions)} regression(s)" if result.regressions else "no regression")
    head = [f"## EAGLE-3 release canary: {verdict}", "",
            f"The static audit and preflight-model, {stamp}: nothing installed, nothing launched; each table says "
            "what its release was read from.", "", ""]
    body = [markdown(c) for c in result.comparisons]
    tail = [f"- {note}" for note in result.notes]
    return "\n".join(head) + "\n".join(body) + ("\n" + "\n".join(tail) + "\n" if tail else "")


def write(result: CanaryResult, out: Path) -> list[Path]:
    """Each release's JSON and markdown, and the summary, each written atomically."""
    paths = []
    for comparison in result.comparisons:
        stem = f"{comparison.current.engine}-{comparison.current.release}"
        paths.append(write_json_atomic(out / f"{stem}.json", comparison.to_dict()))
        paths.append(write_text_atomic(out / f"{stem}.md", markdown(comparison)))
    paths.append(write_text_atomic(out / SUMMARY, summary(result)))
    return paths


def run_canary(engines: Optional[Sequence[str]] = None, specs: Sequence[str] = (), newest: bool = False,
               against: Optional[str] = None, from_record: bool = False, out: Optional[Path] = None) -> CanaryResult:
    """Plan, check every release, then write (nothing is written unless every release was read)."""
    chosen = list(engines) if engines else [*ENGINES]
    for name in chosen:
        engine_named(name)
    notes = [] if engines else [f"{name}: {why}" for name, why in PENDING.items()]
    targets = plan(chosen, specs, newest or not specs, against, from_record)
    result = CanaryResult([check(target, from_record) for target in targets], notes)
    result.written = write(result, out or default_out())
    return result
