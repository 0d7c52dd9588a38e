"""Depth, entry class and aux layer ids come from the models' own configs; hub ids resolve to local snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HUB_IDS

from eagle3lab.errors import ModelPathError, ModelsNotFetched
from eagle3lab.runtime import deployment, modelinfo
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.tinymodel.configs import scale_aux_layer_ids


def test_the_tiny_drafter_config_names_its_ids_and_the_target_its_depth(tiny_models):
    draft, target = modelinfo.read_config(tiny_models.draft), modelinfo.read_config(tiny_models.target)
    depth = load_profile("cpu").model_num_layers
    assert modelinfo.drafter_aux_layer_ids(draft) == scale_aux_layer_ids(depth)
    assert modelinfo.num_layers(target) == depth
    assert modelinfo.entry_class(target) == "KimiK25ForConditionalGeneration"
    assert tiny_models.aux_layer_ids == tuple(scale_aux_layer_ids(depth))


@pytest.mark.parametrize("config", [{}, {"eagle_config": None}, {"eagle_config": {"use_aux_hidden_state": True}}])
def test_a_drafter_without_ids_gets_sglangs_defaults(config):
    assert modelinfo.drafter_aux_layer_ids(config) is None


def test_depth_is_read_from_a_multimodal_wrappers_text_config():
    assert modelinfo.num_layers({"text_config": {"num_hidden_layers": 61}, "num_hidden_layers": 1}) == 61
    assert modelinfo.num_layers({"num_hidden_layers": 8}) == 8


def test_a_missing_config_is_one_line(tmp_path):
    with pytest.raises(ModelPathError) as err:
        modelinfo.read_config(tmp_path)
    assert (err.value.problem, err.value.path) == ("missing", tmp_path / "config.json")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelPathError) as err:
        modelinfo.read_config(tmp_path)
    assert (err.value.problem, err.value.path) == ("unreadable", tmp_path / "config.json")


def test_the_gpu_profile_without_its_checkpoints_is_a_not_fetched_layer_setup(empty_hub):
    setup = deployment.layer_setup(load_profile("blackwell-8x"))
    assert setup.status == "not fetched" and not setup.usable
    assert (setup.startup, setup.cuda_graphs, setup.aux_layer_ids, setup.depth) == ("gpu", True, None, None)
    assert "python -m eagle3lab fetch-models --profile blackwell-8x" in setup.fix


def test_the_gpu_profile_reads_its_layer_setup_from_the_hub_snapshot(offline_hub, tiny_models):
    setup = deployment.layer_setup(load_profile("blackwell-8x"))  # the hub snapshot holds the tiny pair
    ids = list(tiny_models.aux_layer_ids)
    assert setup.status == "read" and setup.aux_layer_ids == ids and setup.depth == load_profile("cpu").model_num_layers
    assert "models--AQ-MedAI--Kimi-K25-eagle3/snapshots" in setup.draft_config
    assert setup.row()["drafter aux layer ids"] == ids


def test_resolve_models_gives_local_snapshots_for_hub_ids(offline_hub, tiny_models):
    models = deployment.resolve_models(load_profile("blackwell-8x"))
    assert "models--moonshotai--Kimi-K2.5/snapshots" in models.target
    assert (models.target_source, models.draft_source) == (HUB_IDS["target"], HUB_IDS["draft"])
    assert models.trust_remote_code and models.aux_layer_ids == tiny_models.aux_layer_ids
    assert json.loads((Path(models.target) / "config.json").read_text())["architectures"]


def test_resolve_models_names_what_is_missing_and_the_fetch_command(empty_hub):
    with pytest.raises(ModelsNotFetched) as err:
        deployment.resolve_models(load_profile("blackwell-8x"))
    message = str(err.value)
    assert message.startswith("target moonshotai/Kimi-K2.5 and draft AQ-MedAI/Kimi-K25-eagle3 are not in the "
                              "Hugging Face cache at ")
    assert message.endswith("fetch with: python -m eagle3lab fetch-models --profile blackwell-8x")
    assert "\n" not in message
