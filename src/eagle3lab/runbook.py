"""Run the project's notebooks with papermill, always on the project's own Jupyter kernel.

Executed copies go to ``reports/`` named by profile; the source notebooks in ``notebooks/`` stay output-free.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from eagle3lab.errors import Eagle3LabError, NotebookFailed
from eagle3lab.paths import REPO_ROOT, repo_dir

KERNEL_NAME = "eagle3lab"
NOTEBOOKS = ("01_crash_repro", "02_interface_trace", "03_patch_and_bench")


def notebook_path(name: str) -> Path:
    """``01`` or ``01_crash_repro`` -> ``notebooks/01_crash_repro.ipynb``."""
    matches = [nb for nb in NOTEBOOKS if nb == name or nb.split("_", 1)[0] == name]
    path = REPO_ROOT / "notebooks" / f"{matches[0] if matches else name}.ipynb"
    if not path.is_file():
        raise Eagle3LabError(f"notebook '{name}' not found at {path}; known: {', '.join(NOTEBOOKS)}")
    return path


def available_notebooks() -> list[str]:
    return [nb for nb in NOTEBOOKS if (REPO_ROOT / "notebooks" / f"{nb}.ipynb").is_file()]


def executed_path(name: str, profile: str) -> Path:
    return repo_dir("reports") / f"{notebook_path(name).stem}.{profile}.ipynb"


def run_notebook(name: str, profile: str = "cpu", parameters: dict[str, Any] | None = None,
                 progress: bool | None = None) -> Path:
    """Execute one notebook top to bottom; papermill raises (and keeps the executed copy) on any cell error."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = notebook_path(name)
    output = executed_path(name, profile)
    previous = os.environ.get("EAGLE3LAB_PROGRESS")
    os.environ["EAGLE3LAB_PROGRESS"] = "0"  # the kernel inherits it: no per-request bars in executed notebooks
    try:
        papermill.execute_notebook(
            str(source), str(output), parameters={"profile": profile, **(parameters or {})},
            kernel_name=KERNEL_NAME, cwd=str(source.parent),
            progress_bar=(not os.environ.get("CI")) if progress is None else progress)
    except PapermillExecutionError as exc:
        message = str(exc.evalue).splitlines()[0] if exc.evalue else ""
        raise NotebookFailed(f"notebook {source.stem} failed in cell {exc.exec_count}: {exc.ename}: {message} "
                             f"(executed copy: {output})") from None
    finally:
        if previous is None:
            os.environ.pop("EAGLE3LAB_PROGRESS", None)
        else:
            os.environ["EAGLE3LAB_PROGRESS"] = previous
    return output


def profile_overrides(parameters: dict[str, Any] | None) -> dict[str, Any]:
    """The profile keys among notebook parameters: ``overrides`` and any profile key passed directly."""
    from eagle3lab.runtime.profiles import Profile

    parameters = parameters or {}
    return {**parameters.get("overrides", {}), **{k: v for k, v in parameters.items() if k in Profile.model_fields}}


def run_all(profile: str = "cpu", names: Sequence[str] | None = None,
            parameters: dict[str, Any] | None = None) -> list[Path]:
    """Run the given notebooks (default: every notebook that exists), in order, after the deployment's preflight
    (a GPU profile stops here, in seconds, instead of after loading its checkpoints)."""
    from eagle3lab.runtime import preflight
    from eagle3lab.runtime.profiles import load_profile

    preflight.require(load_profile(profile, overrides=profile_overrides(parameters)), quick=True)
    return [run_notebook(name, profile, parameters) for name in (names or available_notebooks())]
