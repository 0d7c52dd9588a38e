"""Preflight sees the box (issue 41, item 5): /dev/shm, host RAM against the checkpoint, Python.h and a compiler for
Triton, libnuma.so.1, and the driver against the torch set-up installs. The facts are described (``HostFacts``, a
constructed GPU inventory; ``_mocked`` in the name); the checks and the runner are the real ones."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import on_cpu

from eagle3lab import preflight
from eagle3lab.errors import PreflightFailed
from eagle3lab.preflight import runner
from eagle3lab.preflight.host import HostFacts, read_host_facts
from eagle3lab.runtime.gpuinfo import Gpu, GpuInventory
from eagle3lab.runtime.profiles import load_profile

GIB = 2**30
KIMI_BYTES = 595_100_000_000  # Kimi-K2.5's index total_size, rounded as params/blackwell-8x.yaml quotes it (595.1 GB)
GOOD = HostFacts(shm_bytes=64 * GIB, ram_bytes=1024 * GIB, python_include="/usr/include/python3.11", python_h=True,
                 compiler="/usr/bin/gcc", libnuma=True)
DOCKER_SHM = 64 * 2**20  # Docker's default --shm-size


def box(**changes: object) -> HostFacts:
    return dataclasses.replace(GOOD, **changes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def b8x():
    return load_profile("blackwell-8x")


def test_dockers_default_shm_fails_tp_8_in_one_line_mocked(b8x):
    check = preflight.check_shm(b8x, box(shm_bytes=DOCKER_SHM))
    assert check.outcome == "fail" and "\n" not in check.detail
    assert check.detail.startswith("/dev/shm is 67.1 MB, below the 1 GiB NCCL asks for") and "8 ranks" in check.detail
    assert "--shm-size=1g" in check.fix
    assert preflight.check_shm(b8x, box(shm_bytes=None)).outcome == "fail"
    assert preflight.check_shm(b8x, GOOD).outcome == "ok"


def test_shm_is_information_only_at_tp_1_and_skipped_on_cpu_mocked():
    assert preflight.check_shm(load_profile("gpu-1x"), box(shm_bytes=DOCKER_SHM)).outcome == "info"
    rows = preflight.check_host(load_profile("blackwell-8x", on_cpu("blackwell-8x")), box(shm_bytes=0, libnuma=False,
                                                                                     python_h=False), 0)
    assert {c.outcome for c in rows} == {"skipped"}


def test_host_ram_below_the_checkpoint_warns_mocked(b8x):
    check = preflight.check_host_ram(b8x, box(ram_bytes=512 * GIB), KIMI_BYTES)
    assert check.outcome == "warn" and "less than the target checkpoint's 595.1 GB" in check.detail
    assert "checkpoint_read_mb_s" in check.fix
    assert preflight.check_host_ram(b8x, GOOD, KIMI_BYTES).outcome == "ok"
    assert preflight.check_host_ram(b8x, GOOD, 0).outcome == "info"


def test_triton_needs_python_h_and_a_compiler_mocked(b8x):
    no_header = preflight.check_triton_build(b8x, box(python_h=False))
    assert no_header.outcome == "fail" and "Python.h (not in /usr/include/python3.11)" in no_header.detail
    assert "python3-dev" in no_header.fix
    no_cc = preflight.check_triton_build(b8x, box(compiler=None))
    assert no_cc.outcome == "fail" and "a C compiler (CC, gcc or clang)" in no_cc.detail
    assert preflight.check_triton_build(b8x, GOOD).outcome == "ok"


def test_libnuma_missing_fails_mocked(b8x):
    check = preflight.check_libnuma(b8x, box(libnuma=False))
    assert check.outcome == "fail" and "libnuma.so.1" in check.detail and "libnuma1" in check.fix
    assert preflight.check_libnuma(b8x, GOOD).outcome == "ok"


def test_the_facts_of_this_machine_read_without_error():
    """Real: whatever this machine has, each fact has the right type (no assertion on its values)."""
    facts = read_host_facts()
    assert facts.shm_bytes is None or facts.shm_bytes >= 0
    assert isinstance(facts.python_h, bool) and isinstance(facts.libnuma, bool)


def h200(torch_cuda: str | None, driver: str) -> GpuInventory:
    """One H200 as gpuinfo reports it; torch's CUDA as given (None: torch not installed yet)."""
    return GpuInventory(1, [Gpu(0, "NVIDIA H200", (9, 0), 140 * GIB)], ["sm_90"],
                        None if torch_cuda is None else "2.11.0", torch_cuda, driver, used_mib=[0])


def test_an_h200_driver_below_570_fails_even_before_setup_mocked_gpu():
    for inv in (h200(None, "565.57.01"), h200("13.0", "565.57.01")):
        check = preflight.check_driver(inv)
        assert check.outcome == "fail", check.detail
        assert "570.26, which CUDA 12.8 (the torch make setup installs) needs" in check.detail
        assert check.fix == "upgrade the NVIDIA driver to 570.26 or newer"


def test_the_h200_of_the_device_check_passes_the_driver_row_mocked_gpu():
    """FINDINGS, 2026-12-04: one H200, driver 580.159.04, torch CUDA 13.0 (was 'not in the table', info)."""
    check = preflight.check_driver(h200("13.0", "580.159.04"))
    assert check.outcome == "ok" and "torch CUDA 13.0 is not in the table" in check.detail


def test_preflight_stops_at_the_first_host_failure_mocked_gpu(offline_hub, tiny_models, monkeypatch, tmp_path):
    """Eight constructed Blackwells, everything else real, in Docker's default /dev/shm and without libnuma: the
    run's one line names /dev/shm first and counts the rest."""
    def inv() -> GpuInventory:
        return GpuInventory(8, [Gpu(i, "NVIDIA RTX PRO 6000 Blackwell", (12, 0), 96 * GIB) for i in range(8)],
                            ["sm_120"], "2.9.1+cu128", "12.8", "580.65.06", cudnn_version=91002, used_mib=[3] * 8)

    monkeypatch.setattr(runner, "read_host_facts", lambda: box(shm_bytes=DOCKER_SHM, libnuma=False))
    monkeypatch.setattr(runner, "run_preflight", lambda profile, quick: preflight.run_preflight(
        profile, quick=quick, inventory=inv))
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    with pytest.raises(PreflightFailed) as err:
        runner.require(load_profile("blackwell-8x"), echo=None)
    line = str(err.value)
    assert "\n" not in line and line.startswith("/dev/shm is 67.1 MB"), line
    assert err.value.failed[:2] == ("/dev/shm", "libnuma")
