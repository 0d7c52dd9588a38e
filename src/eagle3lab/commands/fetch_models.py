"""``eagle3lab fetch-models``: download (or resume) a profile's checkpoints before any launch."""

from __future__ import annotations

import argparse

from eagle3lab.commands.common import add_profile_arguments, profile_of
from eagle3lab.runtime.fetch import fetch_models



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_arguments(parser, default="blackwell-8x")
    parser.add_argument("--endpoint", default=None, help="a hub mirror (default: HF_ENDPOINT or huggingface.co)")
    parser.add_argument("--local-dir", default=None, help="download into DIR/<org>/<name> instead of the HF cache")
    parser.add_argument("--configs-only", action="store_true",
                        help="only configs, tokenizers and code (enough for notebook 02's layer ids)")
    parser.add_argument("--max-workers", type=int, default=8, help="parallel file downloads (default 8)")


def run(args: argparse.Namespace) -> None:
    fetch_models(profile_of(args), endpoint=args.endpoint, local_dir=args.local_dir,
                 configs_only=args.configs_only, max_workers=args.max_workers)
