"""Tokenizer files for the tiny target (and drafter): a word-level ``tokenizer.json`` and a ``tokenizer_config.json``.

Why they are needed although prompts can be token ids: Kimi-K2.5 is multimodal, so sglang's tokenizer manager asks
transformers' AutoProcessor for a processing class even with ``--skip-tokenizer-init``; and its start-up warm-up
goes through the chat path, which needs ``chat_template`` (else: "Cannot use chat template functions because
tokenizer.chat_template is not set").
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from eagle3lab.runtime.tinymodel.configs import BOS_ID, EOS_ID, SPECIAL_TOKENS

# One line of Jinja in the Kimi role-tag style. It prints ``content`` as a string on purpose: sglang classifies
# templates by whether they iterate over content parts ("openai") or not ("string"). For a "string" template it
# flattens chat messages to their text and drops images, so the start-up warm-up (a chat request with a tiny
# PNG) stays text-only. An "openai" template would route it into Kimi's image path, which needs the real
# remote-code KimiK25Processor (``AttributeError: PreTrainedTokenizerFast has no attribute tokenizer``).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_{{ m['role'] }}|>{{ m['content'] }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_assistant|>{% endif %}"
)


def vocabulary(vocab_size: int) -> dict[str, int]:
    """Special tokens, then printable ASCII characters, then filler words ``w<N>`` up to ``vocab_size``."""
    tokens = list(SPECIAL_TOKENS) + [chr(c) for c in range(33, 127)]
    tokens += [f"w{i}" for i in range(vocab_size - len(tokens))]
    return {token: index for index, token in enumerate(tokens[:vocab_size])}


def write_tokenizer(directory: Path, vocab_size: int) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into ``directory``."""
    vocab = vocabulary(vocab_size)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS[0]))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core,
        unk_token=SPECIAL_TOKENS[0],
        bos_token=SPECIAL_TOKENS[BOS_ID],
        eos_token=SPECIAL_TOKENS[EOS_ID],
        pad_token=SPECIAL_TOKENS[0],
        additional_special_tokens=[t for t in SPECIAL_TOKENS[3:]],
        model_max_length=4096,
        model_input_names=["input_ids", "attention_mask"],
    )
    fast.save_pretrained(str(directory))
    # The template goes inline into tokenizer_config.json (transformers >= 4.56 would write chat_template.jinja),
    # the place every tokenizer loader, old or new, reads it from.
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["chat_template"] = CHAT_TEMPLATE
    config_path.write_text(json.dumps(config, indent=1), encoding="utf-8")
