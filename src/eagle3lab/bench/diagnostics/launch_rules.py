"""The rules on how the server was launched: CUDA-graph batch sizes, sglang's request cap under speculation, draft
tokens for the batch, the algorithm flag, the drafter's context window, sampling, the overlap scheduler, graphs off.
"""

from __future__ import annotations

from typing import Optional, Sequence

from eagle3lab.bench.diagnostics.evidence import Evidence, Finding, NO, UNKNOWN, YES
from eagle3lab.bench.diagnostics.logs import (MIXED_OFF, OVERLAP_OFF, RADIX_OFF, RESET_CAP, SPEC_V2_ON, VLLM_TRUNCATED,
                                              DecodeLine, check_info, first_line, decode_lines, log_accept_lengths, running_limit)
from eagle3lab.bench.diagnostics.readings import make_finding, max_batch, arg_provenance, spec_flags, text_config
from eagle3lab.bench.diagnostics.drafter_rules import drafter_kind


def rule_cuda_graph_bs(ev: Evidence) -> Finding:
    cause = "cuda_graph_bs_below_concurrency"
    fix = "raise --cuda-graph-max-bs to at least the concurrency served (or lower the concurrency)"
    disabled, _ = ev.arg("disable_cuda_graph")
    if disabled is True:
        return make_finding(cause, NO, "CUDA graphs are off altogether (--disable-cuda-graph): see no_cuda_graph", fix)
    batch, batch_where = max_batch(ev)
    cap = running_limit(ev.server_args, ev.spec_log)
    if batch is not None and cap is not None and cap[0] < batch:
        batch, batch_where = cap[0], f"{batch_where}, capped at {cap[0]} running requests ({cap[1]})"
    max_bs, where = ev.arg("cuda_graph_max_bs")
    graph_list, list_where = ev.arg("cuda_graph_bs")
    if max_bs is None and isinstance(graph_list, (list, tuple)) and graph_list:
        max_bs, where = max(graph_list), f"{list_where} (--cuda-graph-bs)"
    truncated = VLLM_TRUNCATED.search(ev.spec_log or "")
    if max_bs is None and truncated:
        _, _, tokens = spec_flags(ev)
        per_request = tokens or None
        if per_request:
            max_bs = int(truncated.group(1)) // per_request
            where = (f"log: {truncated.group(0).strip()} (vLLM counts tokens: {truncated.group(1)} / "
                     f"{per_request} tokens per request per verify)")
    if max_bs is not None and batch is not None:
        applies = YES if batch > int(max_bs) else NO
        return make_finding(cause, applies, f"captured batch sizes up to {max_bs} ({where}); {batch_where}", fix,
                  "launch flag" if "launch" in where else "server log")
    lines = [d for d in decode_lines(ev.spec_log) if d.graph is not None]
    with_graph = [d.running for d in lines if d.graph]
    without = [d for d in lines if not d.graph]
    if with_graph and without and max(d.running for d in without) > max(with_graph):
        worst = max(without, key=lambda d: d.running)
        return make_finding(cause, YES, f"decode lines replay graphs up to #running-req {max(with_graph)} and run without "
                               f"them above it: {worst.text}", fix, "server log")
    if lines and not without:
        return make_finding(cause, NO, f"all {len(lines)} decode lines replayed a graph", fix, "server log")
    missing = "the captured batch sizes (--cuda-graph-max-bs or server_args in the log)" if max_bs is None \
        else "the concurrency (--concurrency or decode lines)"
    return make_finding(cause, UNKNOWN, f"no evidence of {missing}", fix)


