"""``eagle3lab setup``: everything a profile needs before its first launch.

The sglang check, the stub driver, the tiny model and, for a tiny-model profile, the drafter trained on it (minutes
on a cold cache, then reused). Hub checkpoints are only located here (fetch-models downloads them), so set-up never
starts a 547 GB download; the benchmark's dataset file, when the profile names one, is fetched here (hundreds of MB,
``runtime.datasets``). A local model path must exist; the tiny models' cache is verified against the checksums
written when it was built (``--rebuild`` builds it again). ``--skip-drafter`` leaves the drafter to the run: ``make
run`` trains it beside notebooks 01-02, which do not serve it (``runbook.drafter_in_background``). The project's
Jupyter kernel is registered where this environment's Jupyter looks for it (``register_kernel``): a conda user who
created the environment from ``environment.yml`` gets it from ``eagle3lab setup``, as a ``make setup`` user does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from eagle3lab import runguard
from eagle3lab.commands.common import add_profile_arguments, profile_of
from eagle3lab.errors import FetchError, ModelPathError
from eagle3lab.paths import cache_root
from eagle3lab.runtime.cpu_harness import build_libcuda_stub
from eagle3lab.runtime.datasets import fetch_dataset
from eagle3lab.runtime.deployment import fetch_command, locate_models
from eagle3lab.runtime.envinfo import check_sglang
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.runtime.tinymodel.drafter_training import (describe_trained_drafter, needs_trained_drafter,
                                                          trained_drafter_for_profile)
from eagle3lab.runbook import KERNEL_NAME

KERNEL_DISPLAY_NAME = "eagle3lab (sglang 0.5.9)"


def kernel_prefix() -> Path | None:
    """Where this environment's Jupyter finds kernels: a venv's or a conda environment's own prefix (``sys.prefix``,
    whose ``share/jupyter/kernels`` Jupyter in that environment reads); outside both, None (the user's kernels)."""
    in_venv = sys.prefix != sys.base_prefix
    in_conda = (Path(sys.prefix) / "conda-meta").is_dir()
    return Path(sys.prefix) if in_venv or in_conda else None


def register_kernel(prefix: Path | None = None) -> Path:
    """The ``eagle3lab`` kernel, running this interpreter, registered under ``prefix`` (default ``kernel_prefix``;
    the user's kernels outside a venv or conda environment). Returns the kernel's folder."""
    from ipykernel.kernelspec import install  # delayed: only set-up registers a kernel, and ipykernel pulls in zmq

    where = prefix if prefix is not None else kernel_prefix()
    return Path(install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY_NAME,
                        prefix=str(where) if where is not None else None, user=where is None))



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--rebuild", action="store_true",
                        help="build the tiny models again, even if cached (the drafter is retrained only if its "
                             "inputs changed)")
    parser.add_argument("--skip-drafter", action="store_true",
                        help="do not train the drafter here: `make run` does, in the background, while the notebooks "
                             "that do not serve it run")


def run(args: argparse.Namespace) -> None:
    profile = profile_of(args)
    runguard.check_checkout_path()  # before minutes of building: torch's compiler cannot link under such a path
    root = cache_root()
    if profile.uses_tiny_model and not (root.is_dir() and any(root.iterdir())):
        building = "the tiny models" if args.skip_drafter else "the tiny models and training the drafter"
        print(f"the eagle3lab cache {root} is empty (EAGLE3LAB_CACHE, else ~/.cache/eagle3lab under HOME): "
              f"building {building}, minutes on a CPU")
    print(f"sglang {check_sglang(profile.sglang_version)} (profile {profile.name})")
    if profile.cpu_harness:
        print(f"stub libcuda: {build_libcuda_stub()}")
    if args.rebuild and profile.uses_tiny_model:
        build_tiny_models(num_layers=profile.model_num_layers, aux_layer_ids=profile.tiny_aux_layer_ids, force=True)
    target, draft, cache_key = locate_models(profile)
    for ckpt in (target, draft):
        if ckpt.kind == "local" and ckpt.path is None:
            raise ModelPathError(f"{ckpt.role} model path {ckpt.source} does not exist; check the profile's "
                                 f"'{ckpt.role}_model' setting", path=Path(ckpt.source), role=ckpt.role,
                                 problem="missing")
        where = ckpt.path or f"not on this machine (fetch with: {fetch_command(profile)})"
        print(f"{ckpt.role} model: {ckpt.source} -> {where}")
    if cache_key:
        print(f"tiny model cache key: {cache_key}")
    try:  # the benchmark's dataset file (a 'conversations' workload): fetched here, read offline by the run
        fetch_dataset(profile)
    except FetchError as exc:
        print(f"dataset: {exc}")
    if needs_trained_drafter(profile) and args.skip_drafter:
        print("trained drafter: not built here (--skip-drafter); the run trains it in the background if it is not "
              "cached")
    elif needs_trained_drafter(profile):
        print(describe_trained_drafter(trained_drafter_for_profile(profile)))
    print(f"Jupyter kernel {KERNEL_NAME}: {register_kernel()}")
