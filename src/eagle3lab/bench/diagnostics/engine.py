"""The rules engine: every rule on one ``Evidence``, one finding per cause tag in ``CAUSES`` order."""

from __future__ import annotations

from typing import Any, Callable, Sequence
from eagle3lab.bench.diagnostics.evidence import Evidence, Finding
from eagle3lab.bench.diagnostics.launch_rules import (rule_context_window, rule_cuda_graph_bs, rule_draft_tokens,
                                                      rule_no_cuda_graph, rule_overlap, rule_spec_algorithm,
                                                      rule_spec_request_cap, rule_temperature)
from eagle3lab.bench.diagnostics.drafter_rules import rule_aux_layers, rule_drafter_target_mismatch, rule_low_acceptance
from eagle3lab.bench.diagnostics.workload_rules import (rule_bench_method, rule_compute_bound, rule_moe, rule_prompts,
                                                        rule_tp_comm)


RULES: tuple[Callable[[Evidence], Finding], ...] = (
    rule_cuda_graph_bs, rule_spec_request_cap, rule_draft_tokens, rule_low_acceptance, rule_drafter_target_mismatch,
    rule_spec_algorithm, rule_aux_layers, rule_context_window, rule_temperature, rule_overlap, rule_no_cuda_graph,
    rule_tp_comm, rule_compute_bound, rule_moe, rule_prompts, rule_bench_method)


def diagnose(ev: Evidence) -> list[Finding]:
    """Every rule on the evidence: one finding per cause tag, in ``CAUSES`` order."""
    return [rule(ev) for rule in RULES]


def findings_table(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Rows for a notebook table, a JSON sidecar or ``doctor --json``."""
    return [f.to_dict() for f in findings]
