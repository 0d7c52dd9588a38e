"""``eagle3lab gpu-check`` (``make gpu-check``): the gpu-1x profile's run on one CUDA GPU, then one table.

The existing commands in order: the GPU check (one line and exit 2 without a CUDA GPU, before anything is built),
``setup --profile gpu-1x`` (the tiny model and its drafter), ``report --profile gpu-1x`` (notebooks 01-03 with CUDA
graphs on: the crash, the trace, the patch, lossless, the benchmark), then ``eagle3lab.gpu_check``'s table and
``artifacts/gpu_check.<profile>.json``. The table is printed and its evidence written even when a notebook failed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping

from eagle3lab import gpu_check
from eagle3lab.commands import setup
from eagle3lab.commands.common import add_profile_arguments, notebook_parameters, profile_of
from eagle3lab.errors import Eagle3LabError, GpuCheckError
from eagle3lab.pipeline import build_report
from eagle3lab.runtime import gpuinfo

HELP = "the one-GPU check: gpu-1x's notebooks on one CUDA GPU with graphs on, one table and its evidence"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser, default="gpu-1x")


def run(args: argparse.Namespace) -> None:
    profile = profile_of(args)
    if profile.device != "cuda" or profile.tp_size != 1:
        raise GpuCheckError(f"gpu-check runs a one-GPU cuda profile; {profile.name} has device {profile.device} and "
                             f"tp_size {profile.tp_size}: pass --profile gpu-1x", problem="gpu_check_profile")
    check(args, gpu_check.require_gpu())


def check(args: argparse.Namespace, inventory: gpuinfo.GpuInventory,
          per_notebook: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Everything gpu-check does once the GPU probe (``gpu_check.require_gpu``) found a GPU: set-up, notebooks
    01-03, the table and the evidence (its path returned; ``GpuCheckError`` after both when a row failed).

    A function of its own so that the CPU rehearsal (tests/test_rehearsal.py) runs this same path with only the GPU
    probe skipped: it passes an inventory that says so, the device and size keys as ``--set`` overrides and
    ``per_notebook`` (one notebook's own parameters, ``runbook.run_all``) to keep notebooks 02 and 03 short.
    """
    profile = profile_of(args)
    setup.run(argparse.Namespace(profile=args.profile, set=args.set, rebuild=False, skip_drafter=False))
    failure = None
    try:
        build_report(args.profile, run=True, parameters=notebook_parameters(args), per_notebook=per_notebook)
    except Eagle3LabError as exc:  # the table still shows how far the run got
        failure = str(exc)
    graphs = profile.device == "cuda" and not profile.disable_cuda_graph  # where the crash must happen
    found = gpu_check.rows(profile.name, inventory, profile.bench_concurrency, graphs=graphs)
    print(gpu_check.table(found))
    path = gpu_check.write_evidence(profile.name, found, inventory, failure)
    print(f"wrote: {path}")
    failed = [row.check for row in found if row.outcome == "FAIL"]
    if failure or failed:
        raise GpuCheckError(f"gpu-check failed: {failure or ', '.join(failed)} (evidence: {path})",
                             problem="gpu_check_failed")
    return path