def rule_spec_request_cap(ev: Evidence) -> Finding:
    """sglang caps running requests under EAGLE (48 in 0.5.x, 32 in early 0.4.x) unless --max-running-requests is
    given; the baseline's limit is sized by KV memory. Above the cap, speculation runs fewer requests per step."""
    cause = "spec_request_cap"
    fix = "pass --max-running-requests equal to the concurrency you serve (both arms)"
    spec_info = check_info(ev.server_args, "speculative run")
    spec = running_limit(spec_info, ev.spec_log)
    reset = RESET_CAP.search(ev.spec_log or "")
    if spec is None and reset is None and ev.launch and ev.launch.get("max_running_requests") is not None:
        spec = (int(ev.launch["max_running_requests"]), "launch --max-running-requests")
    if spec is None and reset is None:
        why = "the launch sets no --max-running-requests; sglang resets it for speculation and logs the value " \
              "('Max running requests is reset to N'): give the server log" if ev.launch else \
              "no request limit in the evidence (server log or launch flag)"
        return make_finding(cause, UNKNOWN, why, fix)
    limit = spec[0] if spec else int(reset.group(1))  # type: ignore[union-attr]
    parts = [f"speculative limit {spec[0]} ({spec[1]})"] if spec else []
    if reset:
        parts.append(f"log: {reset.group(0).strip()}")
    base = running_limit(check_info(ev.baseline_server_args, "baseline run"), ev.baseline_log)
    if base is None and ev.baseline_launch and ev.baseline_launch.get("max_running_requests") is not None:
        base = (int(ev.baseline_launch["max_running_requests"]), "baseline launch --max-running-requests")
    queued = [line for line in decode_lines(ev.spec_log) if (line.queued or 0) > 0]
    if queued:
        worst = max(queued, key=lambda line: (line.queued or 0, line.running))
        parts.append(f"requests waited while the limit was full: {worst.text}")
    batch, batch_where = max_batch(ev)
    if batch is not None:
        parts.append(batch_where)
    provenance = "server log" if (reset or (spec and "log" in spec[1])) else "launch flag"
    if base is not None:
        parts.append(f"baseline limit {base[0]} ({base[1]})")
        if batch is None:
            applies = YES if limit < base[0] and queued else (NO if limit >= base[0] else UNKNOWN)
        else:
            applies = YES if limit < base[0] and (batch > limit or queued) else NO
    elif batch is not None:
        applies = YES if batch > limit or queued else NO
    else:
        applies = YES if queued else UNKNOWN
    return make_finding(cause, applies, "; ".join(parts), fix, provenance)


def rule_draft_tokens(ev: Evidence) -> Finding:
    cause = "draft_tokens_too_many_for_batch"
    fix = ("at batch > 1 use a chain: --speculative-eagle-topk 1 --speculative-num-draft-tokens = num-steps + 1 "
           "(tree settings from a model card are tuned for batch 1)")
    steps, topk, tokens = spec_flags(ev)
    batch, batch_where = max_batch(ev)
    if tokens is None or steps is None:
        return make_finding(cause, UNKNOWN, "speculative flags (num-steps, num-draft-tokens) not in the evidence", fix)
    flags = f"{steps} steps, topk {topk}, {tokens} draft tokens"
    if tokens <= steps + 1:
        return make_finding(cause, NO, f"{flags}: a chain, every verified token can be accepted", fix,
                  arg_provenance(ev.arg("speculative_num_draft_tokens")[1]))
    if batch is None:
        return make_finding(cause, UNKNOWN, f"{flags}: a tree verifying {tokens} tokens per request for at most {steps + 1} "
                                  "accepted; the concurrency is unknown", fix)
    waste = f"{flags}: each verify processes {batch} x {tokens} = {batch * tokens} tokens for at most " \
            f"{batch * (steps + 1)} accepted ({batch_where})"
    m = ev.model
    if m is None or m.chain_break_even is None:
        return make_finding(cause, UNKNOWN, f"{waste}; no cost model (give --hardware and --target-config) to say what the "
                                  "extra tokens cost at this batch", fix)
    applies = YES if batch > 1 and m.break_even > m.chain_break_even else NO
    return make_finding(cause, applies, f"{waste}; modelled break-even acceptance {m.break_even:.2f} with this tree vs "
                              f"{m.chain_break_even:.2f} as a chain at batch {m.batch} on {m.hardware}", fix,
              "modelled")


