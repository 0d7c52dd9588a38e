"""``python -m eagle3lab ...``: the command-line entry points.

Every ``Eagle3LabError`` becomes one line on stderr and exit status 2, never a traceback. Ctrl-C, SIGTERM and
SIGHUP all take the same clean way out: cleanup runs (patches reverted, servers stopped), then one line says
what was interrupted and what was restored, and the exit status is 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import yaml

from eagle3lab.errors import Eagle3LabError
from eagle3lab.runtime import signals


def _overrides(pairs: Sequence[str]) -> dict:
    """``key=value`` pairs, values parsed as YAML (so ``port=30123`` is an int)."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise Eagle3LabError(f"--set expects key=value, got '{pair}'")
        result[key] = yaml.safe_load(value)
    return result


def cmd_run(args: argparse.Namespace) -> None:
    from eagle3lab.runbook import run_all

    parameters = {"overrides": _overrides(args.set)} if args.set else {}
    for path in run_all(args.profile, args.notebooks or None, parameters):
        print(f"executed: {path}")


def cmd_report(args: argparse.Namespace) -> None:
    from eagle3lab.report.build import build_report

    parameters = {"overrides": _overrides(args.set)} if args.set else {}
    out = build_report(args.profile, run=not args.no_run, hide_code=args.hide_code,
                       notebooks=args.notebooks or None, parameters=parameters)
    for path in [*out.executed, *out.html, *out.figures, out.report_md]:
        print(f"wrote: {path}")


def cmd_setup(args: argparse.Namespace) -> None:
    """Everything a profile needs before its first launch: the sglang check, the stub driver, the tiny model and,
    for a tiny-model profile, the drafter trained on it (minutes on a cold cache, then reused).
    Hub checkpoints are only located here (fetch-models downloads them), so set-up never starts a 547 GB download.
    A local model path must exist; the tiny models' cache is verified against the checksums written when it was
    built (``--rebuild`` builds it again)."""
    from eagle3lab.errors import ModelPathError
    from eagle3lab.runtime.deployment import fetch_command, locate_models
    from eagle3lab.runtime.envinfo import check_sglang
    from eagle3lab.runtime.profiles import load_profile

    profile = load_profile(args.profile, overrides=_overrides(args.set))
    print(f"sglang {check_sglang(profile.sglang_version)} (profile {profile.name})")
    if profile.cpu_harness:
        from eagle3lab.runtime.cpu_harness import build_libcuda_stub

        print(f"stub libcuda: {build_libcuda_stub()}")
    if args.rebuild and profile.uses_tiny_model:
        from eagle3lab.runtime.tinymodel import build_tiny_models

        build_tiny_models(num_layers=profile.model_num_layers, force=True)
    target, draft, cache_key = locate_models(profile)
    for ckpt in (target, draft):
        if ckpt.kind == "local" and ckpt.path is None:
            raise ModelPathError(f"{ckpt.role} model path {ckpt.source} does not exist; check the profile's "
                                 f"'{ckpt.role}_model' setting")
        where = ckpt.path or f"not on this machine (fetch with: {fetch_command(profile)})"
        print(f"{ckpt.role} model: {ckpt.source} -> {where}")
    if cache_key:
        print(f"tiny model cache key: {cache_key}")
    if profile.uses_tiny_model and profile.speculative_eagle_topk == 1:
        from eagle3lab.runtime.tinymodel.drafter_training import describe_trained_drafter, trained_drafter_for_profile

        print(describe_trained_drafter(trained_drafter_for_profile(profile)))


def cmd_preflight(args: argparse.Namespace) -> None:
    """Every check of a deployment, without launching anything; exit 2 on the first problem."""
    from eagle3lab.errors import PreflightFailed
    from eagle3lab.runtime import preflight
    from eagle3lab.runtime.profiles import load_profile

    profile = load_profile(args.profile, overrides=_overrides(args.set))
    result = preflight.run_preflight(profile, quick=args.quick)
    preflight.save(result)
    print(preflight.as_json(result) if args.json else result.text())
    if not result.ok:
        raise PreflightFailed(result.problem_line())


def cmd_fetch_models(args: argparse.Namespace) -> None:
    from eagle3lab.runtime.fetch import fetch_models
    from eagle3lab.runtime.profiles import load_profile

    profile = load_profile(args.profile, overrides=_overrides(args.set))
    fetch_models(profile, endpoint=args.endpoint, local_dir=args.local_dir, configs_only=args.configs_only,
                 max_workers=args.max_workers)


def cmd_patch(args: argparse.Namespace) -> None:
    from eagle3lab.fix.patching import run_cli

    run_cli(args)


def cmd_preflight_model(args: argparse.Namespace) -> None:
    from eagle3lab.fix.preflight_model import run_cli

    run_cli(args)


def cmd_upstream_fixes(args: argparse.Namespace) -> None:
    from eagle3lab.fix.fixgen import run_cli

    run_cli(args)


def cmd_doctor(args: argparse.Namespace) -> None:
    from eagle3lab.doctor import run

    run(args)


