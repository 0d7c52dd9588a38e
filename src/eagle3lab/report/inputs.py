"""What a report may be built from: each executed notebook with its sidecars, present, readable and as new.

Why: REPORT.md is rendered from the notebooks' JSON sidecars and labels their numbers "[measured] here".
Rendering from a missing, truncated or stale sidecar would replace a good report with a worse one, or pair a
notebook with the numbers of another run; rendering one written for another profile, or edited by hand, would label
numbers "[measured] here" that were not (``sidecars.read`` refuses both). So every input is checked before the first output (HTML, figure,
REPORT.md) is written, and a problem is one line naming the file and what to run.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.errors import ReportInputError
from eagle3lab.sidecars import SCHEMAS, has_digest, read, sidecar_path

CLOCK_SLACK_S = 1.0  # file times of different writers may differ by a fraction of a second


@dataclass(frozen=True)
class ReportInput:
    notebook: str
    executed: Path
    started: float  # when its run began (epoch seconds)
    sidecars: tuple[Path, ...]


def sidecars_of(notebook: str, profile: str) -> list[Path]:
    """The sidecars a notebook writes and the report reads."""
    return [sidecar_path(notebook, profile)]


def check_sidecar(notebook: str, profile: str, path: Path, rerun: str) -> Any:
    """Present, parseable (else line and column), of its notebook's schema, written for ``profile`` and unchanged
    since its run wrote it (``sidecars.read``). A sidecar from before content digests is read, with a note."""
    data = read_json(path, f"sidecar of {notebook}", rerun)
    schema = next((s for s in SCHEMAS if s.NOTEBOOK == notebook), None)
    if schema is not None:
        read(schema, profile, path)  # a wrong schema version, field, profile or digest: SidecarError, one line
        if not has_digest(path):
            print(f"note: sidecar {path} records no content digest (written before eagle3lab recorded one), so a "
                  f"hand edit to it cannot be detected; {rerun} to get one", file=sys.stderr, flush=True)
    return data


def _check_bench_profile(notebook: str, profile: str, path: Path, data: Any, rerun: str) -> None:
    """The benchmark record a sidecar points to must be this profile's too (it carries its profile's name)."""
    found = data.get("profile") if isinstance(data, dict) else None
    if found is not None and found != profile:
        raise ReportInputError(f"benchmark sidecar of {notebook} {path} was written for profile '{found}', not for "
                               f"'{profile}' (the profile asked for); {rerun}", path=Path(path), notebook=notebook,
                               problem="other_profile")


def read_json(path: Path, what: str, rerun: str) -> Any:
    """A sidecar's data, or one line saying it is missing or unreadable (with line and column)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportInputError(f"{what} {path} is missing; {rerun}", path=Path(path), problem="missing") from None
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{what} {path} is unreadable (line {exc.lineno} column {exc.colno}: {exc.msg}; "
                               f"cut short?); {rerun}", path=Path(path), problem="unreadable", line=exc.lineno,
                               column=exc.colno) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{what} {path} is unreadable ({type(exc).__name__}); {rerun}", path=Path(path),
                               problem="unreadable") from None


def _run_started(executed: Path, rerun: str) -> float:
    """When papermill began the run that wrote ``executed`` (its own metadata), and that run must have passed."""
    notebook = read_json(executed, "executed notebook", rerun)
    meta = (notebook.get("metadata") or {}).get("papermill") or {}
    if meta.get("exception"):
        raise ReportInputError(f"executed notebook {executed} records a failed run; {rerun}", path=executed,
                               problem="failed_run")
    started = meta.get("start_time")
    if not started:
        return executed.stat().st_mtime
    try:
        when = dt.datetime.fromisoformat(str(started).replace("Z", "+00:00"))
    except ValueError:
        return executed.stat().st_mtime
    return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()  # papermill stamps UTC


def _extra_sidecars(notebook: str, data: Any) -> list[Path]:
    """Files a sidecar points to that the report reads too (notebook 03's benchmark report)."""
    if notebook.startswith("03_") and isinstance(data, dict) and data.get("bench_report"):
        return [Path(data["bench_report"])]
    return []


def check_inputs(profile: str, notebooks: Sequence[str], executed: Sequence[Path]) -> list[ReportInput]:
    """Each executed notebook exists and passed; each of its sidecars exists, parses, and is not older than
    the run that should have written it. Raises ReportInputError (one line) at the first problem."""
    if not notebooks:
        raise ReportInputError("there is nothing to report: no notebooks were given or found", problem="nothing")
    checked = []
    for notebook, path in zip(notebooks, executed):
        rerun = f"rerun it: python -m eagle3lab report --profile {profile} --notebooks {notebook.split('_')[0]}"
        if not Path(path).is_file():
            raise ReportInputError(f"there is no executed notebook {path} to report from; {rerun} (without --no-run)",
                                   path=Path(path), notebook=notebook, problem="missing")
        started = _run_started(Path(path), rerun)
        sidecars = sidecars_of(notebook, profile)
        for sidecar in list(sidecars):
            read_json(sidecar, f"sidecar of {notebook}", rerun)
            written = sidecar.stat().st_mtime
            if written + CLOCK_SLACK_S < started:
                when = dt.datetime.fromtimestamp(written).isoformat(timespec="seconds")
                began = dt.datetime.fromtimestamp(started).isoformat(timespec="seconds")
                raise ReportInputError(f"sidecar of {notebook} {sidecar} (written {when}) is older than the run "
                                       f"of {path} (started {began}): that run did not write it; {rerun}",
                                       path=Path(sidecar), notebook=notebook, problem="stale")
            data = check_sidecar(notebook, profile, sidecar, rerun)
            for extra in _extra_sidecars(notebook, data):
                bench = read_json(extra, f"benchmark sidecar of {notebook}", rerun)
                _check_bench_profile(notebook, profile, extra, bench, rerun)
                sidecars.append(extra)
        checked.append(ReportInput(notebook, Path(path), started, tuple(sidecars)))
    return checked
