"""The natural-language workload: bundled questions in the model's chat template; random ids below special ids."""

from __future__ import annotations

import json

import pytest

from eagle3lab.bench.workload import SweepConfig, chat_questions, make_prompts, special_id_floor
from eagle3lab.errors import BenchError


def test_chat_prompts_are_the_bundled_questions_in_the_models_chat_template(tiny_models):
    from transformers import AutoTokenizer  # the test checks against the model's own tokenizer

    config = SweepConfig([1], 8, 16, 4, prompt_kind="chat", tokenizer_dir=tiny_models.target, vocab_size=1024)
    prompts = make_prompts(config, "measure")
    assert len(prompts) == 4 and all(isinstance(p, list) and p for p in prompts)
    assert prompts == make_prompts(config, "measure"), "deterministic: every arm sends the same prompts"
    assert prompts != make_prompts(config, "warmup-c1"), "warm-up comes from another order"
    tokenizer = AutoTokenizer.from_pretrained(tiny_models.target)
    rendered = [tokenizer.apply_chat_template([{"role": "user", "content": q["text"]}], add_generation_prompt=True,
                                              tokenize=True) for q in chat_questions()]
    assert all(list(p) in [list(r) for r in rendered] for p in prompts)
    first = tokenizer.decode(prompts[0])  # the tiny vocabulary spells most words as <unk>; the template is real
    assert first.startswith("<|im_user|>") and first.rstrip().endswith("<|im_assistant|>")


def test_the_bundled_set_is_a_few_dozen_distinct_questions_with_its_license():
    questions = chat_questions()
    assert len(questions) >= 24 and len({q["text"] for q in questions}) == len(questions)


def test_random_id_control_stays_below_kimis_reserved_ids(tmp_path):
    added = {str(i): {"content": f"<|reserved_{i}|>", "special": True} for i in (163584, 163585, 163586)}
    added["0"] = {"content": "[BOS]", "special": True}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added}))
    high = special_id_floor(tmp_path)
    assert high == 163584
    config = SweepConfig([1], 64, 8, 8, vocab_size=163840, token_id_high=high)
    assert max(max(p) for p in make_prompts(config)) < 163584


def test_a_high_bound_outside_the_vocabulary_is_one_line():
    with pytest.raises(BenchError, match="token_id_high"):
        SweepConfig([1], 8, 8, 4, vocab_size=1024, token_id_high=4096)


def test_blackwell_headlines_the_chat_workload_and_the_tiny_model_profiles_keep_ids():
    from eagle3lab.notebook.patch_and_bench.server_arms import prompt_kind_for
    from eagle3lab.runtime.profiles import load_profile

    # the tiny tokenizer turns chat text into mostly <unk>, and the tiny drafter is trained on random ids
    assert prompt_kind_for(load_profile("gpu-1x"), "profile") == "ids"
    assert prompt_kind_for(load_profile("blackwell-8x"), "profile") == "conversations"
    assert prompt_kind_for(load_profile("cpu"), "profile") == "ids"
    assert prompt_kind_for(load_profile("blackwell-8x"), "ids") == "ids", "the random-id control on request"