def rule_spec_algorithm(ev: Evidence) -> Finding:
    cause = "spec_algorithm_flag_mismatch"
    fix = "--speculative-algorithm EAGLE3 for an EAGLE-3 drafter (EAGLE for EAGLE-1/2 drafters)"
    algorithm, where = ev.arg("speculative_algorithm")
    if not algorithm:
        return make_finding(cause, UNKNOWN, "no --speculative-algorithm in the evidence", fix)
    kind, kind_where = drafter_kind(ev)
    ones = [a for a in log_accept_lengths(ev.spec_log) if a is not None]
    tail = f"; the log's acceptance stays at {max(ones):.2f}" if ones and max(ones) <= 1.0 else ""
    if kind is None:
        return make_finding(cause, UNKNOWN, f"--speculative-algorithm {algorithm} ({where}); the drafter's kind is unknown "
                                  f"(give --drafter-config){tail}", fix)
    applies = YES if str(algorithm).upper() != kind else NO
    return make_finding(cause, applies, f"--speculative-algorithm {algorithm} ({where}) with an {kind} drafter ({kind_where})"
                              f"{tail}", fix, "config" if "config" in kind_where else "launch flag")


def rule_context_window(ev: Evidence) -> Finding:
    cause = "draft_context_window_exceeded"
    fix = "a drafter trained on contexts as long as the requests (SpecForge --max-length), or shorter requests"
    window = text_config(ev.drafter_config).get("max_position_embeddings") if ev.drafter_config else None
    lengths = [x for x in (ev.input_len, ev.output_len) if x is not None]
    if not lengths:
        lengths = [x for b in ev.bench for x in (b.mean_input_len, b.mean_output_len) if x is not None][:2]
    if window is None:
        return make_finding(cause, UNKNOWN, "the drafter's max_position_embeddings is unknown (give --drafter-config)", fix)
    if not lengths:
        return make_finding(cause, UNKNOWN, f"drafter window {window} tokens; request lengths unknown", fix)
    total = sum(lengths)
    return make_finding(cause, YES if total >= int(window) else NO,
              f"requests reach {total:g} tokens (prompt + output) vs the drafter's max_position_embeddings {window}",
              fix, "config")


def rule_temperature(ev: Evidence) -> Finding:
    cause = "temperature_sampling"
    fix = "compare at temperature 0, or expect lower acceptance when sampling (the drafter proposes greedy drafts)"
    temp, where = ev.temperature, ev.temperature_where
    if temp is None:
        temps = [(b.temperature, b.source) for b in ev.bench if b.temperature is not None]
        if temps:
            temp, where = temps[0]
    if temp is None:
        return make_finding(cause, UNKNOWN, "the benchmark's temperature is unknown", fix)
    return make_finding(cause, YES if float(temp) > 0 else NO, f"temperature {temp:g} ({where})", fix, "benchmark")


_FEATURES = (
    ("disable_overlap_schedule", True, "overlap scheduler (CPU scheduling hidden behind GPU work)", OVERLAP_OFF),
    ("enable_mixed_chunk", False, "mixed chunked prefill", MIXED_OFF),
    ("disable_radix_cache", True, "radix (prefix) cache", RADIX_OFF),
)


def rule_overlap(ev: Evidence) -> Finding:
    """sglang 0.5.x turns the overlap scheduler off for EAGLE unless SGLANG_ENABLE_SPEC_V2 (and mixed chunk,
    and for some architectures the radix cache)."""
    cause = "overlap_scheduler_off"
    fix = "SGLANG_ENABLE_SPEC_V2=1 (sglang >= 0.5.x, topk 1) keeps the overlap scheduler on with EAGLE"
    spec = check_info(ev.server_args, "speculative run")
    base = check_info(ev.baseline_server_args, "baseline run")
    v2 = first_line(SPEC_V2_ON, ev.spec_log)
    key = "disable_overlap_schedule"
    line = first_line(OVERLAP_OFF, ev.spec_log)
    env_v2 = str((ev.launch_env or {}).get("SGLANG_ENABLE_SPEC_V2", "")).lower() in ("1", "true", "yes")
    if spec is None and not line and not v2:
        if ev.launch and ev.launch.get(key):
            return make_finding(cause, YES, "the launch passes --disable-overlap-schedule", fix, "launch flag")
        if env_v2:
            return make_finding(cause, NO, "the launch sets SGLANG_ENABLE_SPEC_V2=1: sglang keeps the overlap "
                                           "scheduler on under speculation", fix, "launch flag")
        return make_finding(cause, UNKNOWN, "needs the server log (server_args or sglang's 'Overlap scheduler is disabled' "
                                  "line)", fix)
    spec_off = bool(spec.get(key)) if spec and key in spec else line is not None
    base_on = None if not base or key not in base else not base[key]
    others = []
    for _other, _off_value, what, pattern in _FEATURES[1:]:
        other_line = first_line(pattern, ev.spec_log)
        if other_line:
            others.append(f"{what} off too (log: {other_line})")
    if v2:
        return make_finding(cause, NO, f"log: {v2}", fix, "server log")
    if spec_off and base_on is not False:
        why = f"log: {line}" if line else f"server_args {key}=True"
        base_text = f"; baseline {key}=False" if base_on else ""
        return make_finding(cause, YES, "; ".join([f"overlap scheduler off under speculation ({why}{base_text})"] + others),
                  fix, "server log")
    if spec_off:
        return make_finding(cause, NO, "overlap scheduler off in both arms", fix, "server log")
    return make_finding(cause, NO, f"server_args {key}=False", fix, "server log")


