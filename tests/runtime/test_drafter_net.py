"""The vectorised training-time-test forward equals a chain run the way sglang's EAGLE worker runs it."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from eagle3lab.runtime.tinymodel.configs import draft_config
from eagle3lab.runtime.tinymodel.drafter_net import DRAFT_POSITION_OFFSET, DrafterShape, Eagle3Drafter


def make_drafter(seed: int = 0) -> Eagle3Drafter:
    torch.manual_seed(seed)
    shape = DrafterShape.from_config(draft_config(6))
    drafter = Eagle3Drafter(shape, torch.randn(shape.vocab, shape.hidden))
    with torch.no_grad():  # larger than default-init weights, so that masking or position slips show up
        for param in drafter.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    return drafter.eval()


def attend(drafter: Eagle3Drafter, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    scores = torch.matmul(q, keys.transpose(-1, -2)) * drafter.shape.head_dim ** -0.5
    return torch.matmul(torch.softmax(scores, dim=-1), values)


@torch.no_grad()
def served_chain(drafter: Eagle3Drafter, tokens: torch.Tensor, aux: torch.Tensor, anchor: int, steps: int = 3):
    """One sglang round, step by step: draft extend over pairs 0..anchor (pair j = token x[j+1] with the target
    state at j, position j), then each draft forward on its own token at position seq_lens + i + 1 attending to
    the extend's keys and the keys this chain wrote before."""
    hidden = drafter.fc(aux[:, :anchor + 1])
    q, k, v = drafter._qkv(tokens[:, 1:anchor + 2], hidden, torch.arange(anchor + 1))
    logits, state = drafter._finish(attend(drafter, q[:, :, -1:], k, v), hidden[:, -1:])
    outputs, keys, values = [logits[:, 0]], k, v
    seq_lens = anchor + 1  # tokens with target KV: x[0..anchor]; x[anchor + 1] is the verified (bonus) token
    for i in range(steps - 1):
        position = torch.tensor([seq_lens + i + 1])  # spec_info.positions = seq_lens; positions.add_(1) per step
        q, k, v = drafter._qkv(tokens[:, anchor + 2 + i:anchor + 3 + i], state, position)
        keys, values = torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2)
        logits, state = drafter._finish(attend(drafter, q, keys, values), state)
        outputs.append(logits[:, 0])
    return outputs


def test_ttt_forward_matches_the_served_chain_at_every_anchor():
    drafter = make_drafter()
    assert DRAFT_POSITION_OFFSET == 1
    tokens = torch.randint(0, drafter.shape.vocab, (2, 12))
    aux = torch.randn(2, 12, drafter.shape.num_aux * drafter.shape.hidden)
    first_anchor = 3
    outputs = drafter(tokens, aux, first_anchor=first_anchor)
    for anchor in range(first_anchor, 12 - 3):  # anchors whose three labels exist
        expected = served_chain(drafter, tokens, aux, anchor)
        for step in range(3):
            torch.testing.assert_close(outputs[step][:, anchor - first_anchor], expected[step], atol=1e-5, rtol=1e-4)


def test_the_chain_really_depends_on_its_position_and_its_own_keys():
    """Guards the test above: a wrong position offset or a missing chain key gives different logits."""
    drafter = make_drafter()
    tokens = torch.randint(0, drafter.shape.vocab, (1, 10))
    aux = torch.randn(1, 10, drafter.shape.num_aux * drafter.shape.hidden)
    right = drafter(tokens, aux, first_anchor=2)
    shifted = drafter(tokens, aux, first_anchor=2, position_offset=0)
    assert torch.equal(right[0], shifted[0])  # the extend step has no offset
    assert not torch.allclose(right[1], shifted[1], atol=1e-3)
    assert not torch.allclose(right[2], shifted[2], atol=1e-3)


def test_earlier_anchors_do_not_change_later_ones():
    drafter = make_drafter()
    tokens = torch.randint(0, drafter.shape.vocab, (1, 10))
    aux = torch.randn(1, 10, drafter.shape.num_aux * drafter.shape.hidden)
    full = drafter(tokens, aux, first_anchor=0)
    late = drafter(tokens, aux, first_anchor=4)
    for step in range(3):
        torch.testing.assert_close(full[step][:, 4:], late[step], atol=1e-5, rtol=1e-4)


def test_future_tokens_never_leak_into_a_step():
    """Changing x[j + s + 1] (step s's label at anchor j) or anything later leaves step s at anchor j unchanged."""
    drafter = make_drafter()
    tokens = torch.randint(0, drafter.shape.vocab, (1, 12))
    aux = torch.randn(1, 12, drafter.shape.num_aux * drafter.shape.hidden)
    anchor = 5
    base = drafter(tokens, aux, first_anchor=0)
    for step in range(1, 4):
        label_index = anchor + step + 1
        changed_tokens = tokens.clone()
        changed_tokens[:, label_index:] = (changed_tokens[:, label_index:] + 1) % drafter.shape.vocab
        changed_aux = aux.clone()
        changed_aux[:, anchor + 1:] += 1.0  # target states after the anchor are not known at draft time
        changed = drafter(changed_tokens, changed_aux, first_anchor=0)
        torch.testing.assert_close(changed[step - 1][:, anchor], base[step - 1][:, anchor])


def test_checkpoint_round_trip_keeps_the_bfloat16_weights():
    drafter = make_drafter()
    tensors = drafter.checkpoint_tensors()
    assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
    twin = Eagle3Drafter(drafter.shape, drafter.embed_tokens).eval()
    twin.load_checkpoint_tensors(tensors)
    assert all(torch.equal(tensors[name], t) for name, t in twin.checkpoint_tensors().items()
               if name != "embed_tokens.weight")
    tokens = torch.randint(0, drafter.shape.vocab, (1, 8))
    aux = torch.randn(1, 8, drafter.shape.num_aux * drafter.shape.hidden)
    assert F.cosine_similarity(twin(tokens, aux)[0].flatten(), drafter(tokens, aux)[0].flatten(), dim=0) > 0.99
