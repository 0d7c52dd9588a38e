"""A run is modelled and plotted as its profile's own model and GPU, never the incident's by default (issue 41,
item 6).

Found by reading: any non-cpu profile was modelled as Kimi-K2.5 with its EAGLE-3 drafter on RTX PRO 6000 Blackwell,
so gpu-1x's tiny-model points on an H200 would have been drawn on the incident's figures and calibrated as the
incident's model. Now the profile's ``cost_model`` keys say what its run is: the tiny pair it served on the GPU its
benchmark record names, or a named model and GPU; a run nothing applies to is not modelled, in one line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import yaml

from conftest import synthetic_arm
from eagle3lab.bench import host
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.costmodel import gpus, presets
from eagle3lab.errors import PerfModelError, ProfileError
from eagle3lab.notebook import benchmark
from eagle3lab.paths import params_dir
from eagle3lab.report import figures, model_evidence
from eagle3lab.report.figures import model_figures
from eagle3lab.report.run_model import is_incident, modelled_as, run_deployment
from eagle3lab.runtime import gpuinfo
from eagle3lab.runtime.profiles import CostModelHardware, CostModelModel, MEASURED, SERVED, load_profile
from timing import patience

H200 = "NVIDIA H200"


@pytest.fixture
def outputs(tmp_path, monkeypatch):
    for name in ("artifacts", "figures"):
        monkeypatch.setenv(f"EAGLE3LAB_{name.upper()}_DIR", str(tmp_path / name))
    return tmp_path


def gpu_run(profile: str, gpu_names: list[str] | None, outputs: Path | None = None,
            concurrencies=(1, 4)) -> BenchReport:
    """A benchmark record of a cuda profile as notebook 03 saves it, naming the GPUs its servers had."""
    report = BenchReport.create(profile, [synthetic_arm("baseline", concurrencies, 0.02),
                                          synthetic_arm("eagle3", concurrencies, 0.04, verify_ct=6)],
                                gpus=gpu_names)
    if outputs is not None:
        report.save(outputs / "artifacts" / f"03_bench.{profile}" / "bench_report.json")
    return report


def test_a_gpu_1x_run_on_an_h200_is_the_tiny_model_on_an_h200():
    profile = load_profile("gpu-1x")
    report = gpu_run("gpu-1x", [H200])
    assert host.recorded_gpus(BenchReport.from_dict(report.to_dict()).machine) == [H200]
    dep, where = run_deployment(profile, report)
    assert dep.target.name == "tiny Kimi-K2.5 (8 layers, float32)" and dep.target.num_layers == 8
    assert dep.hardware.name == gpus.hardware_preset("h200").name and dep.tp == 1
    assert "Kimi-K2.5 (INT4" not in dep.target.name and "RTX" not in dep.hardware.name
    assert "measured plain single-stream TPOT" in where and "gpu-1x" in where
    assert not is_incident(profile, modelled_as(profile, report))


def test_blackwell_8x_is_still_the_incidents_deployment_also_when_its_gpu_is_measured():
    profile = load_profile("blackwell-8x")
    assert profile.cost_model is not None and profile.cost_model.model == "kimi-k2.5"
    dep, _ = run_deployment(profile, gpu_run("blackwell-8x", None))
    assert (dep.target.name, dep.drafter.name) == (presets.kimi_k25().name, "Kimi-K2.5 EAGLE-3 drafter")
    assert dep.hardware.name == gpus.hardware_preset("rtx-pro-6000-blackwell").name and dep.tp == 8
    measured = profile.model_copy(update={"cost_model": profile.cost_model.model_copy(
        update={"hardware": MEASURED})})
    run = modelled_as(measured, gpu_run("blackwell-8x", ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8))
    assert is_incident(measured, run) and run.keys == ("kimi-k2.5", "rtx-pro-6000-blackwell")


def test_only_the_incidents_deployment_is_calibrated_on_the_engineers_rate():
    """Without a measured single-stream point the incident's model falls back on the reported rate; the tiny
    model on an H200 is never calibrated on Kimi-K2.5's rate."""
    _, where = run_deployment(load_profile("blackwell-8x"))
    assert "reported 63.6" in where
    with pytest.raises(PerfModelError) as err:
        run_deployment(load_profile("gpu-1x"), gpu_run("gpu-1x", [H200], concurrencies=(4,)))
    assert err.value.problem == "no_single_stream"


