"""The conversation workload (issue 41, item 3): a ShareGPT-format set fetched into the hub cache, drawn seeded with
no prompt repeated within a point, a sweep that needs more prompts than the set has refused before any server, and
the measured lengths fed to the cost model's context. The set here is written by this test, not copied data."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle3lab.bench.lengths import measured_context, workload_record
from eagle3lab.bench.sweep import BenchReport
from eagle3lab.bench.workload import (SweepConfig, check_prompt_supply, conversation_turns, make_prompts,
                                      measure_prompts)
from eagle3lab.errors import BenchError, ModelPathError, ProfileError
from eagle3lab.runtime import datasets
from eagle3lab.runtime.profiles import load_profile
from tests.conftest import seed_hub_cache, synthetic_arm

REPO = "anon8231489123/ShareGPT_Vicuna_unfiltered"
FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"


def _words(i: int, n: int) -> str:
    """Text the tiny word-level tokenizer keeps (single letters and digits), distinct per ``i``."""
    return " ".join(list(" ".join(str(i))) + ["a", "b", "c"][: 1 + i % 3] * n).replace("  ", " ")


def sharegpt_items(count: int = 36) -> list[dict]:
    """``count`` conversations of one to three exchanges, plus the kinds of item a real set holds."""
    items = []
    for i in range(count):
        turns = []
        for k in range(1 + i % 3):
            turns += [{"from": "human", "value": _words(i, k + 1)}, {"from": "gpt", "value": _words(i + 100, 2)}]
        items.append({"id": f"c{i}", "conversations": turns})
    items.append({"id": "dup", "conversations": items[0]["conversations"][:2]})  # the same first exchange again
    items.append({"id": "long", "conversations": [{"from": "human", "value": "a " * 400}]})  # over any cap here
    items.append({"id": "empty", "conversations": []})
    items.append({"id": "system", "conversations": [{"from": "system", "value": "x"}, {"from": "gpt", "value": "y"}]})
    return items


@pytest.fixture
def sharegpt_file(tmp_path):
    path = tmp_path / FILE
    path.write_text(json.dumps(sharegpt_items()), encoding="utf-8")
    return path


def config_for(path, tiny_models, concurrency=(1, 4), num_prompts=4, per_c=None, input_len=64):
    return SweepConfig(list(concurrency), input_len, 8, num_prompts, prompts_per_concurrency=per_c,
                       prompt_kind="conversations", tokenizer_dir=tiny_models.target, dataset_path=str(path))


def test_conversation_turns_alternate_from_the_first_user_turn():
    item = {"conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "q1"},
                              {"from": "gpt", "value": "r1"}, {"from": "human", "value": "q2"},
                              {"from": "human", "value": "q3"}]}
    assert [m["role"] for m in conversation_turns(item)] == ["user", "assistant", "user"]
    assert conversation_turns({"conversations": "no"}) == [] and conversation_turns(None) == []


def test_prompts_are_distinct_seeded_within_the_cap_and_warmups_never_measured(sharegpt_file, tiny_models):
    config = config_for(sharegpt_file, tiny_models, concurrency=(1, 4), per_c=3)  # the 4 point: 12 + 4 warm-up
    assert check_prompt_supply(config) == 16
    measured = measure_prompts(config, 4)
    warm = make_prompts(config, "warmup-c4", 4)
    assert len(measured) == 12 and len({tuple(p) for p in measured}) == 12, "no prompt repeats within a point"
    assert not {tuple(p) for p in warm} & {tuple(p) for p in measured}, "warm-ups share no conversation"
    assert all(len(p) <= config.input_len for p in measured + warm)
    assert measure_prompts(config, 1) == measured[:4], "the concurrency-1 prompts start every point (noise floor)"
    assert measured == measure_prompts(dataclasses.replace(config), 4), "seeded: every arm sends the same prompts"
    assert measure_prompts(dataclasses.replace(config, seed=1), 4) != measured, "another seed, another draw"


def test_multi_turn_prompts_hold_earlier_turns_when_they_fit(sharegpt_file, tiny_models):
    from transformers import AutoTokenizer  # the test checks against the model's own chat template

    tokenizer = AutoTokenizer.from_pretrained(tiny_models.target)
    longest = max(measure_prompts(config_for(sharegpt_file, tiny_models, num_prompts=30), 1), key=len)
    assert tokenizer.decode(longest).count("<|im_user|>") >= 2, "a multi-turn conversation keeps its history"


def test_a_point_needing_more_distinct_prompts_than_the_set_is_refused_in_one_line(sharegpt_file, tiny_models):
    config = config_for(sharegpt_file, tiny_models, concurrency=(1, 16), per_c=2)  # 32 measured + 16 warm-up
    with pytest.raises(BenchError, match=r"concurrency 16 needs 48 distinct prompts \(32 measured, 16 warm-up\) but "
                                         rf"{FILE} has only 36 conversations") as err:
        check_prompt_supply(config)
    assert "\n" not in str(err.value) and err.value.problem == "too_few_prompts"


def test_the_dataset_is_read_offline_from_the_hub_cache(tmp_path, monkeypatch, sharegpt_file):
    profile = load_profile("blackwell-8x")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelPathError, match="fetch with: python -m eagle3lab fetch-models --profile blackwell-8x"):
        datasets.resolve_dataset(profile)
    with pytest.raises(Exception, match="the hub is offline"):
        datasets.fetch_dataset(profile, echo=lambda line: None)
    seed_hub_cache(tmp_path / "hf" / "hub", REPO, sharegpt_file.parent, kind="datasets")
    path = datasets.resolve_dataset(profile)
    assert path.name == FILE and json.loads(path.read_text())[0]["id"] == "c0"
    assert datasets.fetch_dataset(profile, echo=lambda line: None) == path, "cached: nothing downloaded"


def test_conversations_without_a_named_dataset_are_refused():
    with pytest.raises(ProfileError, match="needs bench_dataset"):
        load_profile("cpu", {"bench_prompt_kind": "conversations"})
    profile = load_profile("blackwell-8x")
    assert profile.bench_prompt_kind == "conversations" and profile.bench_dataset == REPO


def test_measured_lengths_feed_the_context_only_off_random_ids(sharegpt_file, tiny_models):
    arms = [synthetic_arm("baseline", [1, 4], 0.01)]  # 32 prompt tokens, 9 output tokens per request
    chat = workload_record(config_for(sharegpt_file, tiny_models), arms)
    assert chat is not None and chat["prompt_tokens_mean"] == 32 and chat["output_tokens_mean"] == 9
    assert [p["requests"] for p in chat["per_point"]] == [1, 4]
    report = BenchReport("p", "2026-12-05", {}, arms, workload=chat)
    assert measured_context(report) == 32 + 9 / 2
    ids = workload_record(SweepConfig([1, 4], 32, 9, 4), arms)
    assert measured_context(BenchReport("p", "2026-12-05", {}, arms, workload=ids)) is None
    assert measured_context(BenchReport("p", "2026-12-05", {}, arms)) is None, "old records: the profile's lengths"
