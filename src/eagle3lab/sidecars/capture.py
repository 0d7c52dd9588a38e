"""The capture check's result as notebooks 02 (each generated fix, through ModelRunner) and 03 (the patch) record it:
which hooks the runtime called on the target model and what two real forwards captured."""

from __future__ import annotations

from typing import Optional
from pydantic import Field
from eagle3lab.sidecars.base import SparseRecord


class HookOutcomeRecord(SparseRecord):
    """One call the runtime makes on the target model object (``fix.capture_result.HookOutcome``)."""

    hook: str = ""
    caller: str = ""
    ok: bool = False
    error_type: Optional[str] = None
    error_message: Optional[str] = None
    raised_at: Optional[str] = None


class ForwardCaptureRecord(SparseRecord):
    """The aux hidden states one real forward returned (``fix.capture_result.ForwardCapture``)."""

    phase: str = ""
    tokens: int = 0
    shape: list[int] = Field(default_factory=list)
    expected_shape: list[int] = Field(default_factory=list)
    matches_layer_outputs: bool = False
    matched_layers: list[Optional[int]] = Field(default_factory=list)
    ambiguous: bool = False
    max_abs_diff: float = 0.0
    seconds: float = 0.0


class CaptureRecord(SparseRecord):
    """The capture check of one patch (``fix.capture_result.CaptureResult.to_dict``)."""

    patch: Optional[str] = None
    drafter_layer_ids: Optional[list[int]] = None
    layers_to_capture: Optional[list[int]] = None
    hidden_size: Optional[int] = None
    hooks: list[HookOutcomeRecord] = Field(default_factory=list)
    forwards: list[ForwardCaptureRecord] = Field(default_factory=list)
    error_type: Optional[str] = None
    error_message: Optional[str] = None
    seconds: dict[str, float] = Field(default_factory=dict)  # part ("build", "forwards", "child", "wall") -> s
    sglang_version: Optional[str] = None
    harness_steps: list[str] = Field(default_factory=list)
    ok: bool = False
    outcome: str = ""