def test_points_go_on_the_incidents_figures_only_for_the_incidents_deployment(outputs, monkeypatch):
    drawn = {}

    def incident_figures(measured=()):
        drawn["measured"] = list(measured)
        return {}

    monkeypatch.setattr(figures, "incident_figures", incident_figures)
    monkeypatch.setattr(figures, "validation_figure", lambda: outputs / "model_validation.png")
    gpu_run("gpu-1x", [H200], outputs)
    names = {path.name for path in model_figures("gpu-1x")}
    assert drawn["measured"] == [] and {"report_throughput_gpu-1x.png", "report_step_breakdown_gpu-1x.png"} <= names
    gpu_run("blackwell-8x", None, outputs)
    model_figures("blackwell-8x")
    assert {p.arm for p in drawn["measured"]} == {"baseline", "eagle3"}


@pytest.mark.parametrize("gpu_names, why", [
    (["NVIDIA GeForce RTX 4090"], "its GPU, NVIDIA GeForce RTX 4090, has no datasheet preset"),
    ([], "its benchmark record names no GPU"),
])
def test_an_unknown_gpu_is_not_modelled_in_one_line_and_the_rest_renders(outputs, monkeypatch, capsys,
                                                                          gpu_names, why):
    drawn = {}

    def incident_figures(measured=()):
        drawn["measured"] = list(measured)
        return {"speedup": outputs / "report_speedup_x.png"}

    monkeypatch.setattr(figures, "incident_figures", incident_figures)
    monkeypatch.setattr(figures, "validation_figure", lambda: outputs / "model_validation.png")
    path = outputs / "artifacts" / "03_bench.gpu-1x" / "bench_report.json"
    gpu_run("gpu-1x", gpu_names, outputs)
    names = {p.name for p in model_figures("gpu-1x")}
    assert names == {"report_speedup_x.png", "model_validation.png"} and drawn["measured"] == []
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "left out" in x]
    assert "the cost model does not model this gpu-1x run" in line and why in line
    check, missing = model_evidence._run_check("gpu-1x", str(path))
    assert check is None and "\n" not in missing and why in missing and "measured results stand" in missing


def test_cost_model_none_is_not_modelled():
    profile = load_profile("gpu-1x", overrides={"cost_model": "none"})
    assert profile.cost_model is None
    with pytest.raises(PerfModelError) as err:
        run_deployment(profile, gpu_run("gpu-1x", [H200]))
    assert err.value.problem == "not_modelled" and "says cost_model: none" in str(err.value)


def write_profile(tmp_path: Path, base: str, **changes) -> Path:
    data = yaml.safe_load((params_dir() / f"{base}.yaml").read_text())
    data.update(changes)
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("base, value, key, says", [
    ("gpu-1x", {"model": "served", "hardware": "h300"}, "cost_model.hardware", "Input should be 'measured'"),
    ("gpu-1x", {"model": "kimi-k3", "hardware": "h200"}, "cost_model.model", "Input should be 'served'"),
    ("gpu-1x", "nothing", "cost_model", "must be 'none' or a mapping"),
    ("gpu-1x", {"model": "served", "hardware": "measured", "gpu": "h200"}, "cost_model.gpu", "allowed: model, hardware"),
    ("blackwell-8x", {"model": "served", "hardware": "measured"}, "cost_model.model", "serves moonshotai/Kimi-K2.5"),
    ("cpu", {"model": "served", "hardware": "h200"}, "cost_model.hardware", "modelled on the host it ran on"),
])
def test_a_bad_cost_model_key_is_one_line_naming_it(tmp_path, base, value, key, says):
    path = write_profile(tmp_path, base, cost_model=value)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    assert err.value.key == key and says in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(f"{path}: ") and f"key '{key}'" in str(err.value)


def test_a_bad_cost_model_key_ends_the_cli_in_one_line_and_exit_2(tmp_path):
    path = write_profile(tmp_path, "gpu-1x", cost_model={"model": "served", "hardware": "h300"})
    result = subprocess.run([sys.executable, "-m", "eagle3lab", "report", "--profile", str(path), "--no-run"],
                            capture_output=True, text=True, timeout=patience(120))
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0
    assert "key 'cost_model.hardware'" in result.stderr and "Traceback" not in result.stderr


def test_the_profile_loaders_names_are_the_cost_models():
    """The loader spells the names out (it sits below the cost model); they must be the cost model's own."""
    assert set(get_args(CostModelHardware)) - {MEASURED} == set(gpus.HARDWARE)
    assert set(get_args(CostModelModel)) - {SERVED} == set(presets.MODELS)
    assert set(gpus.DEVICE_PRESETS.values()) <= set(gpus.HARDWARE)


def test_a_cuda_run_records_the_gpus_torch_saw(monkeypatch):
    found = gpuinfo.GpuInventory(1, [gpuinfo.Gpu(0, H200, (9, 0), 141 * 2**30)])
    monkeypatch.setattr(gpuinfo, "inventory", lambda: found)
    assert benchmark.run_gpus(load_profile("gpu-1x")) == [H200]
    assert benchmark.run_gpus(load_profile("cpu")) is None