def cmd_predict(args: argparse.Namespace) -> None:
    from eagle3lab.report.predict_cli import run

    run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="eagle3lab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="execute notebooks with papermill (default: all, cpu profile)")
    run.add_argument("--profile", default="cpu", help="params/<profile>.yaml (default: cpu)")
    run.add_argument("--notebooks", nargs="*", help="notebook numbers or names, e.g. 01 03")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    run.set_defaults(func=cmd_run)

    report = sub.add_parser("report", help="run 01 -> 02 -> 03, export HTML, refresh REPORT.md")
    report.add_argument("--profile", default="cpu", help="params/<profile>.yaml (default: cpu)")
    report.add_argument("--notebooks", nargs="*", help="notebook numbers or names (default: all)")
    report.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    report.add_argument("--hide-code", action="store_true", help="also write HTML without code cells")
    report.add_argument("--no-run", action="store_true", help="reuse executed notebooks and sidecars")
    report.set_defaults(func=cmd_report)

    setup = sub.add_parser("setup", help="check sglang, build the stub driver, the tiny model and its trained "
                                         "drafter for a profile")
    setup.add_argument("--profile", default="cpu")
    setup.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    setup.add_argument("--rebuild", action="store_true",
                       help="build the tiny models again, even if cached (the drafter is retrained only if its "
                            "inputs changed)")
    setup.set_defaults(func=cmd_setup)

    check = sub.add_parser("preflight", help="check GPUs, sglang, checkpoints, disk, server flags and layer ids "
                                             "of a deployment without launching")
    check.add_argument("--profile", default="blackwell-8x", help="params/<profile>.yaml (default: blackwell-8x)")
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    check.add_argument("--json", action="store_true", help="print every check and its outcome as JSON")
    check.add_argument("--quick", action="store_true", help="skip sglang's parser once a check has failed")
    check.set_defaults(func=cmd_preflight)

    fetch = sub.add_parser("fetch-models", help="download (or resume) a profile's checkpoints before any launch")
    fetch.add_argument("--profile", default="blackwell-8x", help="params/<profile>.yaml (default: blackwell-8x)")
    fetch.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a profile key")
    fetch.add_argument("--endpoint", default=None, help="a hub mirror (default: HF_ENDPOINT or huggingface.co)")
    fetch.add_argument("--local-dir", default=None, help="download into DIR/<org>/<name> instead of the HF cache")
    fetch.add_argument("--configs-only", action="store_true",
                       help="only configs, tokenizers and code (enough for notebook 02's layer ids)")
    fetch.add_argument("--max-workers", type=int, default=8, help="parallel file downloads (default 8)")
    fetch.set_defaults(func=cmd_fetch_models)

    from eagle3lab.fix.patching import add_cli_arguments

    patch = sub.add_parser("patch", help="check / apply / verify / revert a patch on the installed sglang, "
                                         "or restore the release")
    add_cli_arguments(patch)
    patch.set_defaults(func=cmd_patch)

    from eagle3lab.fix.preflight_model import add_cli_arguments as preflight_model_arguments
    from eagle3lab.report.predict_cli import one_line_errors

    preflight = one_line_errors(sub.add_parser(
        "preflight-model", help="will an EAGLE-3 launch of this model crash on this sglang release? (from sglang's "
                                "source, offline once cached)"))
    preflight_model_arguments(preflight)
    preflight.set_defaults(func=cmd_preflight_model)

    from eagle3lab.fix.fixgen import add_cli_arguments as upstream_fixes_arguments

    fixes = one_line_errors(sub.add_parser("upstream-fixes", help="generate and check a delegation patch for every "
                                                                  "wrapper a release's audit finds lacking"))
    upstream_fixes_arguments(fixes)
    fixes.set_defaults(func=cmd_upstream_fixes)

    from eagle3lab.report.predict_cli import add_arguments as add_predict_arguments

    predict = one_line_errors(sub.add_parser("predict", help="cost model: plain vs EAGLE-3 throughput per batch size"))
    add_predict_arguments(predict)
    predict.set_defaults(func=cmd_predict)

    from eagle3lab.doctor import add_arguments as add_doctor_arguments

    doctor = one_line_errors(sub.add_parser("doctor", help="why does EAGLE-3 give no speedup on my deployment? "
                                                           "(launch command, server log, bench_serving output)"))
    add_doctor_arguments(doctor)
    doctor.set_defaults(func=cmd_doctor)
    return parser


def _command(args: argparse.Namespace) -> str:
    if args.command == "patch":
        return " ".join(part for part in ("patch", args.action, args.patch) if part)
    profile = getattr(args, "profile", None)
    return f"{args.command} --profile {profile}" if profile else args.command


def interruption_line(exc: signals.Interrupted) -> str:
    """One line: the signal, what it interrupted, and what was given back."""
    restored = exc.restorations()
    what = "; restored: " + ", ".join(restored) if restored else "; nothing needed restoring"
    return f"{exc.signame} interrupted {exc.during}{what}"


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with signals.cli_handlers(), signals.activity(_command(args)):
            args.func(args)
    except signals.Interrupted as exc:
        print(f"eagle3lab: {interruption_line(exc)}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("eagle3lab: SIGINT interrupted the command", file=sys.stderr)
        return 130
    except Eagle3LabError as exc:
        print(f"eagle3lab: {exc}", file=sys.stderr)
        return 2
    return 0
