"""Deterministic prompts and sweep validation: the same requests for every arm, bad settings in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3lab.errors import BenchError
from eagle3lab.bench.workload import SweepConfig, make_prompts, model_vocab_size


def config(**kw) -> SweepConfig:
    base = dict(concurrency=[1, 2], input_len=16, output_len=8, num_prompts=5, vocab_size=1024, token_id_low=16)
    base.update(kw)
    return SweepConfig(**base)


def test_prompts_repeat_exactly_for_the_same_seed():
    first, again = make_prompts(config()), make_prompts(config())
    assert first == again
    assert len(first) == 5 and all(len(p) == 16 for p in first)
    assert all(16 <= t < 1024 for p in first for t in p)


def test_other_seed_or_stream_gives_other_prompts():
    base = make_prompts(config())
    assert make_prompts(config(seed=1)) != base
    warm = make_prompts(config(), "warmup-c2", 2)
    assert len(warm) == 2 and all(w[:4] != b[:4] for w in warm for b in base)


def test_warmup_is_at_least_the_concurrency():
    assert config().warmup_count(4) == 4
    assert config(warmup_requests=10).warmup_count(4) == 10
    assert config(warmup_requests=0).warmup_count(3) == 3


@pytest.mark.parametrize(
    "kw, key",
    [
        (dict(concurrency=[]), "concurrency"),
        (dict(concurrency=[2, 0]), "concurrency"),
        (dict(input_len=0), "input_len"),
        (dict(num_prompts=-1), "num_prompts"),
        (dict(token_id_low=1024), "token_id_low"),
        (dict(prompt_kind="text"), "tokenizer_dir"),
        (dict(prompt_kind="images"), "prompt_kind"),
        (dict(read_bufsize=1024), "read_bufsize"),
    ],
)
def test_bad_sweep_settings_fail_in_one_line(kw, key):
    with pytest.raises(BenchError) as info:
        config(**kw)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_round_trip_and_profile(cpu_profile):
    c = SweepConfig.from_profile(cpu_profile, vocab_size=512)
    assert c.concurrency == cpu_profile.bench_concurrency and c.input_len == cpu_profile.bench_input_len
    assert c.vocab_size == 512
    assert SweepConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_text_prompts_decode_to_the_same_token_count(tiny_models):
    from transformers import AutoTokenizer

    text = make_prompts(config(prompt_kind="text", tokenizer_dir=tiny_models.target,
                               vocab_size=model_vocab_size(tiny_models.target)))
    tokenizer = AutoTokenizer.from_pretrained(tiny_models.target)
    assert all(isinstance(t, str) for t in text)
    assert [len(tokenizer.encode(t, add_special_tokens=False)) for t in text] == [16] * 5


def test_vocab_size_is_read_from_the_model(tiny_models, tmp_path):
    wrapper = json.loads((Path(tiny_models.target) / "config.json").read_text())
    assert model_vocab_size(tiny_models.target) == wrapper["text_config"]["vocab_size"]
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 77}))
    assert model_vocab_size(tmp_path) == 77
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BenchError) as err:
        model_vocab_size(tmp_path)
    assert (err.value.problem, err.value.key, err.value.path) == ("missing", "vocab_size", tmp_path / "config.json")
    with pytest.raises(BenchError) as err:
        model_vocab_size(tmp_path / "missing")
    assert (err.value.problem, err.value.path) == ("unreadable", tmp_path / "missing" / "config.json")


def test_a_custom_code_tokenizer_needs_the_profiles_trust_remote_code(tiny_models, tmp_path, monkeypatch):
    """Kimi's tokenizer is code shipped with the checkpoint (auto_map); without trust_remote_code it cannot load."""
    import shutil

    model = tmp_path / "custom-tokenizer-model"
    shutil.copytree(tiny_models.target, model)
    (model / "custom_tok.py").write_text("from transformers import PreTrainedTokenizerFast\n\n\n"
                                         "class CustomTok(PreTrainedTokenizerFast):\n    pass\n")
    tok_config = json.loads((model / "tokenizer_config.json").read_text())
    tok_config.update({"tokenizer_class": "CustomTok", "auto_map": {"AutoTokenizer": ["custom_tok.CustomTok", None]}})
    (model / "tokenizer_config.json").write_text(json.dumps(tok_config))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    kwargs = dict(prompt_kind="text", tokenizer_dir=str(model), vocab_size=model_vocab_size(model))
    with pytest.raises(BenchError) as err:
        make_prompts(config(**kwargs))
    assert (err.value.key, err.value.path) == ("tokenizer_dir", model)
    assert len(make_prompts(config(**kwargs, trust_remote_code=True))) == 5
