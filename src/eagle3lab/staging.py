"""One run's outputs change together or not at all: written into a staging folder, renamed into place at the end.

Why: a run writes figures, sidecars, executed notebooks, HTML, REPORT.md and its evidence over many minutes. A
failure in a late cell (a figure, the cost model, the render) used to leave this run's figures beside the last good
run's REPORT.md, so the committed figures and report disagreed. While a run is staged, ``EAGLE3LAB_FIGURES_DIR``,
``EAGLE3LAB_REPORTS_DIR``, ``EAGLE3LAB_SIDECARS_DIR`` and ``EAGLE3LAB_REPORT_MD`` point into its staging folder
(the notebooks' kernels inherit them), so nothing a reader sees changes before the run has succeeded. Then every file
the run wrote is renamed into place, in one step at the end; a failure leaves the last good set untouched and this
run's copies in the staging folder (``artifacts/staging/<profile>-<time>-<pid>/``), which the error names.

Each rename is atomic, the set is not: a crash between two renames of the publish step (milliseconds, after
everything was computed) can still leave a mix; the staging folder then still holds the files not yet moved.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from eagle3lab.atomic import write_with
from eagle3lab.paths import repo_dir, sidecar_dir

STAGING_DIR = "staging"
KEEP_FAILED = 3  # failed runs' staging folders kept for inspection (older ones are removed when a run starts)
# staged sub-folder -> the environment variable that points the project's writers at it
_VARIABLES = {"figures": "EAGLE3LAB_FIGURES_DIR", "reports": "EAGLE3LAB_REPORTS_DIR",
              "sidecars": "EAGLE3LAB_SIDECARS_DIR"}
STAGED_AS_ENV = "EAGLE3LAB_STAGED_AS"  # JSON [[staged folder, real folder], ...], for paths recorded in evidence


@dataclass
class Stage:
    """A run's staging folder and where each of its sub-folders is published."""

    root: Path
    targets: dict[str, Path]  # "figures", "reports", "sidecars", "top" -> the real folder
    report_name: str  # REPORT.md's file name in the real top folder
    seeded: dict[Path, tuple[int, int]] = field(default_factory=dict)  # staged copy -> (size, mtime_ns)

    def folder(self, name: str) -> Path:
        return self.root / name

    def staged_path(self, real: Path) -> Path:
        """Where a file of the real set lives in this stage (REPORT.md keeps its name)."""
        real = Path(real)
        for name, target in self.targets.items():
            if real.is_relative_to(target) and name != "top":
                return self.folder(name) / real.relative_to(target)
        return self.folder("top") / real.relative_to(self.targets["top"])

    def seed(self, reals: Iterable[Path]) -> None:
        """Copy existing files of the last good set into the stage (a run of one notebook reads the others'
        sidecars; ``report --no-run`` reads the executed notebooks); unchanged copies are not published again."""
        for real in reals:
            if Path(real).is_file():
                copy = self.staged_path(real)
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(real, copy)
                self.seeded[copy] = _signature(copy)

    def written(self) -> list[Path]:
        """The files this run wrote: every staged file but the unchanged seeds and temporary files."""
        return [p for p in sorted(self.root.rglob("*")) if p.is_file() and not p.name.endswith(".eagle3lab-tmp")
                and self.seeded.get(p) != _signature(p)]

    def publish(self) -> list[Path]:
        """Rename every file this run wrote into place; the ones in the report's folder (REPORT.md, its
        appendices and evidence) last. Returns the published paths."""
        published = []
        for name in ("sidecars", "figures", "reports", "top"):
            staged = self.folder(name)
            for path in self.written():
                if not path.is_relative_to(staged):
                    continue
                real = self.targets[name] / path.relative_to(staged)
                if name == "top" and path.relative_to(staged) == Path(self.report_name):
                    real = self.targets[name] / self.report_name
                _move(path, real)
                if name == "reports" and real.suffix == ".ipynb":  # the run succeeded: an older failure is moot
                    real.with_name(real.name.removesuffix(".ipynb") + ".failed.ipynb").unlink(missing_ok=True)
                published.append(real)
        return published

    def discard(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        try:
            self.root.parent.rmdir()  # only when no other stage is left
        except OSError:
            pass


def _signature(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _move(source: Path, target: Path) -> None:
    """``os.replace``; across file systems (an output folder moved elsewhere) a copy renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        with open(source, "rb") as data:
            write_with(target, lambda handle: shutil.copyfileobj(data, handle), binary=True)
        source.unlink()


def _prune(parent: Path, keep: int) -> None:
    """Remove all but the newest ``keep`` staging folders of earlier failed runs."""
    if not parent.is_dir():
        return
    stages = sorted((p for p in parent.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime_ns)
    for old in stages[:max(0, len(stages) - keep)]:
        shutil.rmtree(old, ignore_errors=True)


def staging_parent() -> Path:
    return repo_dir("artifacts") / STAGING_DIR


@contextmanager
def staged(label: str, report_md: Path) -> Iterator[Stage]:
    """Point every writer of the run's outputs into a fresh staging folder for the duration of the block.

    The caller publishes (``Stage.publish``) when the run succeeded; on any exit the environment is restored. A
    stage whose run wrote nothing is removed; one that holds a failed run's copies is kept.
    """
    parent = staging_parent()
    _prune(parent, KEEP_FAILED)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report_md = Path(report_md)
    stage = Stage(parent / f"{label}-{stamp}-{os.getpid()}",
                  {"figures": repo_dir("figures"), "reports": repo_dir("reports"), "sidecars": sidecar_dir(),
                   "top": report_md.parent}, report_md.name)
    values = {variable: str(stage.folder(name)) for name, variable in _VARIABLES.items()}
    values["EAGLE3LAB_REPORT_MD"] = str(stage.folder("top") / report_md.name)
    values[STAGED_AS_ENV] = json.dumps([[str(stage.folder(n)), str(stage.targets[n])] for n in stage.targets])
    for name in stage.targets:
        stage.folder(name).mkdir(parents=True, exist_ok=True)
    try:
        with _environment(values):
            yield stage
    finally:
        if stage.root.is_dir() and not stage.written():
            stage.discard()


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    previous = {variable: os.environ.get(variable) for variable in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for variable, value in previous.items():
            if value is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = value


def unpublished(label: str) -> Path | None:
    """The staging folder of ``label``'s latest run when that run failed (so published nothing) after the last
    published one, else None. Why: a CI summary of a failed run describes that run, not the last good one."""
    parent = staging_parent()
    stages = sorted(p for p in parent.glob(f"{label}-*") if p.is_dir()) if parent.is_dir() else []
    if not stages:
        return None
    newest = max((p.stat().st_mtime_ns for p in stages[-1].rglob("*") if p.is_file()), default=None)
    published = [p.stat().st_mtime_ns for p in repo_dir("reports").glob(f"*.{label}.ipynb")]
    if newest is None or (published and max(published) >= newest):
        return None
    return stages[-1]


@contextmanager
def viewing(stage: Path) -> Iterator[None]:
    """Read a failed run's staged executed notebooks and sidecars as if they had been published."""
    with _environment({variable: str(Path(stage) / name) for name, variable in _VARIABLES.items()}):
        yield
