"""Loads not repeated (issue 41, item 4): the start-up checks run on dummy weights where the profile says so, the
plan's full-weight loads are counted from the profile, and the crash they check still comes where it did, read
from the installed sglang 0.5.9's own source (no server is started here)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from test_rehearsal import rehearsal_overrides

from eagle3lab.package import patching
from eagle3lab.package.location import installed_root
from eagle3lab.preflight.loads import check_loads, full_weight_loads, planned_launches
from eagle3lab.repro.crashrepro import ExpectedCrash
from eagle3lab.runtime.deployment import Models, server_spec, startup_check_load_format, startup_check_patches
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.trace.hooks import SET_LAYERS_TO_CAPTURE

KIMI = "sglang/srt/models/kimi_k25.py"


def test_blackwell_8x_reads_its_checkpoint_at_most_four_times():
    profile = load_profile("blackwell-8x")
    launches = planned_launches(profile)
    assert full_weight_loads(profile) <= 4
    dummy = [(x.notebook, x.launch) for x in launches if not x.full_weights]
    assert dummy == [("01", "EAGLE-3 crash"), ("03", "relaunch: unpatched"), ("03", "relaunch: one-method patch")]
    assert all(x.startup_check for x in launches if not x.full_weights)
    assert not any(x.startup_check for x in launches if x.full_weights), "every server that answers reads real weights"
    print({name: full_weight_loads(load_profile(name)) for name in ("cpu", "gpu-1x", "blackwell-8x")})


def test_the_count_follows_the_profile_not_a_constant():
    real = load_profile("blackwell-8x", overrides={"startup_checks_load_format": "auto"})
    assert full_weight_loads(real) == len(planned_launches(real))  # every launch reads the checkpoint
    dummy = load_profile("blackwell-8x")
    assert full_weight_loads(real) - full_weight_loads(dummy) == 3  # the three start-up checks
    repeats = load_profile("blackwell-8x", overrides={"bench_launch_repeats": 2})
    assert full_weight_loads(repeats) == full_weight_loads(dummy) + 4, "each repeat relaunches the pair"
    assert full_weight_loads(dummy, bench=False) == full_weight_loads(dummy) - 1  # no baseline arm


def test_the_preflight_row_names_the_loads():
    check = check_loads(load_profile("blackwell-8x"))
    assert check.data["full_weight_loads"] == 3 and len(check.data["launches"]) == 6
    assert check.detail.startswith("3 of 6 planned launches read the checkpoint; 3 start-up checks run on dummy")
    assert "read it too" in check_loads(load_profile("cpu")).detail  # cpu: the tiny weights load in seconds


@pytest.mark.parametrize("name, expected", [("blackwell-8x", "dummy"), ("cpu", None), ("gpu-1x", None)])
def test_start_up_checks_pass_the_profiles_load_format(name, expected):
    profile = load_profile(name)
    models = Models("/models/target", "/models/draft")
    argv = server_spec(profile, models, speculative=True, load_format=startup_check_load_format(profile)).argv()
    if expected is None:
        assert "--load-format" not in argv
    else:
        assert argv[argv.index("--load-format") + 1] == expected
    assert "--load-format" not in server_spec(profile, models, speculative=False).argv(), "the control serves"


def test_the_rehearsal_runs_the_start_up_checks_on_dummy_weights():
    """The GPU rehearsal overrides only device and size keys, so its crash and its chain's first two steps take
    blackwell-8x's dummy weights (tests/test_rehearsal.py asserts it from the server logs)."""
    profile = load_profile("blackwell-8x", overrides=rehearsal_overrides())
    assert startup_check_load_format(profile) == "dummy"
    assert full_weight_loads(profile) == full_weight_loads(load_profile("blackwell-8x"))


def test_dummy_load_format_goes_through_sglangs_own_parser():
    import argparse

    from sglang.srt.server_args import ServerArgs

    profile = load_profile("blackwell-8x")
    spec = server_spec(profile, Models(profile.target_model, profile.draft_model), speculative=True,
                       load_format="dummy")
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    assert vars(parser.parse_args(spec.argv()[3:]))["load_format"] == spec.server_args()["load_format"] == "dummy"


