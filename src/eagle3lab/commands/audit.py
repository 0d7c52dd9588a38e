"""``eagle3lab audit``: which registered classes of an engine's release implement EAGLE-3, and which wrappers lack
what their inner language model has (sglang's conformance audit, or vLLM's ``SupportsEagle3`` audit)."""

from __future__ import annotations

import argparse
import json

from packaging.version import Version

from eagle3lab.trace import engine_audit
from eagle3lab.trace.vllm.source import vllm_releases

# traced first, so an interrupted --record still holds the releases the tests and notebook 04 read
FIRST_RECORDED = ("0.15.0", "0.17.1", "0.18.0", "0.34.0", "0.17.0", "0.18.1", "0.10.1", "0.10.0")
HELP = "which classes of an sglang or vLLM release implement EAGLE-3, and which wrappers lack it (from its source)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=engine_audit.ENGINES, default="sglang",
                        help="the engine whose release to audit (default: sglang)")
    parser.add_argument("--release", default=None, metavar="VERSION",
                        help="the release (sglang default: the installed one; vLLM: required, or 'newest')")
    parser.add_argument("--json", action="store_true",
                        help='print {"release", "classes": [{"arch", "class", "module", "wrapper_of", "implements", '
                             '"how", "defect", "evidence"}]} as JSON')
    parser.add_argument("--no-record", action="store_true",
                        help="trace the release now even when the shipped record holds it (vLLM)")
    parser.add_argument("--record", action="store_true",
                        help=f"vLLM: trace every release from {engine_audit.FIRST_VLLM_RECORDED} to --release (default: "
                             "the newest) and write the record the package ships (minutes)")


def run(args: argparse.Namespace) -> None:
    release = args.release
    if args.engine == "vllm" and release == "newest":
        release = vllm_releases()[-1]
    if args.record:
        every = [v for v in vllm_releases() if Version(v) >= Version(engine_audit.FIRST_VLLM_RECORDED)
                 and (release is None or Version(v) <= Version(release))]
        path, recorded = engine_audit.write_vllm_record(every, first=FIRST_RECORDED)
        print(f"wrote: {path} (vLLM audits of {len(recorded)} releases: {', '.join(recorded)})")
        return
    result = engine_audit.engine_audit(args.engine, release, use_record=not args.no_record)
    print(json.dumps(result, indent=2) if args.json else engine_audit.text(result))
