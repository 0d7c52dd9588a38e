"""The offline target: transformers' reference model with dense experts, greedy decoding and sglang's capture."""

from __future__ import annotations

import pytest
import torch

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.runtime.tinymodel.target_states import greedy_tokens, layer_states, load_text_model, rollout


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_models(cache_root=tmp_path_factory.mktemp("models"), num_layers=5)


@pytest.fixture(scope="module")
def prompts():
    generator = torch.Generator().manual_seed(0)
    return torch.randint(16, 1024, (4, 12), generator=generator)


def test_dense_experts_give_transformers_own_logits(tiny, prompts):
    looped = load_text_model(tiny.target_dir, vectorised=False)
    dense = load_text_model(tiny.target_dir)
    with torch.no_grad():
        torch.testing.assert_close(dense(prompts).logits, looped(prompts).logits, atol=1e-5, rtol=1e-4)


def test_greedy_tokens_match_transformers_generate(tiny, prompts):
    model = load_text_model(tiny.target_dir, vectorised=False)
    with torch.no_grad():
        expected = model.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=10,
                                  min_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert torch.equal(greedy_tokens(load_text_model(tiny.target_dir), prompts, 10), expected)


def test_layer_states_are_the_decoder_layer_outputs(tiny, prompts):
    """Entry i is the residual stream leaving layer i, which sglang captures for drafter id i (input of i + 1)."""
    model = load_text_model(tiny.target_dir)
    seen: dict[int, torch.Tensor] = {}
    hooks = [layer.register_forward_hook(lambda _m, _in, out, i=i: seen.__setitem__(i, out[0] if isinstance(out, tuple)
                                                                                     else out))
             for i, layer in enumerate(model.model.layers)]
    try:
        states = layer_states(model, prompts)
    finally:
        for hook in hooks:
            hook.remove()
    assert states.shape == (4, 12, tiny.num_layers - 1, model.config.hidden_size)
    for i in range(tiny.num_layers - 1):
        torch.testing.assert_close(states[:, :, i], seen[i])


def test_rollout_selects_aux_ids_in_order_and_refuses_uncapturable_ones(tiny, prompts):
    model = load_text_model(tiny.target_dir)
    result = rollout(model, prompts.tolist(), 6, batch_size=3)
    assert result.tokens.shape == (4, 18) and result.prompt_len == 12 and result.output_len == 6
    assert torch.equal(result.tokens[:, :12], prompts)
    aux = result.aux([1, 3])
    hidden = model.config.hidden_size
    assert torch.equal(aux[..., :hidden], result.layer_states[:, :, 1])
    assert torch.equal(aux[..., hidden:], result.layer_states[:, :, 3])
    with pytest.raises(TinyModelError) as err:
        result.aux([2, 4])
    assert (err.value.problem, err.value.value) == ("out_of_range", [2, 4])
    with pytest.raises(TinyModelError) as err:
        rollout(model, [[20, 21], [22]], 2)
    assert (err.value.problem, err.value.parameter) == ("ragged", "prompts")
