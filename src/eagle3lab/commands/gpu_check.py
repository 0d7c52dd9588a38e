"""``eagle3lab gpu-check`` (``make gpu-check``): the gpu-1x profile's run on one CUDA GPU, then one table.

The existing commands in order: the GPU check (one line and exit 2 without a CUDA GPU, before anything is built),
``setup --profile gpu-1x`` (the tiny model and its drafter), ``report --profile gpu-1x`` (notebooks 01-03 with CUDA
graphs on: the crash, the trace, the patch, lossless, the benchmark), then ``eagle3lab.gpu_check``'s table and
``artifacts/gpu_check.<profile>.json``. The table is printed and its evidence written even when a notebook failed.
"""

from __future__ import annotations

import argparse

from eagle3lab import gpu_check
from eagle3lab.commands import setup
from eagle3lab.commands.common import add_profile_arguments, notebook_parameters, profile_of
from eagle3lab.errors import Eagle3LabError, GpuCheckError
from eagle3lab.pipeline import build_report

HELP = "the one-GPU check: gpu-1x's notebooks on one CUDA GPU with graphs on, one table and its evidence"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser, default="gpu-1x")


def run(args: argparse.Namespace) -> None:
    profile = profile_of(args)
    if profile.device != "cuda" or profile.tp_size != 1:
        raise GpuCheckError(f"gpu-check runs a one-GPU cuda profile; {profile.name} has device {profile.device} and "
                             f"tp_size {profile.tp_size}: pass --profile gpu-1x", problem="gpu_check_profile")
    inventory = gpu_check.require_gpu()
    setup.run(argparse.Namespace(profile=args.profile, set=args.set, rebuild=False, skip_drafter=False))
    failure = None
    try:
        build_report(args.profile, run=True, parameters=notebook_parameters(args))
    except Eagle3LabError as exc:  # the table still shows how far the run got
        failure = str(exc)
    found = gpu_check.rows(profile.name, inventory, profile.bench_concurrency)
    print(gpu_check.table(found))
    path = gpu_check.write_evidence(profile.name, found, inventory, failure)
    print(f"wrote: {path}")
    failed = [row.check for row in found if row.outcome == "FAIL"]
    if failure or failed:
        raise GpuCheckError(f"gpu-check failed: {failure or ', '.join(failed)} (evidence: {path})",
                             problem="gpu_check_failed")
