"""Shared fixtures: the cpu profile, the tiny models and real server logs produced by this project."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from eagle3lab.bench import loadgen
from eagle3lab.package import backups
from eagle3lab.package.location import installed_root
from eagle3lab.package.release import drift, package_hashes, release_record
from eagle3lab.paths import cache_root
from eagle3lab.report import model_evidence
from eagle3lab.runtime.profiles import Profile, load_profile


# the report's and the cost model's unit tests: both calibrate the cpu engine, which reads a run's cycle terms
READS_NO_EARLIER_RUN = (Path(__file__).parent / "report", Path(__file__).parent / "costmodel")


def pytest_configure(config: pytest.Config) -> None:
    """One OpenMP thread per process, unless the caller chose a count: every sglang server, notebook kernel and
    worker a test starts inherits it. Why: torch on CPU starts one thread per core in each process, and two
    processes' threads on 2 cores spin at each other's barriers. tests/bench/test_bench.py run twice at once took
    368 s per copy with the default (104 s alone); with one thread each, 96.5 s per copy (92 s alone), measured
    2026-12-06 on the 2-core development machine. Set before any worker or child starts, so all of them see it."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def on_cpu(name: str) -> dict:
    """The overrides that run a GPU profile on this CPU: its device, and its cost model on the host it runs on
    (``runtime.profiles`` refuses a GPU preset for a cpu run); the model it names stays."""
    return {"device": "cpu", "cost_model": {**load_profile(name).cost_model.model_dump(), "hardware": "measured"}}


@pytest.fixture(autouse=True)
def report_tests_read_no_earlier_run(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    """The report's and the cost model's unit tests get an empty artifacts folder of their own. Why: ``make run``
    leaves ``artifacts/cycle_components.cpu.json`` (notebook 03's measured cycle terms), which the cost model's cpu
    engine reads; synthetic benchmark reports calibrated against a real run's terms failed the calibration check, so
    ``make test`` after ``make run`` failed 14 tests that pass on a fresh clone. The full-report tests build their
    own checkout and are left alone."""
    if "full_report" in request.fixturenames:
        return
    if not any(request.node.path.is_relative_to(tests) for tests in READS_NO_EARLIER_RUN):
        return
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path_factory.mktemp("artifacts")))
    monkeypatch.delenv("EAGLE3LAB_SIDECARS_DIR", raising=False)


@pytest.fixture
def probe_waits(monkeypatch) -> list[float]:
    """The wait of every liveness probe the benchmark sends (the real probe still runs): tests check that the sweep's
    probe time is used, or that no probe was sent when the process watch already knew."""
    waits: list[float] = []
    real_probe = loadgen.server_alive

    async def counted_probe(base_url: str, timeout_s: float = loadgen.PROBE_TIMEOUT_S) -> bool:
        waits.append(timeout_s)
        return await real_probe(base_url, timeout_s)

    monkeypatch.setattr(loadgen, "server_alive", counted_probe)
    return waits


@pytest.fixture(scope="session")
def evidence() -> model_evidence.ModelEvidence:
    """The cost model's real evidence, gathered once for the report tests (``validation_report()`` included; no
    benchmark report, so the run check says why it is missing). Tests deep-copy it before changing anything."""
    return model_evidence.gather("cpu", None)


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


# ------------------------------------------------------------------------------------------------------------
# Which tests may run beside which. ``make test SGLANG_TEST_WORKERS=N`` (N > 1) runs the sglang tests on N
# pytest-xdist workers with ``--dist loadgroup``, and the groups are made here, from each test's id: pytest 9.2 ignores the id suffix that
# pytest-xdist 3.8's own ``xdist_group`` marks rely on, so those marks would silently group nothing. A test that
# patches, or needs unpatched, the one installed sglang is in INSTALLED_SGLANG, so those run one at a time on one
# worker; the tests of the full report share its group (the report runs once, on its own copy of sglang); the
# baseline-bench tests share theirs (one server per module). A fault test runs against its own sandboxed copy of
# sglang and may run beside anything. ``pytest_collection_modifyitems`` checks the id rules against the fixtures
# each test really uses, so a new test cannot land in the wrong group unnoticed.

INSTALLED_SGLANG = "installed-sglang"
FULL_REPORT = "full-report"
RUNS_SGLANG = ("server", "notebook", "network")
FULL_REPORT_IDS = ("tests/report/test_report.py::", "tests/fix/test_fixverify.py::",
                   "tests/test_ci_summary.py::test_the_verdicts_of_the_full_report_come_from_its_sidecars",
                   "tests/faults/test_fault_outputs.py::test_report_no_run_from_a_real_run_and_on_a_full_disk")
