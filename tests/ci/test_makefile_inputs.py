"""``make run`` / ``make test`` take PROFILE and SET from the environment, as a CI job passes its inputs: the shell
splits SET on blanks and never evaluates it, and make never expands it (before, ``$(foreach s,$(SET),...)`` put the
value into the recipe's text, so a ``$(shell ...)`` in an input ran even under ``make -n``)."""

from __future__ import annotations

import os
import subprocess

from eagle3lab.paths import REPO_ROOT
from timing import patience


def test_set_from_the_environment_becomes_arguments_and_is_never_evaluated(tmp_path):
    marker = tmp_path / "ran"
    value = f"port=1;touch$IFS{marker} a=$(shell touch {marker}) b=`touch {marker}` c=[1,2] d=*"
    done = subprocess.run(["make", "-s", "--no-print-directory", "set-args"], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**os.environ, "SET": value}, timeout=patience(60))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [part for word in value.split() for part in ("--set", word)]
    assert not marker.exists()
