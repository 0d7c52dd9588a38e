"""sglang's (and vLLM's) server log lines the rules read, each pattern naming where its line is written."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional
from eagle3lab.errors import DiagnosticsError
from eagle3lab.runtime.sglang_args import logged_server_args


# srt/server_args.py _handle_speculative_decoding (logged while the server arguments are resolved)
RESET_CAP = re.compile(r"Max running requests is reset to (\d+) for speculative decoding[^\n]*")


OVERLAP_OFF = re.compile(r"Overlap scheduler is disabled (?:when spec v2 is off|for speculative decoding)[^\n]*")


SPEC_V2_ON = re.compile(r"Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is "
                        r"turned on[^\n]*")


MIXED_OFF = re.compile(r"Mixed chunked prefill is disabled because of using eagle speculative decoding[^\n]*")


RADIX_OFF = re.compile(r"Disabling radix cache since speculative decoding for \S+ is not supported[^\n]*")


# srt/managers/scheduler.py, rank 0 after the memory pool is sized
SCHEDULER_LIMITS = re.compile(r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
                              r"max_running_requests=(\d+)[^\n]*")


# srt/managers/scheduler_metrics_mixin.py log_decode_stats (0.4.x: scheduler.py), any logger prefix
DECODE_LINE = re.compile(r"Decode batch[^\n]*?#running-req: (?P<running>\d+)[^\n]*")


_ACCEPT = re.compile(r"accept(?: len|_len|_length): (?P<v>[\d.]+)")


_GRAPH = re.compile(r"(?:cuda|cpu|npu) graph: (?P<v>True|False)")


_QUEUE = re.compile(r"#queue-req: (?P<v>\d+)")


_GEN = re.compile(r"gen throughput \(token/s\): (?P<v>[\d.]+)")


# vLLM: the capture sizes count tokens (batch x (1 + speculative tokens)); vllm/config/vllm.py
VLLM_TRUNCATED = re.compile(r"Truncating max_cudagraph_capture_size to (\d+)[^\n]*")


LOG_ACCEPT_ANY = re.compile(r"accept(?:_len|ance length| len)\s*[:=]\s*(?P<v>\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class DecodeLine:
    """One 'Decode batch' log line, the fields the rules use."""

    running: int
    queued: Optional[int]
    accept_len: Optional[float]
    graph: Optional[bool]
    gen_tok_s: Optional[float]
    text: str


def _grab(text: str, pattern: re.Pattern[str], cast: Callable[[str], Any]) -> Any:
    """One field of a decode line, cast; None when the line does not carry it."""
    found = pattern.search(text)
    return cast(found.group("v")) if found else None


def decode_lines(log_text: Optional[str]) -> list[DecodeLine]:
    """Every 'Decode batch' line of a server log, parsed."""
    out = []
    for match in DECODE_LINE.finditer(log_text or ""):
        text = match.group(0)
        out.append(DecodeLine(running=int(match.group("running")), queued=_grab(text, _QUEUE, int),
                              accept_len=_grab(text, _ACCEPT, float), graph=_grab(text, _GRAPH, lambda v: v == "True"),
                              gen_tok_s=_grab(text, _GEN, float), text=text.strip()))
    return out


def log_accept_lengths(log_text: Optional[str]) -> list[float]:
    """Acceptance lengths a log reports: its 'Decode batch ... accept len' lines, else any 'accept_len: x'."""
    values = [d.accept_len for d in decode_lines(log_text) if d.accept_len is not None]
    if values:
        return values
    return [float(m.group("v")) for m in LOG_ACCEPT_ANY.finditer(log_text or "")]


def first_line(pattern: re.Pattern[str], text: Optional[str]) -> Optional[str]:
    found = pattern.search(text or "")
    return found.group(0).strip() if found else None


def server_args_from_log(log_text: Optional[str]) -> Optional[dict[str, Any]]:
    """The resolved ``ServerArgs`` sglang logs at start-up (``runtime.sglang_args.logged_server_args``)."""
    return logged_server_args(log_text)


def check_info(info: Any, what: str) -> Optional[Mapping[str, Any]]:
    if info is None:
        return None
    if not isinstance(info, Mapping):
        raise DiagnosticsError(f"{what}: expected the /get_server_info JSON object (a mapping), got "
                               f"{type(info).__name__}", what=what, problem="not_a_mapping")
    return info


def running_limit(info: Optional[Mapping[str, Any]], log_text: Optional[str]) -> Optional[tuple[int, str]]:
    """The request limit the scheduler enforced, and where it was read.

    Preference: the scheduler's effective value (``internal_states[*].effective_max_running_requests_per_dp``),
    then the scheduler log line, then the resolved server argument ``max_running_requests``.
    """
    states = (info or {}).get("internal_states") or []
    effective = [s.get("effective_max_running_requests_per_dp") for s in states if isinstance(s, Mapping)]
    limits = [v for v in effective if isinstance(v, int)]
    if limits:
        return min(limits), f"server_info internal_states effective_max_running_requests_per_dp={min(limits)}"
    scheduler = SCHEDULER_LIMITS.search(log_text or "")
    if scheduler:
        return int(scheduler.group(4)), f"log: {scheduler.group(0).strip()}"
    value = (info or {}).get("max_running_requests")
    if isinstance(value, int):
        return value, f"server args max_running_requests={value}"
    return None
