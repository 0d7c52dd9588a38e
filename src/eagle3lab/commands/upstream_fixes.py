"""``eagle3lab upstream-fixes``: generate and check a delegation patch for every wrapper a release's audit finds
lacking; ``--record`` measures notebook 02's run-time checks of them for real, traces its bisect of every release, and
writes the two release records shipped in the package (so a fresh machine does not spend minutes on them)."""

from __future__ import annotations

import argparse
import json

from packaging.version import Version

from eagle3lab.fix.fixseries import fixes_for, write_series
from eagle3lab.notebook import fixes as fixbook, interface_trace as tracebook
from eagle3lab.package.wheels import check_version, list_releases
from eagle3lab.trace.sources import open_source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--sglang", action="append", default=[], metavar="VERSION",
                      help="release to audit and fix (repeatable); 'newest' for the newest on the index")
    parser.add_argument("--write", action="store_true",
                        help="write the passing patches and the series file under patches/upstream/<release>/")
    parser.add_argument("--json", action="store_true", help="print every fix with its checks as JSON")
    what.add_argument("--record", action="store_true",
                      help="run notebook 02's import and ModelRunner capture checks of the installed release's and "
                           "the newest release's fixes for real (minutes on CPU) and trace its bisect of every "
                           "release, and write the release records the package ships")
    parser.add_argument("--newest", metavar="VERSION",
                        help="with --record: the newest release to check (default: the newest on the index)")


def run(args: argparse.Namespace) -> None:
    if args.record:
        newest = check_version(args.newest) if args.newest else None
        made = fixbook.write_release_record(fixbook.notebook_results(newest))
        print(f"wrote: {made['path']} ({made['entries']} passing checks of sglang {', '.join(made['releases'])})")
        versions = tracebook.bisect_versions([], record_fallback=False)  # a record comes from the index
        if newest:
            versions = [v for v in versions if Version(v) <= Version(newest)]
        print(f"wrote: {tracebook.write_release_rows(versions)} (notebook 02's bisect rows of {len(versions)} releases)")
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
