"""``eagle3lab patch``: check / apply / verify / revert a patch on the installed sglang, or restore the release."""

from __future__ import annotations

import argparse
import json

from eagle3lab.errors import PatchError
from eagle3lab.package.patching import ACTIONS, PATCHES_DIR
from eagle3lab.package.restore import restore



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=[*sorted(ACTIONS), "restore"],
                        help="dry run, apply (+verify), verify, revert; restore: bring sglang back to its release "
                             "(backups first, then the release wheel)")
    parser.add_argument("patch", nargs="?", help="patch file, or its name in patches/ (not for restore)")
    parser.add_argument("--site-packages", default=None, help="root holding sglang/ (default: this Python's)")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")


def run(args: argparse.Namespace) -> None:
    if args.action == "restore":
        outcome = restore(args.site_packages)
        print(json.dumps({**outcome.__dict__, "message": outcome.message}, indent=2) if args.json
              else outcome.message)
        return
    if not args.patch:
        raise PatchError(f"patch {args.action} needs a patch: a file, or a name from {PATCHES_DIR.name}/",
                         problem="no_patch")
    result = ACTIONS[args.action](args.patch, args.site_packages)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.message)


def describe(args: argparse.Namespace) -> str:
    """What this invocation is, for the interruption line."""
    return " ".join(part for part in ("patch", args.action, args.patch) if part)
