"""The checks of the drafter's aux layer ids: the layers they make sglang capture eagerly and under CUDA graphs,
and where the start-up first raises for this release.
"""

from __future__ import annotations

from typing import Any
from eagle3lab.errors import Eagle3LabError
from eagle3lab.runtime import deployment, gpuinfo, modelinfo
from eagle3lab.runtime.profiles import Profile
from eagle3lab.runtime.tinymodel.configs import REAL_AUX_LAYER_IDS, REAL_NUM_LAYERS
from eagle3lab.fix import capture_order_fix, capture_rule_fix
from eagle3lab.trace import audit, capture_order, sources
from eagle3lab.trace.startup import StartupProfile
from eagle3lab.preflight.result import Check, Preflight, SLOW


def check_layers(profile: Profile) -> Check:
    """The drafter's aux ids from its config, and what sglang's start-up makes the target capture (traced)."""
    name = "drafter aux layers"
    setup = deployment.layer_setup(profile)
    data: dict[str, Any] = {"setup": setup.to_dict()}
    if not setup.usable:
        return Check(name, "skipped", "the drafter's config is not on disk", setup.fix, data)
    depth, ids = setup.depth, setup.aux_layer_ids
    assert depth is not None
    if ids is not None:
        bad = [i for i in ids if not 0 <= i <= depth - 2]
        if bad:
            return Check(name, "fail", f"drafter ids {ids} include {bad}, outside 0..{depth - 2} for a {depth}-layer "
                                       "target (sglang captures id i at the input of layer i + 1)",
                         "use a drafter trained for this target", data)
    try:
        table = _traced_capture(setup, depth)
    except Eagle3LabError as exc:  # e.g. an entry class this sglang release does not register
        return Check(name, "warn", f"drafter ids {ids} on a {depth}-layer target; the capture could not be traced: "
                                   f"{exc}", None, data)
    data["trace"] = {k: table[k] for k in ("eager_forwards_capture", "cuda_graph_forwards_capture", "conflict")}
    eager = (table["eager_forwards_capture"] or {}).get("self.model.layers_to_capture")
    graphs = (table["cuda_graph_forwards_capture"] or {}).get("self.model.layers_to_capture")
    named = f"drafter ids {ids}" if ids is not None else "the drafter names no ids (sglang's defaults)"
    detail = (f"{named} on a {depth}-layer target ({setup.draft_config}): eager forwards capture {eager}"
              + (f", CUDA-graph replays capture {graphs}" if graphs is not None else ", no CUDA graphs")
              + " (traced from sglang's start-up)")
    if profile.model_num_layers != depth and profile.target_model != deployment.TINY:
        detail += f"; the profile's model_num_layers is {profile.model_num_layers}, the config says {depth}"
    if table["conflict"]:
        return Check(name, "warn", detail + ": the drafter reads different layers in decode than in prefill",
                     "expect lower acceptance with CUDA graphs on; compare with --set disable_cuda_graph=true", data)
    return Check(name, "ok", detail, data=data)


def _traced_capture(setup: modelinfo.LayerSetup, depth: int) -> dict[str, Any]:
    # The trace stage owns which start-up calls pass the ids; preflight asks it instead of repeating it.

    src = sources.open_source("installed")
    if src.modified:
        src = sources.open_source(src.version)
    startup = StartupProfile(setup.startup, setup.device, cuda_graphs=setup.cuda_graphs)
    return audit.layer_table(src, setup.entry_class or audit.KIMI_ENTRY, depth,
                             setup.aux_layer_ids, startup)


