"""The rules on where the time goes and how it was measured: TP communication, compute-bound large batches, MoE
verify cost, the prompts (chat template) and the benchmark method.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping
from eagle3lab.bench.diagnostics.evidence import Evidence, Finding, NO, STANDARD_ERRORS, UNKNOWN, YES
from eagle3lab.bench.diagnostics.readings import make_finding, arg_provenance, served_acceptance, text_config


def _largest(parts: Mapping[str, float]) -> tuple[str, float]:
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name]


def rule_tp_comm(ev: Evidence) -> Finding:
    cause = "tp_communication_bound"
    fix = "fewer GPUs per replica (data parallel), NVLink-class links, or a drafter run at tp 1"
    tp, where = ev.arg("tp_size")
    if tp is not None and int(tp) <= 1:
        return make_finding(cause, NO, f"tp {tp} ({where}): no tensor-parallel all-reduce", fix, arg_provenance(where))
    if ev.model is None:
        return make_finding(cause, UNKNOWN, f"tp {tp if tp is not None else 'unknown'}; no cost model (give --hardware, --gpus "
                                  "and --target-config)", fix)
    parts = ev.model.cycle_parts
    total = sum(parts.values())
    share = parts.get("all_reduce", 0.0) / total if total else 0.0
    name, _ = _largest(parts)
    return make_finding(cause, YES if name == "all_reduce" else NO,
              f"modelled cycle at batch {ev.model.batch} on {ev.model.hardware}: all-reduce {share:.0%} of it; "
              f"largest part {name}", fix, "modelled")


def rule_compute_bound(ev: Evidence) -> Finding:
    cause = "compute_bound_large_batch"
    fix = "fewer draft tokens at this batch, or no speculation above the batch where verify turns compute-bound"
    if ev.model is None:
        return make_finding(cause, UNKNOWN, "no cost model (give --hardware and --target-config)", fix)
    verify = ev.model.verify_parts
    name, _ = _largest(verify)
    compute = verify.get("gemm_compute", 0.0) + verify.get("attention_compute", 0.0)
    applies = YES if name in ("gemm_compute", "attention_compute") else NO
    return make_finding(cause, applies, f"modelled verify pass at batch {ev.model.batch} on {ev.model.hardware}: compute "
                              f"beyond the memory reads {compute * 1e3:.2f} ms; largest part {name}", fix, "modelled")


def rule_moe(ev: Evidence) -> Finding:
    cause = "moe_sparsity_verify_cost"
    fix = "fewer draft tokens on MoE targets: each extra verified token wakes more experts"
    target = text_config(ev.target_config) if ev.target_config else None
    experts = None
    if target is not None:
        experts = target.get("n_routed_experts") or target.get("num_experts") or target.get("num_local_experts")
        if not experts:
            return make_finding(cause, NO, "dense target (no routed experts in its config)", fix, "config")
    if ev.model is None or ev.model.verify_distinct_experts is None or not ev.model.plain_distinct_experts:
        return make_finding(cause, UNKNOWN, (f"MoE target ({experts} experts); " if experts else "") +
                  "no cost model (give --hardware and --target-config)", fix)
    ratio = ev.model.verify_distinct_experts / ev.model.plain_distinct_experts
    return make_finding(cause, YES if ratio > 1.0 else NO,
              f"modelled experts read per layer: verify {ev.model.verify_distinct_experts:.1f} vs plain step "
              f"{ev.model.plain_distinct_experts:.1f} at batch {ev.model.batch} (uniform routing: an upper bound)",
              fix, "modelled")


def rule_prompts(ev: Evidence) -> Finding:
    """Served acceptance against the drafter's offline acceptance on its own training distribution; and the
    benchmark sending raw prompts to a drafter trained on chat-formatted ones."""
    cause = "chat_template_mismatch"
    fix = "benchmark with the chat template (bench_serving --apply-chat-template) on prompts like the drafter's data"
    served, where = served_acceptance(ev)
    if ev.offline_acceptance is not None and served:
        mean = statistics.fmean(served)
        se = statistics.stdev(served) / math.sqrt(len(served)) if len(served) > 1 else 0.0
        below = mean + STANDARD_ERRORS * se < ev.offline_acceptance.value
        return make_finding(cause, YES if below else NO,
                  f"served acceptance {mean:.2f} (standard error {se:.2f}, {where}) vs the drafter's offline "
                  f"acceptance on its training distribution {ev.offline_acceptance.text()}", fix,
                  ev.offline_acceptance.provenance)
    raw = [b for b in ev.bench if b.chat_template is False]
    templated = [b for b in ev.bench if b.chat_template is True]
    if raw:
        b = raw[0]
        return make_finding(cause, YES, f"the benchmark sends prompts without the chat template ({b.source}"
                              f"{', dataset ' + b.dataset if b.dataset else ''})", fix, "benchmark")
    if templated:
        return make_finding(cause, NO, f"the benchmark applies the chat template ({templated[0].source})", fix, "benchmark")
    return make_finding(cause, UNKNOWN, "neither the drafter's offline acceptance nor the benchmark's chat-template setting "
                              "is known", fix)


def rule_bench_method(ev: Evidence) -> Finding:
    cause = "benchmark_method_error"
    fix = "same prompts, lengths and concurrency for both arms; enough prompts to reach the concurrency; no failures"
    spread = ev.launch_spread
    if spread and not spread.get("agrees", True):
        return make_finding(cause, YES, f"the speedup at concurrency {spread['concurrency']} spread "
                              f"{spread['speedup_spread_pct']:.1f}% over {len(spread['launches'])} measured pairs "
                              f"({spread['speedup_min']:.2f}x to {spread['speedup_max']:.2f}x; the rule is "
                              f"{spread['tolerance_pct']:.0f}%): one measurement of each arm is one draw on "
                              "this machine",
                  "measure each arm more than once: where memory holds both servers, both up at once with the "
                  "requests in blocks alternating between them (notebook 03: bench_interleave_rounds), else on fresh "
                  "launches in mirrored order (baseline, speculative, speculative, baseline; notebook 03: "
                  "bench_launch_repeats); compare the median speedup with its range", "measured")
    agree = (f"; {len(spread['launches'])} measured pairs agree within {spread['tolerance_pct']:.0f}% "
             f"({spread['speedup_min']:.2f}x to {spread['speedup_max']:.2f}x)") if spread else ""
    if ev.same_sweep:
        return make_finding(cause, NO, "both arms measured by one sweep configuration (same prompts, lengths, concurrency)"
                  + agree, fix, "benchmark")
    if not ev.bench:
        return make_finding(cause, UNKNOWN, "no benchmark output", fix)
    problems = []
    for b in ev.bench:
        if b.failed:
            problems.append(f"{b.arm}: {b.failed} failed request(s) ({b.source})")
        if b.num_prompts is not None and b.concurrency is not None and b.num_prompts < b.concurrency:
            problems.append(f"{b.arm}: {b.num_prompts} prompts never reach concurrency {b.concurrency}")
    arms = {b.arm: b for b in ev.bench}
    if "speculative" in arms and "baseline" in arms:
        s, p = arms["speculative"], arms["baseline"]
        for name in ("concurrency", "num_prompts", "dataset", "chat_template", "temperature"):
            a, c = getattr(s, name), getattr(p, name)
            if a is not None and c is not None and a != c:
                problems.append(f"arms differ in {name}: speculative {a} vs baseline {c}")
    if problems:
        return make_finding(cause, YES, "; ".join(problems), fix, "benchmark")
    return make_finding(cause, NO, f"{len(ev.bench)} benchmark arm(s) checked: no failures, prompts reach the concurrency, "
                         "arms alike where both are known" + agree, fix, "benchmark")
