"""An ``Evidence`` assembled from a run's artifacts (bench report, per-request records, server logs, the offline
acceptance) and a launch command's arguments as sglang itself resolves them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence
from eagle3lab.bench.sweep import ARM_KIND_BASELINE, ARM_KIND_EAGLE3, load_requests
from eagle3lab.errors import DiagnosticsError
from eagle3lab.bench.diagnostics.evidence import Evidence, Threshold
from eagle3lab.bench.diagnostics.logs import server_args_from_log
from eagle3lab.bench.diagnostics.control_arm import cycle_break_even, measured_break_even


# ------------------------------------------------------------------------------- real server args, in-process
def resolve_server_args(argv: Sequence[str]) -> tuple[dict[str, Any], str]:
    """sglang's own argument resolution for a ``launch_server`` command line, without starting a server.

    Returns the resolved arguments (what ``/get_server_info`` reports at top level) and the log text sglang wrote
    while resolving them. The model path must be a local directory with a config (sglang reads the architecture).
    """
    from sglang.srt.server_args import prepare_server_args  # heavy: imports torch

    args = list(argv)
    if "sglang.launch_server" in args:
        args = args[args.index("sglang.launch_server") + 1:]
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            resolved = prepare_server_args(args)
    except (SystemExit, ValueError, AssertionError, OSError) as exc:
        raise DiagnosticsError(f"sglang rejected the server arguments: {type(exc).__name__}: {exc}; check the "
                               "command line and model path", what="server args", problem="rejected") from None
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    info = dataclasses.asdict(resolved)
    info.pop("model_config", None)
    return info, buffer.getvalue()


# ------------------------------------------------------------------------------------------ from artifacts
def accept_lengths_from_records(records: Iterable[Any]) -> list[float]:
    """Per-request acceptance: completion_tokens / spec_verify_ct (sglang's own definition), measured phase only."""
    out = []
    for rec in records:
        get = rec.get if isinstance(rec, Mapping) else (lambda k, r=rec: getattr(r, k, None))
        if get("phase") not in (None, "measure") or get("ok") is False:
            continue
        tokens, verifies = get("completion_tokens"), get("spec_verify_ct")
        if isinstance(tokens, int) and isinstance(verifies, int) and verifies > 0:
            out.append(tokens / verifies)
        elif isinstance(accept := get("spec_accept_length"), (int, float)):
            out.append(float(accept))
    return out


def _read_text(path: Optional[Path], what: str) -> Optional[str]:
    if path is None:
        return None
    if not Path(path).is_file():
        raise DiagnosticsError(f"{what} {path} does not exist; run the notebook that writes it or leave it out",
                               what=what, path=Path(path), problem="missing")
    return Path(path).read_text(encoding="utf-8", errors="replace")


def offline_threshold(offline: Optional[Mapping[str, Any]], variant: str = "aligned") -> Optional[Threshold]:
    """The drafter's offline acceptance (``Drafters.offline_acceptance``) for the served variant, as a threshold."""
    scores = (offline or {}).get(variant)
    if not isinstance(scores, Mapping) or not isinstance(value := scores.get("mean_accept_length"), (int, float)):
        return None
    return Threshold(float(value), "measured", f"offline simulation of sglang's verify on the benchmark's prompt "
                                               f"distribution, {scores.get('requests', '?')} requests")


def evidence_from_artifacts(bench_report: Any = None, requests_dir: Optional[Path] = None,
                            spec_log: Optional[Path] = None, baseline_log: Optional[Path] = None,
                            layer_tables: Optional[Sequence[Mapping[str, Any]]] = None,
                            layer_profile: Optional[str] = None,
                            break_even: Optional[Threshold] = None, modelled_break_even: Optional[Threshold] = None,
                            offline_acceptance: Optional[Mapping[str, Any]] = None,
                            device: Optional[str] = None,
                            cycle_components: Optional[Mapping[str, Any]] = None,
                            launch_spread: Optional[Mapping[str, Any]] = None) -> Evidence:
    """A run's evidence from what the notebooks wrote: the bench report (``bench.sweep.BenchReport``), the per-request
    JSONL files in ``requests_dir``, server logs, notebook 02's layer-id tables (restricted to ``layer_profile``),
    the drafter's offline acceptance, and the break-even: measured on the headline arm's own cycle where the cycle
    table (``bench.cycle``) has one, else by the control arm where the report has one (either way ``break_even``
    passed in is shown beside it as the modelled one), else the one passed in. The cycle table comes first: it
    times the served drafter's own cycles, while the control arm serves another drafter on another server.

    The served acceptance is the headline EAGLE-3 arm's at the control arm's concurrency where the break-even is
    measured (the two are compared at the same load), else at its highest concurrency."""
    ev = Evidence(spec_log=_read_text(spec_log, "speculative server log"),
                  baseline_log=_read_text(baseline_log, "baseline server log"),
                  break_even=break_even, modelled_break_even=modelled_break_even or break_even,
                  offline_acceptance=offline_threshold(offline_acceptance), device=device,
                  launch_spread=launch_spread)
    ev.server_args = server_args_from_log(ev.spec_log)
    ev.baseline_server_args = server_args_from_log(ev.baseline_log)
    if layer_tables is not None:
        tables = [dict(t) for t in layer_tables]
        if layer_profile is not None:
            tables = [t for t in tables if t.get("profile") == layer_profile]
        ev.layer_table = tables or None
    if bench_report is None:
        return ev
    measured = cycle_break_even(cycle_components) or measured_break_even(bench_report)
    at = None
    if measured is not None:
        ev.break_even, at = measured
    ev.same_sweep = True
    base_rates: dict[int, float] = {}
    for arm in bench_report.arms:
        if arm.kind == ARM_KIND_BASELINE:
            points = arm.measured_points()
            info = next((p.server_info for p in reversed(points) if p.server_info), None)
            ev.baseline_server_args = info or ev.baseline_server_args
            base_rates = {p.concurrency: p.metrics.decode_tok_per_s for p in points
                          if p.metrics and p.metrics.decode_tok_per_s}
    for arm in bench_report.arms:
        if arm.kind != ARM_KIND_EAGLE3:
            continue
        points = arm.measured_points()
        info = next((p.server_info for p in reversed(points) if p.server_info), None)
        ev.server_args = info or ev.server_args
        ev.concurrency = [p.concurrency for p in points] or None
        sweep = arm.sweep or {}
        sampling = sweep.get("extra_sampling_params") or {}
        ev.temperature = float(sampling.get("temperature", 0.0) or 0.0) if isinstance(sampling, Mapping) else None
        ev.temperature_where = "the sweep's sampling parameters"
        ev.speedups = {p.concurrency: p.metrics.decode_tok_per_s / base_rates[p.concurrency] for p in points
                       if p.metrics and p.metrics.decode_tok_per_s and base_rates.get(p.concurrency)} or None
        ev.speedup_where = f"decode rates, {bench_report.profile}, {bench_report.date}"
        chosen = next((p for p in points if p.concurrency == at), None) if at is not None else None
        if chosen is None and points:
            chosen = max(points, key=lambda p: p.concurrency)
        if chosen is None:
            continue
        if requests_dir is not None and arm.requests_file:
            path = Path(requests_dir) / arm.requests_file
            if not path.is_file():
                raise DiagnosticsError(f"requests file {path} of arm '{arm.name}' does not exist; pass the arm's "
                                       "output folder")
            records = [r for r in load_requests(path) if getattr(r, "concurrency", chosen.concurrency) ==
                       chosen.concurrency]
            ev.accept_lengths = accept_lengths_from_records(records) or None
        if not ev.accept_lengths and chosen.metrics and chosen.metrics.accept_length_mean is not None:
            ev.accept_lengths = [chosen.metrics.accept_length_mean]
        ev.accept_where = f"arm '{arm.name}' per request at concurrency {chosen.concurrency}"
    return ev
