"""The cost model's figures for a profile, with the profile's measured points wherever its run produced them."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from eagle3lab.paths import repo_dir
from eagle3lab.sidecars import (PatchBenchSidecar,
                                read_if_present)
from eagle3lab.report.plots.model import (incident_figures, measured_points_from_bench, run_profile_figures,
                                          validation_figure)
from eagle3lab.report.run_model import ModelledAs, is_incident, modelled_as
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.runtime.profiles import Profile, load_profile
from pydantic import ValidationError

from eagle3lab.errors import PerfModelError


def _run_profile(loaded: Profile) -> Profile:
    """The profile exactly as notebook 03 ran it (its sidecar's ``profile_values``), else the loaded one."""
    s03 = read_if_present(PatchBenchSidecar, loaded.name)
    if s03 is not None and s03.profile_values:
        try:
            return Profile.model_validate(s03.profile_values)
        except ValidationError:
            pass  # an older sidecar: the run check says so; the figures use the profile as loaded
    return loaded


def _bench_report(profile: str) -> BenchReport | None:
    """The benchmark record of the run notebook 03's sidecar describes (its ``bench_report``), else the profile's
    in this run's artifacts; None where there is none."""
    s03 = read_if_present(PatchBenchSidecar, profile)
    recorded = Path(s03.bench_report) if s03 is not None and s03.bench_report else None
    path = recorded if recorded is not None and recorded.is_file() else \
        repo_dir("artifacts") / f"03_bench.{profile}" / "bench_report.json"
    return BenchReport.load(path) if path.is_file() else None


def model_figures(profile: str, overrides: dict[str, Any] | None = None) -> list[Path]:
    """The cost model's figures, with this profile's measured points wherever its run produced them, and the
    validation figure.

    A run is drawn as what its profile's ``cost_model`` says it is (``run_model.modelled_as``): against the model
    calibrated on its own plain step, titled with that target and GPU; its points go on the incident's figures too
    only when it is modelled as the incident's deployment (``run_model.is_incident``). A run the model does not
    describe keeps every measured figure, and one line says why its model figures are left out.
    """

    loaded = load_profile(profile, overrides=overrides)
    bench = _bench_report(loaded.name)
    run_profile = _run_profile(loaded)
    run: ModelledAs | None = None
    if bench is not None:
        try:
            run = modelled_as(run_profile, bench)
        except PerfModelError as exc:
            print(f"the cost model's figures of this run are left out: {exc}", flush=True)
    measured = measured_points_from_bench(bench) if bench is not None and run is not None \
        and is_incident(run_profile, run) else ()
    figures = dict(incident_figures(measured=measured))
    figures["validation"] = validation_figure()
    if bench is not None and run is not None:
        try:
            drawn = run_profile_figures(bench, run_profile)
        except PerfModelError as exc:  # a modelled figure never fails a measured run; REPORT.md says the same
            print(f"the cost model's figures of this run are left out: {exc}", flush=True)
        else:
            figures.update({f"run_{kind}": path for kind, path in drawn.items()})
    return list(figures.values())