def test_only_a_patched_start_up_check_on_dummy_weights_gets_the_post_load_patch():
    one = (patching.ONE_METHOD_PATCH,)
    assert startup_check_patches("dummy", ()) == (), "the unpatched crash runs on the release as shipped"
    assert startup_check_patches("dummy", one) == (patching.ONE_METHOD_PATCH, patching.DUMMY_POST_LOAD_PATCH)
    assert startup_check_patches(None, one) == one


def test_the_one_method_and_post_load_patches_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))  # keep the backups out of the real cache
    root = tmp_path / "site-packages"
    (root / KIMI).parent.mkdir(parents=True)
    shutil.copyfile(installed_root() / KIMI, root / KIMI)
    for name in startup_check_patches("dummy", (patching.ONE_METHOD_PATCH,)):
        assert patching.apply(name, root).status == patching.APPLIED, name
    text = (root / KIMI).read_text()
    assert "def set_eagle3_layers_to_capture" in text and "def post_load_weights" in text


# --- the crash on dummy weights, read from sglang 0.5.9's source ------------------------------------------------


def _function(path: Path, qualname: str) -> ast.FunctionDef:
    cls, name = qualname.split(".")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _calls(node: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted callee) of every call under ``node``, in line order."""
    found = []
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            found.append((call.lineno, ast.unparse(call.func)))
    return sorted(found)


def _first_line(calls: list[tuple[int, str]], callee: str) -> int:
    return next(line for line, name in calls if name == callee)


def test_the_dummy_loader_runs_no_forward():
    loader = _function(installed_root() / "sglang/srt/model_loader/loader.py", "DummyModelLoader.load_model")
    names = [name for _, name in _calls(loader)]
    assert "initialize_dummy_weights" in names and "post_load_weights" in names
    assert not [n for n in names if "forward" in n or n in ("model", "self.model")], names


def test_the_crash_is_raised_before_any_forward_so_dummy_weights_reach_it():
    """sglang 0.5.9 reaches the EAGLE-3 hook on the wrapper after ``load_model`` returns and before the first
    forward on every start-up path: ``ModelRunner.initialize`` (no graphs: CPU), ``CudaGraphRunner.__init__``
    before ``capture()`` (graphs), ``ModelRunner._dummy_run`` before ``self.model.forward`` (FlashInfer autotune).
    The loader's weights are never read before the raise, so notebook 01 expects the same signature on dummy
    weights."""
    from eagle3lab.trace import audit
    from eagle3lab.trace.sources import open_source
    from eagle3lab.trace.startup import StartupProfile

    executor = installed_root() / "sglang/srt/model_executor"
    initialize = _calls(_function(executor / "model_runner.py", "ModelRunner.initialize"))
    hook = f"self.model.{SET_LAYERS_TO_CAPTURE}"
    assert _first_line(initialize, "self.load_model") < _first_line(initialize, hook)
    graphs = _calls(_function(executor / "cuda_graph_runner.py", "CudaGraphRunner.__init__"))
    assert _first_line(graphs, f"self.model_runner.model.{SET_LAYERS_TO_CAPTURE}") < _first_line(graphs, "self.capture")
    warmup = _calls(_function(executor / "model_runner.py", "ModelRunner._dummy_run"))
    assert _first_line(warmup, hook) < _first_line(warmup, "self.model.forward")

    sites = {"srt/model_executor/model_runner.py": ("ModelRunner.initialize", "ModelRunner._dummy_run"),
             "srt/model_executor/cuda_graph_runner.py": ("CudaGraphRunner.__init__",)}
    src = open_source("installed")
    if src.modified:
        src = open_source(src.version)
    gpu = {"device": "cuda", "disable_cuda_graph": False, "disable_flashinfer_autotune": False}
    launches = {"cpu": StartupProfile.cpu(),  # the rehearsal's and the cpu profile's start-up
                "sm_120, moe auto": StartupProfile.resolved({**gpu, "moe_runner_backend": "auto"}, (12, 0)),
                "sm_90, flashinfer_trtllm": StartupProfile.resolved({**gpu, "moe_runner_backend": "flashinfer_trtllm"},
                                                                    (9, 0))}
    for label, startup in launches.items():
        first = audit.verdict(src, profiles=(startup,))["first_raise"][startup.name]
        path, line = first["where"].rsplit(":", 1)
        assert first["member"] == ExpectedCrash().missing_attribute, label
        enclosing = [q for q in sites[path] if _function(installed_root() / "sglang" / path, q).lineno <= int(line)
                     <= _function(installed_root() / "sglang" / path, q).end_lineno]
        assert enclosing, f"{label}: the first raise {first['where']} is outside the functions checked above"


def test_the_chain_record_says_which_weights_and_patches_a_step_launched_with(tmp_path):
    from eagle3lab.fix.relaunch import ChainStep, StepResult

    step = ChainStep("one-method patch", (patching.ONE_METHOD_PATCH,))
    on_dummy = StepResult(step, "died", 1.0, None, tmp_path / "log", load_format="dummy").record()
    assert on_dummy.load_format == "dummy"
    assert on_dummy.patches == [patching.ONE_METHOD_PATCH, patching.DUMMY_POST_LOAD_PATCH]
    real = StepResult(step, "died", 1.0, None, tmp_path / "log").record()
    assert (real.load_format, real.patches) == ("auto", [patching.ONE_METHOD_PATCH])


def test_run_chain_makes_every_step_but_the_last_a_start_up_check_with_run_step_replaced(monkeypatch, tmp_path):
    """run_step launches a real server, which a fast test cannot; it is replaced to see what run_chain asks of it."""
    from eagle3lab.fix import relaunch

    asked = []
    monkeypatch.setattr(relaunch, "run_step", lambda step, *args, startup_check, **kw: asked.append(
        (step.name, startup_check)) or relaunch.StepResult(step, "died", 0.0, None, tmp_path / "log"))
    relaunch.run_chain(load_profile("blackwell-8x"), Models("t", "d"), tmp_path, ())
    assert asked == [("unpatched", True), ("one-method patch", True), ("full delegation patch", False)]


# --- the ready timeout from the checkpoint's size ----------------------------------------------------------------


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as file:
        file.truncate(size)  # a real file of that size, no blocks written


def test_the_ready_timeout_adds_the_checkpoints_read_time(tmp_path):
    from eagle3lab.runtime.deployment import checkpoint_bytes, ready_timeout_s

    profile = load_profile("blackwell-8x")
    model = tmp_path / "model"
    model.mkdir()
    sizes = [3_000_000_000, 2_000_000_000]
    for i, size in enumerate(sizes):
        _sparse(tmp_path / f"blob{i}", size)
        (model / f"model-0000{i + 1}.safetensors").symlink_to(tmp_path / f"blob{i}")  # as a hub snapshot links them
    (model / "config.json").write_text("{}")
    assert checkpoint_bytes(str(model)) == sum(sizes)
    models = Models(str(model), "/models/draft")
    read_s = sum(sizes) / (profile.checkpoint_read_mb_s * 1e6)
    assert ready_timeout_s(profile, models) == pytest.approx(profile.ready_timeout_s + read_s)
    assert ready_timeout_s(profile, models, "dummy") == profile.ready_timeout_s, "dummy weights read nothing"
    flat = load_profile("blackwell-8x", overrides={"checkpoint_read_mb_s": None})
    assert ready_timeout_s(flat, models) == flat.ready_timeout_s
    cpu = load_profile("cpu")
    assert cpu.checkpoint_read_mb_s is None and ready_timeout_s(cpu, models) == cpu.ready_timeout_s


def test_the_preflight_row_gives_the_timeout_for_kimis_index_size(tmp_path):
    """Kimi-K2.5's size from its index (tests/kimi_checkpoint.py); a checkpoint reporting that many bytes."""
    import json

    from kimi_checkpoint import write_checkpoint

    from eagle3lab.runtime.checkpoints import Checkpoint

    folder = write_checkpoint(tmp_path)
    total = json.loads((folder / "model.safetensors.index.json").read_text())["metadata"]["total_size"]
    _sparse(folder / "model-00001-of-00001.safetensors", total)
    profile = load_profile("blackwell-8x")
    target = Checkpoint("target", profile.target_model, "local", str(folder))
    target.bytes = total
    check = check_loads(profile, target)
    expected = profile.ready_timeout_s + total / (profile.checkpoint_read_mb_s * 1e6)
    assert check.data["ready_timeout_s"] == pytest.approx(expected)
    assert f"{expected:,.0f} s to be ready" in check.detail
    print(check.detail)
