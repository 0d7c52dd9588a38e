"""What several rules read off the evidence alike (the largest batch, the speculative flags, the served
acceptance), and the one way a rule builds its finding.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional
from eagle3lab.bench.diagnostics.evidence import Evidence, Finding
from eagle3lab.bench.diagnostics.logs import decode_lines, log_accept_lengths


def make_finding(cause: str, applies: str, evidence: str, fix: str = "", provenance: Optional[str] = None) -> Finding:
    return Finding(cause, applies, evidence, fix, provenance)


def arg_provenance(where: str) -> str:
    """The provenance of a value ``Evidence.arg`` read: the resolved server arguments (a log), the launch, or the
    engine's default traced from its source."""
    if "server_args" in where:
        return "server log"
    if "default" in where:
        return "traced"
    return "benchmark" if "benchmark" in where else "launch flag"


def max_batch(ev: Evidence) -> tuple[Optional[int], str]:
    if ev.concurrency:
        return max(ev.concurrency), f"benchmark concurrency {max(ev.concurrency)}"
    running = [d.running for d in decode_lines(ev.spec_log)]
    if running:
        return max(running), f"log: up to #running-req {max(running)}"
    return None, ""


def text_config(cfg: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    cfg = cfg or {}
    return {**cfg, **(cfg.get("text_config") or {})} if isinstance(cfg.get("text_config"), Mapping) else cfg


def spec_flags(ev: Evidence) -> tuple[Optional[int], Optional[int], Optional[int]]:
    steps = ev.arg("speculative_num_steps")[0]
    topk = ev.arg("speculative_eagle_topk")[0]
    tokens = ev.arg("speculative_num_draft_tokens")[0]
    as_int = lambda v: int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None  # noqa: E731
    return as_int(steps), as_int(topk), as_int(tokens)


def served_acceptance(ev: Evidence) -> tuple[Optional[list[float]], str]:
    if ev.accept_lengths:
        return list(ev.accept_lengths), ev.accept_where or "served"
    values = log_accept_lengths(ev.spec_log)
    if values:
        return values, f"{len(values)} accept-length figure(s) in the server log"
    bench = [b.accept_length for b in ev.bench if b.accept_length is not None and b.arm != "baseline"]
    if bench:
        return bench, "benchmark output"
    return None, ""
