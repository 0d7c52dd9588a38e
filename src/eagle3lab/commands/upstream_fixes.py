"""``eagle3lab upstream-fixes``: generate and check a delegation patch for every wrapper a release's audit finds
lacking."""

from __future__ import annotations

import argparse
import json

from eagle3lab.fix.fixseries import fixes_for, write_series
from eagle3lab.package.wheels import check_version, list_releases
from eagle3lab.trace.sources import open_source



def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sglang", action="append", required=True, metavar="VERSION",
                        help="release to audit and fix (repeatable); 'newest' for the newest on the index")
    parser.add_argument("--write", action="store_true",
                        help="write the passing patches and the series file under patches/upstream/<release>/")
    parser.add_argument("--json", action="store_true", help="print every fix with its checks as JSON")


def run(args: argparse.Namespace) -> None:
    for spec in args.sglang:
        version = list_releases()[-1] if spec == "newest" else check_version(spec)
        fixes = fixes_for(open_source(version))
        if args.json:
            print(json.dumps([f.to_dict() for f in fixes], indent=2))
        else:
            good = sum(f.ok for f in fixes)
            print(f"sglang {version}: {good} checked patches, {len(fixes) - good} refused")
            for fix in fixes:
                state = "ok" if fix.ok else f"REFUSED: {fix.refused}"
                print(f"  {fix.name}: {fix.owner} -> self.{fix.attr} {fix.members} for {', '.join(fix.entries)}: "
                      f"{state}")
        if args.write:
            for path in write_series(version, fixes):
                print(f"wrote: {path}")
