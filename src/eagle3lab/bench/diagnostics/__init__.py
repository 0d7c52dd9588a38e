"""Why did EAGLE-3 not speed things up? One rules engine for ``doctor`` (a user's launch command, server log and
benchmark) and for notebook 03 (the project's own run).

Every rule reads an ``Evidence`` and returns a ``Finding`` for its cause tag: ``applies`` is "yes", "no" or
"unknown" -- "unknown" when the evidence it needs is missing, never a guess. A threshold the rule compares with
(a break-even acceptance, a context window, a captured batch size) is handed in with its provenance: measured
(a control arm, a log line), modelled (the cost model, computed by the caller), or the launch flag / log line it
was read from. This module reads no cost model itself (it lives in the bench stage); callers pass modelled
figures in (``ModelFigures``).

Log patterns and field names are sglang 0.4.x-0.5.x's own (``srt/server_args.py _handle_speculative_decoding``,
``srt/managers/scheduler.py``, ``scheduler_metrics_mixin.py log_decode_stats``, ``bench_serving.py``); each
pattern names where its line is written.
"""
