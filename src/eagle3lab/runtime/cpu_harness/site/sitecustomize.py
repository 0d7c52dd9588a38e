"""Loaded by Python at start-up when this folder is on PYTHONPATH (see eagle3lab.runtime.cpu_harness.environment).

It installs the shims named in EAGLE3LAB_SHIMS, in every Python process of an sglang run (the launcher and the
scheduler it starts), forks sglang's subprocesses instead of spawning them when EAGLE3LAB_FORK_SUBPROCESSES is "1",
and installs the cycle timers when EAGLE3LAB_CYCLE_TRACE names a JSONL file. Being first on the path, it would hide
any other ``sitecustomize``; so it runs the next one found after this folder, leaving the interpreter's own start-up
customisation intact.
"""

import importlib.machinery
import importlib.util
import os
import sys

# Imported only when asked: this file runs in every Python process on the harness's path, and the shims import sglang.
if os.environ.get("EAGLE3LAB_SHIMS", "").strip():
    from eagle3lab.runtime.cpu_harness.shims import install_from_environment

    install_from_environment()

if os.environ.get("EAGLE3LAB_FORK_SUBPROCESSES", "").strip() == "1":  # cpu_harness/start_method.py says why
    from eagle3lab.runtime.cpu_harness.start_method import install_from_environment as fork_subprocesses

    fork_subprocesses(os.environ)

if os.environ.get("EAGLE3LAB_CYCLE_TRACE", "").strip():  # after the shims: the timers wrap the shimmed functions
    from eagle3lab.runtime.cpu_harness import cycle_timers

    cycle_timers.install_from_environment()


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_next_sitecustomize()
