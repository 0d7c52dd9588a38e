"""Tiny wrapper configs: the text shape of the tiny target, written once into the cache."""

from __future__ import annotations

import json

import pytest

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel import configs
from eagle3lab.runtime.tinymodel.wrappers import WRAPPER_CONFIGS, build_wrapper_model


@pytest.mark.parametrize("entry", sorted(WRAPPER_CONFIGS))
def test_wrapper_config_matches_the_tiny_drafter(entry, tmp_path):
    root = build_wrapper_model(entry, 4, cache_root=tmp_path)
    config = json.loads((root / "config.json").read_text())
    assert config["architectures"] == [entry]
    text = config.get("text_config", config)
    assert text["hidden_size"] == configs.HIDDEN_SIZE and text["vocab_size"] == configs.VOCAB_SIZE
    assert text["num_hidden_layers"] == 4
    assert build_wrapper_model(entry, 4, cache_root=tmp_path) == root  # cached


def test_unknown_wrapper_is_one_line(tmp_path):
    with pytest.raises(TinyModelError) as err:
        build_wrapper_model("X", cache_root=tmp_path)
    assert (err.value.problem, err.value.parameter, err.value.value) == ("unknown", "entry", "X")
    assert "\n" not in str(err.value)
