"""What the EAGLE-3 capture check found: the hooks the runtime calls on the target, and the aux hidden states two
real forwards returned. The child (``capture_child``) writes it as one JSON line; the parent (``capture_check``),
the trace agreement (``capture_trace``) and the report read it back.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from eagle3lab.trace.hooks import GET_EMBED_AND_HEAD, SET_LAYERS_TO_CAPTURE

# The draft worker's call, as EAGLEWorker.__init__ makes it on the target model (sglang 0.5.9).
DRAFT_WORKER_HOOK = GET_EMBED_AND_HEAD
CAPTURE_HOOK = SET_LAYERS_TO_CAPTURE
# Where the wrapper keeps its language model (Kimi-K2.5: self.language_model); other wrappers pass theirs
# (``llm``, ``model``, or a path through a proxy such as ``minicpmv.llm``), as the audit resolved it.
DEFAULT_INNER = "language_model"



@dataclass
class HookOutcome:
    """One call the runtime makes on the target model object, and what happened."""

    hook: str
    caller: str  # where sglang makes this call at runtime
    ok: bool
    error_type: str | None = None
    error_message: str | None = None
    raised_at: str | None = None  # innermost sglang frame, "path:line in function"


@dataclass
class ForwardCapture:
    """The aux hidden states one real forward returned, against the layer outputs they should be."""

    phase: str  # "prefill" or "decode"
    tokens: int
    shape: list[int]
    expected_shape: list[int]
    matches_layer_outputs: bool  # slice k equals the output of decoder layer drafter_layer_ids[k]
    matched_layers: list[int | None]  # for each slice, the decoder layer whose output it equals
    ambiguous: bool  # some slice equals the outputs of several layers (e.g. near-zero dummy weights)
    max_abs_diff: float
    seconds: float


@dataclass
class CaptureResult:
    """Everything the check found; ``ok`` only when every hook passed and both forwards captured correctly."""

    patch: str | None
    drafter_layer_ids: list[int] | None = None
    layers_to_capture: list[int] | None = None  # what the inner model ended up with (sglang's own mapping)
    hidden_size: int | None = None
    hooks: list[HookOutcome] = field(default_factory=list)
    forwards: list[ForwardCapture] = field(default_factory=list)
    error_type: str | None = None  # an error outside the hooks (the check could not run)
    error_message: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    sglang_version: str | None = None
    harness_steps: list[str] = field(default_factory=list)  # anything the check did beyond sglang's own start-up

    @property
    def failed_hook(self) -> HookOutcome | None:
        return next((hook for hook in self.hooks if not hook.ok), None)

    @property
    def ok(self) -> bool:
        return (
            self.error_type is None
            and self.failed_hook is None
            and len(self.forwards) == 2
            and all(f.matches_layer_outputs and not f.ambiguous and f.shape == f.expected_shape
                    for f in self.forwards)
        )

    @property
    def outcome(self) -> str:
        """One word for tables: captured, hook_missing, error, ambiguous or mismatch."""
        if self.failed_hook is not None:
            return "hook_missing"
        if self.error_type is not None:
            return "error"
        if self.ok:
            return "captured"
        if all(f.matches_layer_outputs for f in self.forwards) and len(self.forwards) == 2:
            return "ambiguous"
        return "mismatch"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "outcome": self.outcome}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaptureResult:
        data = {k: v for k, v in data.items() if k not in ("ok", "outcome")}
        data["hooks"] = [HookOutcome(**h) for h in data.get("hooks", [])]
        data["forwards"] = [ForwardCapture(**f) for f in data.get("forwards", [])]
        return cls(**data)
