"""Notebook 03's steps, one module per job: patches and capture checks (``patch_checks``), the arms planned
(``arm_plans``) and measured on real servers (``server_arms``), the headline pair relaunched (``relaunched_pairs``), the
lossless check and its noise floor (``lossless_check``), the cycle timers (``cycle_timers``), what is written of the
benchmark (``bench_records``) and why a run shows no speedup (``diagnosis``).

The relaunch chain lives in ``fix.relaunch``, the capture check in ``fix.capture_check``, the load generator in
``loadgen``/``sweep``; these modules only wire them to a profile so that every notebook cell is one call
(``notebook.patch_bench_run``). The headline EAGLE-3 arm is measured on the server the relaunch chain left running
(one launch fewer); the control and layer-mismatch arms get their own patched servers, at fewer concurrencies (see
``arm_plans.eagle3_arm_plans``).
"""
