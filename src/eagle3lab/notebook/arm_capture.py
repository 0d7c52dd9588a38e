"""What each EAGLE-3 arm's drafter is fed on each path, from the release's own capture trace (issue 37, item 4).

An arm's name says what was meant ("served the ids it was trained on", "one layer early"); what a server feeds
the drafter depends on the release: sglang 0.5.9 captures CUDA graphs with the hook's defaults and eager forwards
with the drafter's ids through the hook's own arithmetic (``trace.capture_order``). On ``gpu-1x`` the tiny
drafter's ids [2, 4, 5] equal the 8-layer default, so the headline arm is the mixed one (graph-replayed forwards
one layer early, eager as trained) and the shifted arm is one layer early on both paths. Labels are therefore
computed here from the trace, never written by hand.

Convention: the tiny drafter's id ``i`` is trained on the residual stream after decoder layer ``i``
(``runtime.tinymodel.target_states``); a capture index ``c`` (``layers_to_capture``) is the input of layer ``c``,
so it feeds the output of layer ``c - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from eagle3lab.trace.capture_order import CaptureOrder

AS_TRAINED = "as trained"


def offset_text(fed: Sequence[int], trained: Sequence[int]) -> str:
    """'as trained', 'one layer early', 'N layers late', or the layers themselves when the offset is not uniform."""
    diffs = {f - t for f, t in zip(fed, trained)}
    if len(fed) != len(trained) or len(diffs) != 1:
        return f"outputs of layers {list(fed)}, not the trained {list(trained)}"
    (d,) = diffs
    if d == 0:
        return AS_TRAINED
    n = "one layer" if abs(d) == 1 else f"{abs(d)} layers"
    return f"{n} {'early' if d < 0 else 'late'}"


@dataclass(frozen=True)
class ArmCapture:
    """The layer outputs one arm's drafter reads on each path, against the layers it was trained on."""

    release: str
    trained_outputs: tuple[int, ...]
    served_ids: tuple[int, ...]
    eager_outputs: tuple[int, ...]
    graph_outputs: Optional[tuple[int, ...]]  # None: CUDA graphs off, every forward is eager

    @property
    def eager(self) -> str:
        return offset_text(self.eager_outputs, self.trained_outputs)

    @property
    def graphs(self) -> Optional[str]:
        return None if self.graph_outputs is None else offset_text(self.graph_outputs, self.trained_outputs)

    @property
    def consistent(self) -> bool:
        """Both paths feed the drafter the same layers (whether or not those are the trained ones)."""
        return self.graph_outputs is None or self.graph_outputs == self.eager_outputs

    def label(self) -> str:
        """One line for the arm's purpose: what each path feeds, from the trace."""
        eager = f"eager forwards feed the outputs of layers {list(self.eager_outputs)} ({self.eager})"
        if self.graph_outputs is None:
            return f"sglang {self.release}, CUDA graphs off: {eager}"
        return (f"sglang {self.release}: CUDA-graph replays feed the outputs of layers {list(self.graph_outputs)} "
                f"({self.graphs}), {eager}")

    def to_dict(self) -> dict[str, Any]:
        return {"release": self.release, "trained_outputs": list(self.trained_outputs),
                "served_ids": list(self.served_ids), "eager_outputs": list(self.eager_outputs),
                "graph_outputs": list(self.graph_outputs) if self.graph_outputs is not None else None,
                "eager": self.eager, "graphs": self.graphs, "consistent": self.consistent}


def arm_capture(order: CaptureOrder, depth: int, trained_ids: Sequence[int], served_ids: Sequence[int],
                cuda_graphs: bool) -> ArmCapture:
    """What a drafter trained on the outputs of ``trained_ids`` reads when served with ``served_ids`` on
    ``order``'s release (``CaptureOrder.layers``: the release's hook body and call order)."""
    layers = order.layers(depth, list(served_ids))
    eager = tuple(c - 1 for c in layers["eager_layers"])
    graphs = tuple(c - 1 for c in layers["cuda_graph_layers"]) if cuda_graphs else None
    return ArmCapture(order.release, tuple(trained_ids), tuple(served_ids), eager, graphs)


@dataclass(frozen=True)
class ServedCapture:
    """The release and launch the arms are served on: its capture trace, the target's depth, graphs on or off."""

    order: CaptureOrder
    depth: int
    cuda_graphs: bool

    def arm(self, trained_ids: Sequence[int], served_ids: Sequence[int]) -> ArmCapture:
        return arm_capture(self.order, self.depth, trained_ids, served_ids, self.cuda_graphs)


def served_capture(profile: Any) -> Optional[ServedCapture]:
    """``ServedCapture`` for a profile: the trace of its pinned sglang release's wheel (not the installed copy,
    which the delegation patch modifies), its depth, and whether its launch replays CUDA graphs. None off the
    tiny model: a downloaded drafter's training convention is not known here, so "as trained" would be a guess."""
    if not profile.uses_tiny_model:
        return None
    from eagle3lab.trace.capture_order import trace_capture_order
    from eagle3lab.trace.sources import open_source

    graphs = profile.device == "cuda" and not profile.disable_cuda_graph
    return ServedCapture(trace_capture_order(open_source(profile.sglang_version)), profile.model_num_layers, graphs)


def fed(purpose: str, served: Optional[ServedCapture], trained: Optional[Sequence[int]],
        ids: Optional[Sequence[int]]) -> str:
    """An arm's purpose with what each path feeds its drafter appended (unchanged where nothing is known)."""
    if served is None or trained is None or ids is None:
        return purpose
    return f"{purpose}; {served.arm(trained, ids).label()}"