def check_capture_order(profile: Profile, setup: modelinfo.LayerSetup | None = None) -> Check:
    """sglang's second EAGLE-3 defect for this launch: does the installed sglang capture CUDA graphs before the
    drafter's ids are set (``trace.capture_order``), and do this drafter's ids make graphs and eager differ?"""
    name = "capture order"
    src = sources.open_source("installed")  # as installed: an applied capture-order patch counts
    order = capture_order.trace_capture_order(src)
    data: dict[str, Any] = {"order": order.to_dict(), "fix_pr": capture_order.FIX_PR,
                            "patch": f"patches/{capture_order_fix.PATCH_NAME}.patch"}
    # the tiny drafter is trained on the output of layer i (the +1); others: sglang PR #25454's convention
    intended = True if profile.uses_tiny_model else None
    where = ", ".join(c.where for c in order.graph_resets) or "no graph-runner reset"
    if profile.device != "cuda" or profile.disable_cuda_graph:
        return Check(name, "ok", f"CUDA graphs off: every forward is eager (sglang {src.version}, defect in this "
                                 f"release: {'yes' if order.defect else 'no'})", data=data)
    if not order.defect:
        return Check(name, "ok", f"sglang {src.version} sets the drafter's ids before graph capture ({where})",
                     data=data)
    setup = setup or deployment.layer_setup(profile)
    if not setup.usable or setup.depth is None:
        quoted = ""
        if profile.model_num_layers == REAL_NUM_LAYERS and not profile.uses_tiny_model:
            layers = order.layers(REAL_NUM_LAYERS, list(REAL_AUX_LAYER_IDS))
            data["quoted_layers"] = {**layers, "ids_source": "AQ-MedAI/Kimi-K25-eagle3's config as the engineer's "
                                                             "write-up quotes it (not read here)"}
            quoted = (f"; with the ids the engineer's write-up quotes for the drafter, {list(REAL_AUX_LAYER_IDS)}: "
                      f"graph replays {layers['cuda_graph_layers']}, eager forwards {layers['eager_layers']}")
        return Check(name, "warn", f"sglang {src.version} captures CUDA graphs with the model's default layers "
                                   f"before the drafter's ids are set ({where}); the drafter's config is not on "
                                   f"disk, so its own ids are not known yet{quoted}",
                     capture_rule_fix.right_fix(None, plus_one_intended=intended, release=src.version), data)
    layers = order.layers(setup.depth, setup.aux_layer_ids)
    data["layers"] = layers
    detail = (f"sglang {src.version}, CUDA graphs on, drafter ids {setup.aux_layer_ids} on {setup.depth} layers: "
              f"graph replays capture {layers['cuda_graph_layers']}, eager forwards {layers['eager_layers']} "
              f"({where})")
    if layers["mismatch"]:
        return Check(name, "warn", detail + ": decode and verify read other layers than prefill",
                     capture_rule_fix.right_fix(setup.aux_layer_ids, plus_one_intended=intended,
                                                  release=src.version), data)
    return Check(name, "ok", detail, data=data)


def check_first_raise(profile: Profile, result: Preflight, inv: gpuinfo.GpuInventory | None,
                      entry_class: str = audit.KIMI_ENTRY) -> Check:
    """Where an unpatched EAGLE-3 launch raises first, decided from sglang's resolved ServerArgs for this launch
    (the EAGLE-3 server flags row) and the GPU's compute capability (``trace.startup.StartupProfile.resolved``)."""
    name = "first raise"
    row = next((c for c in result.checks if c.name == f"{SLOW} (EAGLE-3)"), None)
    chosen = row.data.get("chosen") if row is not None and row.data.get("validated") else None
    if not chosen:
        return Check(name, "skipped", "needs sglang's resolved ServerArgs, which need the models' configs on disk")
    capability = inv.gpus[0].capability if inv is not None and inv.gpus else None
    if chosen.get("device") == "cuda" and capability is None:
        return Check(name, "skipped", "needs the GPU's compute capability (no CUDA GPU here)", data={"chosen": chosen})
    src = sources.open_source("installed")
    if src.modified:
        src = sources.open_source(src.version)
    startup = StartupProfile.resolved(chosen, capability)
    try:
        first = audit.verdict(src, entry_class, profiles=(startup,))["first_raise"][startup.name]
    except Eagle3LabError as exc:
        return Check(name, "warn", f"could not be traced: {exc}")
    data = {"first_raise": first, "capability": capability, "server_args": chosen}
    if not first.get("member"):
        return Check(name, "ok", f"sglang {src.version}: the entry class lacks nothing the start-up reaches",
                     data=data)
    return Check(name, "info", f"unpatched, sglang {src.version} raises first at {first['where']} "
                               f"({first['member']} in {first.get('function')}; certain: "
                               f"{'yes' if first.get('certain') else 'no'}), decided from moe_runner_backend "
                               f"{chosen.get('moe_runner_backend')} on sm_{capability[0]}{capability[1]}"
                 if capability else f"unpatched, sglang {src.version} raises first at {first['where']}", data=data)
