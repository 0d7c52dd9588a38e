"""The checks of both server command lines through sglang's own parser (``ServerArgs``), in a child."""

from __future__ import annotations

import contextlib
import sys
from eagle3lab.errors import Eagle3LabError
from eagle3lab.runtime import deployment
from eagle3lab.runtime.profiles import Profile, load_profile
from eagle3lab.runtime.sglang_args import parse_launches
from eagle3lab.preflight.result import Check, SLOW


def check_server_flags(profile: Profile, models: deployment.Models, validate: bool, gpus: int) -> list[Check]:
    """Both launches (baseline and EAGLE-3) through sglang's own parser; sglang's sizing when models are local."""

    specs = {"baseline": deployment.server_spec(profile, models, speculative=False),
             "EAGLE-3": deployment.server_spec(profile, models, speculative=True)}
    try:
        parsed = parse_launches({k: s.argv() for k, s in specs.items()}, specs["baseline"].env, validate=validate,
                                check=False)
    except Eagle3LabError as exc:
        return [Check(f"{SLOW} ({label})", "fail", str(exc), "make setup") for label in specs]
    out = []
    for label, result in parsed.items():
        name = f"{SLOW} ({label})"
        data = {"argv": specs[label].argv(), **result.to_dict()}
        if not result.parsed:
            out.append(Check(name, "fail", f"sglang's parser rejects the command line: {result.error}",
                             "fix the profile key or extra_server_args", data))
        elif result.validated is False:
            out.append(Check(name, "fail", f"sglang's ServerArgs refuses it: {result.error}",
                             "fix the profile (see the detail)", data))
        elif result.validated is None:
            out.append(Check(name, "ok", "sglang's parser accepts every flag; its own sizing needs the models' "
                                         "configs on disk (not fetched yet)", data=data))
        else:
            chosen = result.chosen
            mem = chosen.get("mem_fraction_static")
            setter = "profile" if profile.mem_fraction_static is not None else "sglang"
            sized = "; no GPU visible here, so its fallback sizing" if profile.device == "cuda" and not gpus \
                else ""
            out.append(Check(name, "ok", f"accepted by sglang's ServerArgs; mem_fraction_static "
                                         f"{round(mem, 3) if isinstance(mem, float) else mem} (set by {setter}"
                                         f"{sized}), chunked_prefill_size {chosen.get('chunked_prefill_size')}, "
                                         f"cuda_graph_max_bs {chosen.get('cuda_graph_max_bs')}, max_running_requests "
                                         f"{chosen.get('max_running_requests')}", data=data))
    return out


FULL_CHECK = "sglang check_server_args"


def check_full_server_args(profile: Profile, models: deployment.Models, present: bool) -> list[Check]:
    """Both launches through sglang's full ``check_server_args()`` (what its engine runs before any model code,
    ``engine.py:1026``), in a child with the launch's own environment. Needs a model config on disk: when the
    profile's models are not fetched, the tiny Kimi-K2.5-shaped checkpoints (same ``KimiK25ForConditionalGeneration``
    class, multimodal, which is what the cuDNN refusal keys on) stand in and the row says so."""
    stand_in = None
    if not present:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout may be preflight's --json answer
                stand_in = deployment.resolve_models(load_profile("cpu"))
        except Eagle3LabError as exc:
            return [Check(f"{FULL_CHECK} ({label})", "skipped", f"models not on disk and no stand-in: {exc}")
                    for label in ("baseline", "EAGLE-3")]
    used = stand_in or models
    specs = {"baseline": deployment.server_spec(profile, used, speculative=False),
             "EAGLE-3": deployment.server_spec(profile, used, speculative=True)}
    try:
        parsed = parse_launches({k: s.argv() for k, s in specs.items()}, specs["baseline"].env, check=True)
    except Eagle3LabError as exc:
        return [Check(f"{FULL_CHECK} ({label})", "fail", str(exc), "make setup") for label in specs]
    note = (" (model paths: the tiny Kimi-K2.5-shaped checkpoints stand in for the unfetched models)"
            if stand_in else "")
    env_keys = sorted(k for k in specs["baseline"].env if k.startswith("SGLANG_"))
    out = []
    for label, result in parsed.items():
        name = f"{FULL_CHECK} ({label})"
        data = {"argv": specs[label].argv(), "launch_env_sglang": {k: specs[label].env[k] for k in env_keys},
                "stand_in_models": stand_in is not None, **result.to_dict()}
        if result.checked:
            out.append(Check(name, "ok", f"passes sglang's full check_server_args() with the launch environment "
                                         f"({', '.join(f'{k}=1' for k in env_keys) or 'no SGLANG_ variables'})"
                                         + note, data=data))
        elif result.checked is False:
            out.append(Check(name, "fail", f"sglang's check_server_args() refuses it: {result.check_error}" + note,
                             "see runtime/launch_env.py for the launch environment", data))
        else:
            out.append(Check(name, "fail", f"the command line failed before the full check: {result.error}" + note,
                             "fix the profile (see the detail)", data))
    return out
