"""Score a drafter on target rollouts: teacher-forced loss and accuracy per draft step, simulated acceptance.

The anchors scored are the ones sglang drafts from: after the prefill emitted the first completion token (pair
``n - 1``, whose token is that first token) up to the end of the continuation. Labels are the target's greedy
tokens, so a hit means exactly what sglang's greedy verify checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from eagle3lab.errors import TinyModelError
from eagle3lab.runtime.tinymodel.acceptance import AcceptanceSummary, RequestAcceptance, simulate_request, summarise
from eagle3lab.runtime.tinymodel.drafter_net import Eagle3Drafter
from eagle3lab.runtime.tinymodel.target_states import TargetRollout
from eagle3lab.runtime.tinymodel.drafter_net import DrafterShape
from eagle3lab.runtime.modelinfo import drafter_dir_aux_layer_ids
from eagle3lab.runtime.tinymodel.target_states import layer_states, load_text_model

IGNORE = -100


def step_labels(tokens: torch.Tensor, first_anchor: int, step: int) -> torch.Tensor:
    """Labels of draft step ``step`` (1-based) at anchors ``first_anchor..S-2``: ``x[j + step + 1]``, or IGNORE
    where that index lies beyond the sequence."""
    length = tokens.shape[1]
    labels = tokens[:, first_anchor + step + 1:]
    return F.pad(labels, (0, (length - 1 - first_anchor) - labels.shape[1]), value=IGNORE)


def ttt_loss(outputs: Sequence[torch.Tensor], tokens: torch.Tensor, first_anchor: int,
             step_weight_decay: float) -> tuple[torch.Tensor, list[float]]:
    """Weighted hard-label cross-entropy over the draft steps (step k weighted ``decay ** (k - 1)``), normalised
    by the weights; also returns each step's own loss."""
    total: torch.Tensor | None = None
    weights, per_step = 0.0, []
    for index, logits in enumerate(outputs):
        labels = step_labels(tokens, first_anchor, index + 1)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE)
        weight = step_weight_decay ** index
        total = weight * loss if total is None else total + weight * loss
        weights += weight
        per_step.append(float(loss.detach()))
    if total is None:
        raise TinyModelError("the drafter gave no draft step to score (no outputs)")
    return total / weights, per_step


@dataclass(frozen=True)
class DrafterScore:
    """One evaluation: teacher-forced numbers per draft step and the simulated serving acceptance."""

    loss_per_step: list[float]
    accuracy_per_step: list[float]  # step k right, given the true tokens before it
    chain_accuracy_per_step: list[float]  # step k right, given drafts 1..k-1 were right (what verify sees)
    acceptance: AcceptanceSummary

    def to_dict(self) -> dict:
        return {"loss_per_step": [round(v, 4) for v in self.loss_per_step],
                "accuracy_per_step": [round(v, 4) for v in self.accuracy_per_step],
                "chain_accuracy_per_step": [round(v, 4) for v in self.chain_accuracy_per_step],
                "acceptance": self.acceptance.to_dict()}


@torch.no_grad()
def score_drafter(drafter: Eagle3Drafter, rollout: TargetRollout, aux_layer_ids: Sequence[int],
                  steps: int = 3, batch_size: int = 256) -> DrafterScore:
    """Run the drafter over every rollout sequence and replay each as one sglang request."""
    was_training = drafter.training
    drafter.eval()
    first_anchor = rollout.prompt_len - 1
    hits, losses = [], []
    for start in range(0, rollout.tokens.shape[0], batch_size):
        rows = slice(start, start + batch_size)
        tokens = rollout.tokens[rows]
        outputs = drafter(tokens, rollout.aux(aux_layer_ids, rows).float(), first_anchor=first_anchor, steps=steps)
        labels = [step_labels(tokens, first_anchor, k + 1) for k in range(steps)]
        losses.append([float(F.cross_entropy(o.reshape(-1, o.shape[-1]), lab.reshape(-1), ignore_index=IGNORE,
                                             reduction="sum")) for o, lab in zip(outputs, labels)])
        hits.append(torch.stack([(o.argmax(-1) == lab) for o, lab in zip(outputs, labels)], dim=-1))
    drafter.train(was_training)
    hit = torch.cat(hits)  # [B, anchors, steps]
    valid = torch.stack([step_labels(rollout.tokens, first_anchor, k + 1) != IGNORE for k in range(steps)], dim=-1)
    counts = valid.sum(dim=(0, 1)).clamp(min=1)
    loss_per_step = [sum(batch[k] for batch in losses) / float(counts[k]) for k in range(steps)]
    accuracy = [float((hit[..., k] & valid[..., k]).sum() / counts[k]) for k in range(steps)]
    alive = valid[..., 0] & hit[..., 0]
    chain = [float(alive.sum() / counts[0])]
    for k in range(1, steps):
        both = alive & valid[..., k] & hit[..., k]
        chain.append(float(both.sum() / (alive & valid[..., k]).sum().clamp(min=1)))
        alive = both
    requests = [simulate_request(row.tolist(), rollout.output_len) for row in hit]
    return DrafterScore(loss_per_step=loss_per_step, accuracy_per_step=accuracy, chain_accuracy_per_step=chain,
                        acceptance=summarise(requests))


def load_drafter(drafter_dir: Path | str, target_dir: Path | str) -> Eagle3Drafter:
    """A drafter directory's weights in the training module, with the target's embedding (as sglang shares it)."""
    import json

    from safetensors.torch import load_file


    config = json.loads((Path(drafter_dir) / "config.json").read_text(encoding="utf-8"))
    embedding = load_file(str(Path(target_dir) / "model.safetensors"))["language_model.model.embed_tokens.weight"]
    drafter = Eagle3Drafter(DrafterShape.from_config(config), embedding.float())
    drafter.load_checkpoint_tensors(load_file(str(Path(drafter_dir) / "model.safetensors")))
    return drafter.eval()


@torch.no_grad()
def replay_served_requests(drafter_dir: Path | str, target_dir: Path | str, prompts: Sequence[Sequence[int]],
                           outputs: Sequence[Sequence[int]], steps: int = 3) -> list[RequestAcceptance]:
    """What the offline simulation predicts for requests a server answered: the target's states are recomputed
    on each prompt + served output, the drafter reads them at the ids its config.json declares, and each request
    is replayed through sglang's verify rules. Set against the server's ``spec_verify_ct`` per request, this
    checks the simulation (and the drafter arithmetic) on the server's own tokens."""

    if len(prompts) != len(outputs) or not prompts:
        raise TinyModelError("replay needs one served output per prompt")
    lengths = {len(p) for p in prompts}, {len(o) for o in outputs}
    if len(lengths[0]) != 1 or len(lengths[1]) != 1:
        raise TinyModelError("replay needs prompts of one length and outputs of one length (the benchmark's are)")
    tokens = torch.tensor([list(p) + list(o) for p, o in zip(prompts, outputs)], dtype=torch.long)
    model = load_text_model(target_dir)
    rollout = TargetRollout(tokens, layer_states(model, tokens).to(torch.bfloat16), len(prompts[0]))
    drafter = load_drafter(drafter_dir, target_dir)
    first_anchor = rollout.prompt_len - 1
    aux = rollout.aux(drafter_dir_aux_layer_ids(drafter_dir)).float()
    logits = drafter(tokens, aux, first_anchor=first_anchor, steps=steps)
    hits = torch.stack([(o.argmax(-1) == step_labels(tokens, first_anchor, k + 1)) for k, o in enumerate(logits)], -1)
    return [simulate_request(row.tolist(), rollout.output_len) for row in hits]