# baseline servers only, and the canary's reads of wheels: they never patch sglang
GROUP_OF_MODULE = {"tests/bench/test_bench.py": "bench", "tests/canary/test_canary_index.py": "canary"}
SANDBOXED = "tests/faults/"  # every fault test runs against its own copy of sglang (tests/faults/conftest.py)


def sglang_group(nodeid: str) -> str | None:
    """The group of a test that runs sglang, from its id; None for one that may run beside any other."""
    if nodeid.startswith(FULL_REPORT_IDS):
        return FULL_REPORT
    module = nodeid.split("::", 1)[0]
    if module in GROUP_OF_MODULE:
        return GROUP_OF_MODULE[module]
    return None if module.startswith(SANDBOXED) else INSTALLED_SGLANG


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses the full report must be in its group, and only those (else it would be built twice)."""
    for item in items:
        if not any(item.get_closest_marker(mark) for mark in RUNS_SGLANG):
            continue
        if ("full_report" in item.fixturenames) != (sglang_group(item.nodeid) == FULL_REPORT):
            raise pytest.UsageError(f"{item.nodeid}: full_report fixture and FULL_REPORT_IDS in tests/conftest.py "
                                    f"disagree; list exactly the tests that use it there")


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """``--dist loadgroup`` with the groups of ``sglang_group`` (other ``--dist`` modes: pytest-xdist's own)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SglangGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return sglang_group(nodeid) or nodeid

    return SglangGroups(config, log)


# ------------------------------------------------------------------------------------------------------------
# A pristine copy of the installed sglang, which tests make "the installed sglang" of their processes with
# PYTHONPATH (faults/faultkit.py's Sandbox), so they neither see nor disturb a patch another test holds.

USER_CACHE_ROOT = cache_root()  # the user's cache, read before any test points EAGLE3LAB_CACHE at a sandbox


@pytest.fixture(scope="session")
def sglang_template(tmp_path_factory) -> Path:
    """One pristine copy of the installed sglang package and its dist-info (byte caches left out), taken under
    the package lock: a test on another worker may hold a patch on the installed sglang, never during the copy."""
    installed = installed_root()
    record = release_record(installed)
    if record is None:
        pytest.skip("the installed sglang has no RECORD to compare with")
    root = tmp_path_factory.mktemp("sglang-template")
    with backups.package_lock(installed):
        shutil.copytree(installed / "sglang", root / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
        dist = next(installed.glob("sglang-*.dist-info"))
        shutil.copytree(dist, root / dist.name)
    assert drift(root).clean, "the installed sglang itself differs from its release; reinstall it first"
    return root


@pytest.fixture(scope="session")
def release_hashes(sglang_template) -> dict[str, str]:
    """The release's fingerprint, taken once, before any test touched anything."""
    return package_hashes(sglang_template)


@pytest.fixture(scope="session")
def full_report(tmp_path_factory, sglang_template, release_hashes):
    """The README's main job, end to end: ``python -m eagle3lab report`` (notebooks 01 -> 02 -> 03 on the cpu
    profile, HTML, REPORT.md), against its own copy of sglang (so the sglang tests on the other worker can patch
    the installed one meanwhile) and the user's cache (its tiny models and trained drafter).

    Outputs go to a temporary tree, so the test never overwrites a user's reports; this process reads that tree
    afterwards (the same environment variables). Run once per session; several tests read what it wrote. Yields
    the outputs and the tree's root; the copy of sglang it ran on is ``root / "site-packages"``.
    """
    from faults.faultkit import Sandbox, cli

    from eagle3lab.pipeline import ReportOutputs
    from eagle3lab.report.evidence_file import evidence_path
    from eagle3lab.runtime.server import free_port

    root = tmp_path_factory.mktemp("report")
    box = Sandbox(root / "site-packages", USER_CACHE_ROOT, root, release_hashes)
    shutil.copytree(sglang_template, box.root, copy_function=os.link)  # hardlinks: every project write is a rename
    # A free port: on a shared machine another run may hold the profile's default one. The sweep keeps
    # concurrency 1 (what the cost model calibrates on, and the lossless and offline-vs-served checks read) and the
    # profile's highest (the cross-check's point), so the report still has a trend across two concurrencies; the
    # middle point adds nothing a test reads. Prompts and lengths stay the profile's: they key the trained drafter
    # (a change would retrain it). The interleaved relaunch measures both points and keeps its rounds, but with two
    # prompts per block at concurrency 1 (fewer rounds above it): the tests read how it was measured, not how steady
    # it is; likewise the bench_serving cross-check runs two short rounds.
    profile = load_profile("cpu")
    sweep = profile.bench_concurrency
    concurrency = ",".join(str(c) for c in sorted({min(sweep), max(sweep)}))
    done = cli(box, "report", "--profile", "cpu", "--hide-code", "--set", f"port={free_port()}",
               "--set", f"bench_concurrency=[{concurrency}]", "--set", f"bench_interleave_concurrency=[{concurrency}]",
               "--set", f"bench_interleave_prompts={2 * profile.bench_interleave_rounds}",
               "--set", "bench_crosscheck_rounds=2", "--set", "bench_crosscheck_prompts=8", timeout=3600)
    assert done.returncode == 0, f"the full report failed (rc {done.returncode}):\n{done.stderr[-4000:]}"
    env = {key: value for key, value in box.env().items() if key.startswith("EAGLE3LAB_") and key != "EAGLE3LAB_CACHE"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        report_md = root / "REPORT.md"
        tree = json.loads(evidence_path(report_md, "cpu").read_text())["tree"]
        outputs = ReportOutputs(executed=sorted((root / "reports").glob("0[1-3]_*.cpu.ipynb")),
                                html=sorted((root / "reports").glob("*.cpu*.html")),
                                figures=[root / "figures" / name for name in tree["figures"]], report_md=report_md)
        yield outputs, root


# ------------------------------------------------------------------------------------------------------------
# A Hugging Face hub cache on disk, in huggingface_hub's own layout, holding the tiny models under the GPU
# profile's real repo ids: every hub-id path of the code (offline resolution, configs, tokenizers, launches)
# runs for real against it, with no network.

HUB_IDS = {"target": "moonshotai/Kimi-K2.5", "draft": "AQ-MedAI/Kimi-K25-eagle3"}
TINY_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def seed_hub_cache(hub_cache, repo_id: str, source, commit: str = TINY_COMMIT, kind: str = "models"):
    """Copy ``source`` into ``hub_cache`` as repo ``repo_id`` at ``commit``: blobs named by content hash,
    snapshot files as relative symlinks to them, refs/main pointing at the commit. Returns the snapshot.
    ``kind``: "models", or "datasets" for a dataset repo."""
    repo = Path(hub_cache) / (f"{kind}--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(source).rglob("*")):
        if not path.is_file():
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snapshot / path.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture(scope="session")
def tiny_hub_home(tmp_path_factory, tiny_models):
    """An HF_HOME whose hub cache holds the tiny target and drafter under the blackwell-8x repo ids."""
    home = tmp_path_factory.mktemp("hf-home")
    for role, repo_id in HUB_IDS.items():
        seed_hub_cache(home / "hub", repo_id, getattr(tiny_models, role))
    return home


@pytest.fixture
def offline_hub(monkeypatch, tiny_hub_home):
    """This test sees ``tiny_hub_home`` as its Hugging Face cache, offline."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tiny_hub_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tiny_hub_home


@pytest.fixture
def empty_hub(monkeypatch, tmp_path):
    """An empty Hugging Face cache, offline (nothing fetched)."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "empty-hf-home"


# ------------------------------------------------------------------------------------------------------------
def synthetic_arm(name: str, concurrencies, step_s: float, verify_ct: int | None = None, kind: str | None = None):
    """A measured arm built from request records, no server: each request emits 9 tokens, one every ``step_s``
    after the first, in ``verify_ct`` verify steps (None: no speculation). Its kind is its name unless given."""
    from eagle3lab.bench.metrics import RequestRecord, compute_point_metrics
    from eagle3lab.bench.sweep import ARM_MEASURED, ArmResult, PointResult

    points = []
    for conc in concurrencies:
        records = [RequestRecord(request_id=f"{name}{conc}-{i}", concurrency=conc, phase="measure", ok=True,
                                 t_scheduled=0.0, t_sent=0.0, token_times=[0.05 + k * step_s for k in range(9)],
                                 t_end=0.05 + 8 * step_s, prompt_len=32, prompt_tokens=32, completion_tokens=9,
                                 spec_verify_ct=verify_ct, finish_reason="length") for i in range(conc)]
        points.append(PointResult(conc, "ok", None, compute_point_metrics(records), None, conc, 0, 0, True, "now"))
    return ArmResult(name=name, status=ARM_MEASURED, kind=kind or name, points=points)
