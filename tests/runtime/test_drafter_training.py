"""The trained drafter build: cache key, atomic cache, determinism, history, the shifted sibling, sglang naming.

A deliberately small recipe keeps this in the fast suite; the cpu profile's own recipe is measured by
``python -m eagle3lab setup`` and recorded in its training.json.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from eagle3lab.errors import ModelPathError, TinyModelError
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.childjson import ask_child
from eagle3lab.runtime.modelinfo import drafter_dir_aux_layer_ids
from eagle3lab.runtime.tinymodel.drafter_training import (
    HISTORY_FILE,
    DrafterRecipe,
    DrafterWorkload,
    build_trained_drafter,
    drafter_cache_key,
    drafter_inputs,
    shifted_drafter,
)

SMALL = DrafterRecipe(train_prompts=96, heldout_prompts=16, optimizer_steps=24, batch_size=16, eval_every=12,
                      learning_rate=5e-3, warmup_steps=4)
WORKLOAD = DrafterWorkload(input_len=12, output_len=10, benchmark_prompts=4)


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    return tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("drafters")


@pytest.fixture(scope="module")
def trained(roots):
    models, drafters = roots
    return build_trained_drafter(5, WORKLOAD, SMALL, cache_root=drafters, models_root=models)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_cache_key_follows_target_ids_recipe_and_workload(roots):
    models, _ = roots
    five = build_tiny_models(cache_root=models, num_layers=5)
    six = build_tiny_models(cache_root=models, num_layers=6)
    base = drafter_cache_key(drafter_inputs(five, SMALL, WORKLOAD))
    assert drafter_cache_key(drafter_inputs(five, SMALL, WORKLOAD)) == base
    assert drafter_cache_key(drafter_inputs(six, SMALL, WORKLOAD)) != base
    assert drafter_cache_key(drafter_inputs(five, dataclasses.replace(SMALL, seed=1), WORKLOAD)) != base
    assert drafter_cache_key(drafter_inputs(five, SMALL, DrafterWorkload(input_len=12, output_len=11,
                                                                         benchmark_prompts=4))) != base


def test_the_drafter_directory_is_the_control_with_trained_weights(trained):
    control = trained.control_dir
    assert json.loads((trained.path / "config.json").read_text()) == json.loads((control / "config.json").read_text())
    assert (trained.path / "tokenizer.json").read_bytes() == (control / "tokenizer.json").read_bytes()
    assert sha256(trained.path / "model.safetensors") != sha256(control / "model.safetensors")
    assert trained.aux_layer_ids == drafter_dir_aux_layer_ids(trained.path) == [1, 2, 3]
    assert not any(p.name.startswith(".") for p in trained.path.parent.iterdir())  # no staging folder left


def test_history_records_curves_scores_and_times(trained):
    history = json.loads((trained.path / HISTORY_FILE).read_text())
    assert history == trained.history
    assert history["cache_key"] == trained.cache_key and "measured here" in history["provenance"]
    curve = history["train_curve"]
    assert [c["step"] for c in curve] == list(range(1, SMALL.optimizer_steps + 1))
    assert all(len(c["loss_per_step"]) == WORKLOAD.draft_steps for c in curve)
    assert curve[-1]["loss"] < curve[0]["loss"]  # it learned something
    assert [e["step"] for e in history["evals"]] == [12, 24]
    for phase in ("rollout_time", "train_time"):
        assert set(history[phase]) == {"wall_s", "cpu_s"}
    final = history["final"]
    assert set(final) == {"heldout", "benchmark"} and final["benchmark"]["prompts"] == WORKLOAD.benchmark_prompts
    for arm in ("aligned", "shifted", "untrained"):
        acceptance = final["heldout"][arm]["acceptance"]
        assert 1.0 <= acceptance["mean_accept_length"] <= WORKLOAD.draft_steps + 1
    assert history["shifted_aux_layer_ids"] == [0, 1, 2]
    trained_acc = final["heldout"]["aligned"]["accuracy_per_step"][0]
    assert trained_acc > final["heldout"]["untrained"]["accuracy_per_step"][0]


def test_second_build_comes_from_the_cache(trained, roots):
    models, drafters = roots
    weights = trained.path / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    again = build_trained_drafter(5, WORKLOAD, SMALL, cache_root=drafters, models_root=models)
    assert again.cache_key == trained.cache_key and again.build_seconds is None
    assert weights.stat().st_mtime_ns == mtime


def test_same_inputs_train_the_same_bytes(trained, roots, tmp_path):
    models, _ = roots
    twin = build_trained_drafter(5, WORKLOAD, SMALL, cache_root=tmp_path, models_root=models)
    assert sha256(twin.path / "model.safetensors") == sha256(trained.path / "model.safetensors")


def test_shifted_sibling_moves_only_the_ids_and_is_cached(trained):
    shifted = shifted_drafter(trained.path)
    assert shifted == trained.path.parent / f"{trained.path.name}-shift-1"
    assert drafter_dir_aux_layer_ids(shifted) == [0, 1, 2]
    ours = json.loads((shifted / "config.json").read_text())
    theirs = json.loads((trained.path / "config.json").read_text())
    ours["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")
    theirs["eagle_config"].pop("eagle_aux_hidden_state_layer_ids")
    assert ours == theirs
    assert sha256(shifted / "model.safetensors") == sha256(trained.path / "model.safetensors")
    mtime = (shifted / "config.json").stat().st_mtime_ns
    assert shifted_drafter(trained.path) == shifted and (shifted / "config.json").stat().st_mtime_ns == mtime


@pytest.mark.parametrize("shift, problem", [(-2, r"\[-1, 0, 1\]"), (1, r"\[2, 3, 4\]"), (0, "a different set")])
def test_shift_out_of_the_capturable_range_is_one_line(trained, shift, problem):
    with pytest.raises(TinyModelError, match=problem) as err:
        shifted_drafter(trained.path, shift=shift)
    assert "\n" not in str(err.value) and "0..3" in str(err.value)


def test_shift_needs_a_depth_and_a_drafter(tmp_path, roots):
    models, _ = roots
    control = build_tiny_models(cache_root=models, num_layers=5).draft_dir
    with pytest.raises(TinyModelError, match="pass num_layers"):
        shifted_drafter(control)
    with pytest.raises(ModelPathError, match="does not exist|not an EAGLE-3 drafter directory"):
        shifted_drafter(tmp_path)


def test_four_layer_ids_cannot_be_shifted_down(roots):
    models, _ = roots
    control = build_tiny_models(cache_root=models, num_layers=4).draft_dir
    with pytest.raises(TinyModelError, match=r"\[-1, 0, 1\] must be a different set within 0\.\.2"):
        shifted_drafter(control, num_layers=4)


def test_bad_recipe_is_one_line():
    with pytest.raises(TinyModelError, match="batch_size 64 exceeds train_prompts 8"):
        DrafterRecipe(train_prompts=8)
    with pytest.raises(TinyModelError, match="optimizer_steps"):
        DrafterRecipe(optimizer_steps=0)


@pytest.mark.server
def test_sglang_load_weights_fills_every_drafter_parameter(trained, tmp_path):
    """sglang's own LlamaForCausalLMEagle3.load_weights over the trained checkpoint, from all-NaN parameters."""
    from eagle3lab.runtime.cpu_harness import cpu_environment

    root = tmp_path / "pair"
    root.mkdir()
    (root / "target").symlink_to(trained.target_dir)
    (root / "draft").symlink_to(trained.path)
    answer = ask_child("eagle3lab.runtime.tinymodel.probe", ["verify", str(root)],
                       env={**os.environ, **cpu_environment(shims=())}, timeout_s=600)
    assert answer.ok, answer.failure()
    assert answer.payload == {"target": [], "draft": []}


def test_replaying_the_benchmark_requests_gives_the_recorded_offline_score(trained):
    """replay_served_requests (the check against a server's own outputs) agrees with the build's own scoring when
    handed the offline greedy outputs of the benchmark prompts."""
    from eagle3lab.runtime.tinymodel.drafter_eval import replay_served_requests
    from eagle3lab.runtime.tinymodel.drafter_training import BENCHMARK_STREAM, _prompts
    from eagle3lab.runtime.tinymodel.target_states import load_text_model, rollout

    prompts = _prompts(WORKLOAD, 1024, BENCHMARK_STREAM, WORKLOAD.benchmark_prompts, WORKLOAD.benchmark_seed)
    greedy = rollout(load_text_model(trained.target_dir), prompts, WORKLOAD.output_len)
    outputs = greedy.tokens[:, WORKLOAD.input_len:].tolist()
    replayed = replay_served_requests(trained.path, trained.target_dir, prompts, outputs)
    assert [r.completion_tokens for r in replayed] == [WORKLOAD.output_len] * len(prompts)
    recorded = trained.history["final"]["benchmark"]["aligned"]["acceptance"]["mean_accept_length"]
    assert sum(r.accept_length for r in replayed) / len(replayed) == pytest.approx(recorded, abs=0.02)
