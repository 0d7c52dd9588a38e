"""The answer ranked: which applying cause explains most of the missing speedup, and for every cause left
"unknown" the one piece of evidence that would decide it.

How much a cause explains is the cost model's speedup with that cause alone removed, against its speedup as the
deployment stands, both at the served acceptance (``modelled_gain``): a tree served as a chain (same steps, topk
1), the overlap scheduler kept on (sglang's spec-v2 engine), the speculative request cap lifted to the batch
served; for low acceptance, the speedup missing below 1x at the acceptance served. A cause the model has no
counterfactual for (graphs, the benchmark's method, a drafter mismatch) ranks after the modelled ones, in the
order of ``CAUSES``; the answer says it is not modelled, never a number."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Optional

from eagle3lab.bench.diagnostics.evidence import CAUSES, UNKNOWN, YES, Evidence, Finding
from eagle3lab.bench.diagnostics.logs import RESET_CAP, log_accept_lengths, running_limit
from eagle3lab.costmodel.cycle import Deployment, max_accept_length, plain_tok_s, spec_tok_s, speedup
from eagle3lab.costmodel.presets import speculative_flags
from eagle3lab.doctor.evidence import SPEC_KEYS, Built, DoctorInput
from eagle3lab.doctor.model import deployment
from eagle3lab.errors import PerfModelError


MODELLED_NOW = "(modelled as deployed)"  # the key of the model's own speedup among the gains


@dataclass
class Ranked:
    """One cause in the ranked answer."""

    cause: str
    applies: str
    gain: Optional[float]  # modelled speedup gained were this cause alone removed (None: not modelled)
    how: str  # how the gain was modelled, or why it was not
    decide: str = ""  # for "unknown": the one piece of evidence that decides it

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def served_acceptance(ev: Evidence) -> Optional[float]:
    values = list(ev.accept_lengths or []) or log_accept_lengths(ev.spec_log) or \
        [b.accept_length for b in ev.bench if b.accept_length is not None and b.arm != "baseline"]
    return statistics.fmean(values) if values else None


def _limit(ev: Evidence) -> Optional[int]:
    found = running_limit(ev.server_args if isinstance(ev.server_args, dict) else None, ev.spec_log)
    if found is not None:
        return found[0]
    reset = RESET_CAP.search(ev.spec_log or "")
    if reset:
        return int(reset.group(1))
    value = (ev.launch or {}).get("max_running_requests")
    return value if isinstance(value, int) else None


def _counterfactuals(built: Built, dep: Deployment, accept: float) -> dict[str, tuple[float, str]]:
    steps, topk, tokens = (int(built.flags[k]) for k in SPEC_KEYS)
    spec = speculative_flags(steps, topk, tokens)
    batch = int(built.batch or 1)
    served = min(accept, max_accept_length(spec))
    now = speedup(dep, spec, batch, served)
    out: dict[str, tuple[float, str]] = {}
    if tokens > steps + 1:
        chain = speculative_flags(steps, 1, steps + 1)
        gain = speedup(dep, chain, batch, min(served, steps + 1)) - now
        out["draft_tokens_too_many_for_batch"] = (gain, f"modelled: {now:.2f}x as served vs "
                                                        f"{now + gain:.2f}x as a chain of {steps + 1} tokens at the "
                                                        "same acceptance (an upper bound: a chain accepts less)")
    if not dep.engine.overlap_spec:
        v2 = dataclasses.replace(dep, engine=dataclasses.replace(dep.engine, overlap_spec=True))
        gain = speedup(v2, spec, batch, served) - now
        out["overlap_scheduler_off"] = (gain, f"modelled: {now:.2f}x vs {now + gain:.2f}x with the overlap "
                                              "scheduler kept on under speculation")
    limit = _limit(built.evidence)
    if limit is not None and limit < batch:
        capped = spec_tok_s(dep, spec, limit, served) / plain_tok_s(dep, batch)
        out["spec_request_cap"] = (now - capped, f"modelled: {capped:.2f}x with {limit} requests running under "
                                                 f"speculation vs {now:.2f}x with all {batch}")
    out["low_acceptance"] = (max(0.0, 1.0 - now), f"modelled: {now:.2f}x at the served acceptance {accept:.2f}; "
                                                  "what is missing below 1x")
    out[MODELLED_NOW] = (now, f"modelled speedup as deployed, at the served acceptance {accept:.2f}")
    return out


def modelled_gains(built: Built, given: DoctorInput) -> tuple[dict[str, tuple[float, str]], str]:
    """Each modelled cause's gain and how it was modelled, or (empty, why nothing was modelled)."""
    hardware = given.hardware_sheet or given.hardware
    accept = served_acceptance(built.evidence)
    if hardware is None or given.target_config is None or built.batch is None or accept is None or \
            not all(isinstance(built.flags.get(k), int) for k in SPEC_KEYS):
        return {}, "not modelled: the ranking needs a GPU, the target's config, the speculative flags, a " \
                   "concurrency and the served acceptance"
    try:
        dep = deployment(hardware, built.gpus, given.target_config, given.drafter_config, built.context)
        return _counterfactuals(built, dep, accept), ""
    except (PerfModelError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return {}, f"not modelled: {type(exc).__name__}: {exc}"


def _decide_flags(ev: Evidence) -> str:
    return "the launch command (its --speculative-num-steps, --speculative-eagle-topk and " \
           "--speculative-num-draft-tokens)"


def _decide(f: Finding, ev: Evidence, built: Built) -> str:
    """The one piece of evidence that would turn this unknown into yes or no."""
    gpu = "--hardware (a preset) or --gpu-* datasheet numbers, with --target-config"
    text = f.evidence
    choices: dict[str, Callable[[], str]] = {
        "cuda_graph_bs_below_concurrency": lambda: "--concurrency (the concurrency served)" if "concurrency" in text
        else "the launch's --cuda-graph-max-bs, or the server log (its server_args line)",
        "spec_request_cap": lambda: "the server log: sglang's 'Max running requests is reset to N' line",
        "draft_tokens_too_many_for_batch": lambda: _decide_flags(ev) if "not in the evidence" in text
        else "--concurrency" if "concurrency is unknown" in text else gpu,
        "low_acceptance": lambda: "--accept (the served acceptance length: bench_serving's 'Accept length', "
                                  "send_one's acc_length, or the log's 'accept len')"
        if "no served acceptance" in text else gpu,
        "drafter_target_mismatch": lambda: "--drafter-config and --target-config (both config.json files)",
        "spec_algorithm_flag_mismatch": lambda: "the launch command (its --speculative-algorithm)"
        if "no --speculative-algorithm" in text else "--drafter-config (the drafter's config.json)",
        "aux_layer_ids_mismatch": lambda: "--drafter-config and --target-config (both config.json files)",
        "draft_context_window_exceeded": lambda: "--drafter-config (its max_position_embeddings)"
        if "unknown (give --drafter-config)" in text else "--input-len and --output-len (or the benchmark output)",
        "temperature_sampling": lambda: "--temperature (the benchmark's sampling temperature)",
        "overlap_scheduler_off": lambda: "the server log (sglang logs 'Overlap scheduler is disabled' there)",
        "no_cuda_graph": lambda: "the launch command or the server log",
        "tp_communication_bound": lambda: gpu + " and the TP size (--tp or the launch)",
        "compute_bound_large_batch": lambda: gpu,
        "moe_sparsity_verify_cost": lambda: gpu if "MoE target" in text else "--target-config",
        "chat_template_mismatch": lambda: "the benchmark command (does it pass --apply-chat-template?)",
        "benchmark_method_error": lambda: "the benchmark output of both arms",
    }
    return choices.get(f.cause, lambda: "")()


def rank(findings: list[Finding], built: Built, given: DoctorInput) -> tuple[list[Ranked], Optional[float]]:
    """Applying causes first, the modelled ones by gain (largest first), then the unmodelled ones; then each
    unknown with the evidence that decides it; the causes that do not apply last. Also the model's own speedup as
    deployed (None where nothing was modelled)."""
    gains, why = modelled_gains(built, given)
    now = gains.pop(MODELLED_NOW, (None, ""))[0]
    order = {c: i for i, c in enumerate(CAUSES)}
    ranked = []
    for f in findings:
        gain, how = gains.get(f.cause, (None, why or "not modelled: the cost model has no counterfactual for it"))
        if f.applies != YES:
            gain, how = None, ""
        ranked.append(Ranked(f.cause, f.applies, gain, how, _decide(f, built.evidence, built)
                             if f.applies == UNKNOWN else ""))
    applies_first = {YES: 0, UNKNOWN: 1}
    ranked.sort(key=lambda r: (applies_first.get(r.applies, 2), r.gain is None, -(r.gain or 0.0),
                               order.get(r.cause, 99)))
    return ranked, now
