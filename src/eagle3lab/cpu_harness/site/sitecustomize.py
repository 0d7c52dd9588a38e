"""Loaded by Python at start-up when this folder is on PYTHONPATH (see eagle3lab.cpu_harness.environment).

It installs the shims named in EAGLE3LAB_SHIMS, in every Python process of an sglang run (the launcher and the
scheduler it spawns). It does nothing else, so an unset variable leaves Python untouched.
"""

import os

if os.environ.get("EAGLE3LAB_SHIMS", "").strip():
    from eagle3lab.cpu_harness.shims import install_from_environment

    install_from_environment()
