"""Shared fixtures: the cpu profile, the tiny models and real server logs produced by this project."""

from __future__ import annotations

import pytest

from eagle3lab.runtime.profiles import Profile, load_profile


@pytest.fixture(scope="session")
def cpu_profile() -> Profile:
    return load_profile("cpu")


@pytest.fixture(scope="session")
def tiny_models(cpu_profile):
    from eagle3lab.runtime.deployment import resolve_models

    return resolve_models(cpu_profile)


@pytest.fixture(scope="session")
def eagle3_crash(tmp_path_factory, cpu_profile, tiny_models):
    """One real EAGLE-3 launch of sglang 0.5.9 on the tiny model (bare harness: stub + env), crash and all."""
    from eagle3lab.repro.crashrepro import reproduce_crash
    from eagle3lab.runtime.server import free_port

    return reproduce_crash(cpu_profile, tiny_models, tmp_path_factory.mktemp("logs"), port=free_port())


@pytest.fixture(scope="session")
def full_report(tmp_path_factory):
    """The README's main job, end to end: notebooks 01 -> 02 -> 03 on the cpu profile, HTML, REPORT.md.

    Outputs go to a temporary tree (the same environment variables reach the papermill kernels), so the test
    never overwrites a user's reports. Run once per session; several tests read what it wrote.
    """
    from eagle3lab.report.build import build_report

    root = tmp_path_factory.mktemp("report")
    env = {f"EAGLE3LAB_{name.upper()}_DIR": str(root / name) for name in ("artifacts", "reports", "figures")}
    env["EAGLE3LAB_REPORT_MD"] = str(root / "REPORT.md")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        from eagle3lab.runtime.server import free_port

        # A free port: on a shared machine another run may hold the profile's default one.
        outputs = build_report("cpu", hide_code=True, parameters={"overrides": {"port": free_port()}})
        yield outputs, root