def _graphs_off_only_above_capture(ev: Evidence, eager: Sequence[DecodeLine],
                                   with_graph: Sequence[DecodeLine]) -> Optional[str]:
    """Why the eager decode lines are the captured-sizes cause rather than graphs off: every one of them runs more
    requests than the largest batch that replayed a graph (or than --cuda-graph-max-bs); None when not so."""
    if not eager:
        return None
    max_bs = ev.arg("cuda_graph_max_bs")[0]
    limit = max(d.running for d in with_graph) if with_graph else (int(max_bs) if isinstance(max_bs, int) else None)
    if limit is None or min(d.running for d in eager) <= limit:
        return None
    return (f"graphs are off only in the decode lines above the captured batch sizes (#running-req > {limit}): "
            "that is cuda_graph_bs_below_concurrency, not graphs turned off")


def rule_no_cuda_graph(ev: Evidence) -> Finding:
    cause = "no_cuda_graph"
    disabled, where = ev.arg("disable_cuda_graph")
    fix = ("drop --disable-cuda-graph (or fix what forced it); speculation launches far more kernels per token"
           if disabled is True else "find what turned graphs off (the server log's capture errors, an attention "
           "backend without graph support); speculation launches far more kernels per token")
    base_disabled = (ev.baseline_server_args or ev.baseline_launch or {}).get("disable_cuda_graph")
    spec_lines = [d for d in decode_lines(ev.spec_log) if d.graph is not None]
    base_lines = [d for d in decode_lines(ev.baseline_log) if d.graph is not None]
    if ev.device == "cpu" or (ev.server_args or {}).get("device") == "cpu":
        return make_finding(cause, NO, "CPU run: neither arm replays graphs (no CUDA graphs on CPU)", fix, "server log")
    if disabled is True:
        if base_disabled is True:
            return make_finding(cause, NO, f"--disable-cuda-graph in both arms ({where})", fix, arg_provenance(where))
        return make_finding(cause, YES, f"--disable-cuda-graph on the speculative server ({where})", fix, arg_provenance(where))
    if spec_lines:
        eager = [d for d in spec_lines if not d.graph]
        base_eager = [d for d in base_lines if not d.graph]
        above = _graphs_off_only_above_capture(ev, eager, [d for d in spec_lines if d.graph])
        if above:
            return make_finding(cause, NO, above, fix, "server log")
        text = f"{len(eager)} of {len(spec_lines)} speculative decode lines without graphs"
        if eager:
            text += f" (e.g. {eager[0].text})"
        if base_lines:
            text += f"; baseline {len(base_eager)} of {len(base_lines)}"
        share = len(eager) / len(spec_lines)
        applies = share > 0.5 and (not base_lines or len(base_eager) / len(base_lines) < share)
        return make_finding(cause, YES if applies else NO, text, fix, "server log")
    if disabled is False:
        return make_finding(cause, NO, f"CUDA graphs on ({where})", fix, arg_provenance(where))
    if ev.launch is not None:
        return make_finding(cause, NO, "the launch does not pass --disable-cuda-graph (sglang captures graphs by default)", fix,
                  "launch flag")
    return make_finding(cause, UNKNOWN, "no launch flags or decode lines", fix)
