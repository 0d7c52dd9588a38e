"""The drafter's training loss: the decay-weighted mean of its steps' cross-entropies, and one line when there is
no step to weigh (it was a bare ZeroDivisionError)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel.drafter_eval import step_labels, ttt_loss


def test_the_loss_is_the_decay_weighted_mean_of_the_steps_losses():
    torch.manual_seed(0)
    tokens = torch.randint(0, 11, (2, 9))
    outputs = [torch.randn(2, 7, 11, requires_grad=True) for _ in range(3)]
    loss, per_step = ttt_loss(outputs, tokens, first_anchor=1, step_weight_decay=0.5)
    steps = [F.cross_entropy(o.reshape(-1, 11), step_labels(tokens, 1, k + 1).reshape(-1), ignore_index=-100)
             for k, o in enumerate(outputs)]
    expected = (steps[0] + 0.5 * steps[1] + 0.25 * steps[2]) / 1.75
    assert torch.allclose(loss, expected) and per_step == pytest.approx([s.item() for s in steps])
    loss.backward()  # still a graph over every step's logits
    assert all(o.grad is not None for o in outputs)


def test_no_draft_step_is_one_clear_error():
    with pytest.raises(TinyModelError, match="no draft step"):
        ttt_loss([], torch.zeros(1, 4, dtype=torch.long), first_anchor=0, step_weight_decay=0.8)
