"""The canary's sglang: its releases on the package index, and one release's rows, read from the release's wheel
(downloaded once into the eagle3lab cache, never installed) or from the release record the package ships.

Rows come from the two tools a person would run by hand: the static audit (``trace.audit.conformance``) finds every
wrapper of an EAGLE-3-capable model in the release, and ``preflight-model`` (``fix.preflight_model.preflight``) gives
each class its verdict through sglang's own registry rules, where start-up raises first, and a patch that fixes it.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Optional, Sequence

from eagle3lab.canary.rows import ABSENT, FAIL, PASS, UNDECIDED, ReleaseRows, Row
from eagle3lab.errors import SourceError
from eagle3lab.fix.preflight_model import preflight
from eagle3lab.package import wheels
from eagle3lab.trace import audit, release_record
from eagle3lab.trace.facts import release_facts
from eagle3lab.trace.resolve import Resolver, torch_module_members
from eagle3lab.trace.sources import SglangSource, open_source

NAME = "sglang"
# The models the canary names and checks in every release, whether or not the audit calls them wrappers: the
# incident's (Kimi-K2.5), a wrapper that still lacks the interface (KimiVL), and the EAGLE-3 targets teams serve.
WATCHED: dict[str, str] = {
    "Kimi-K2.5": "KimiK25ForConditionalGeneration",
    "KimiVL": "KimiVLForConditionalGeneration",
    "DeepSeek-V3": "DeepseekV3ForCausalLM",
    "Qwen3-MoE": "Qwen3MoeForCausalLM",
    "Llama-4": "Llama4ForConditionalGeneration",
    "GLM-4.x": "Glm4MoeForCausalLM",
    "MiniMax": "MiniMaxM2ForCausalLM",
}
MODEL_OF = {arch: model for model, arch in WATCHED.items()}

# Two drafters' ids on a 61-layer target: the incident's drafter ([2, 30, 58]) and one whose first id is 1 (SpecForge's
# "output of layer i" drafters), which sglang PR #25454 (https://github.com/sgl-project/sglang/pull/25454) treats apart.
PROBE_DEPTH = 61
PROBE_IDS = ([2, 30, 58], [1, 30, 58])


def releases() -> list[str]:
    """Every sglang release on the package index, oldest first."""
    return wheels.list_releases()


def recorded_releases() -> list[str]:
    """The releases the shipped release record covers, in its order (oldest first); none when it is not shipped."""
    if not release_record.RECORD.is_file():
        return []
    about = json.loads(release_record.RECORD.read_text(encoding="utf-8"))
    return list(about.get("releases", [])) if isinstance(about, dict) else []


def _captured(written: dict[str, Any]) -> Optional[list[int]]:
    lists = [v for k, v in written.items() if "capture" in k and isinstance(v, list)]
    return lists[0] if lists else None


def layer_id_convention(res: Resolver, architecture: str) -> str:
    """How this release turns a drafter's ``eagle_aux_hidden_state_layer_ids`` into the layers the class captures,
    read by running the release's own ``set_eagle3_layers_to_capture`` (the one the class reaches, through its inner
    model) on a probe with two id sets.

    The canary's extension point for the layer-id column: issue 37's per-release conventions in
    ``trace.capture_order`` replace this probe when they land (it reads eager forwards only, not CUDA-graph order).
    """
    _, func = audit._hook_function(res, res.find(architecture))  # noqa: SLF001 - the audit's own hook resolution
    if func is None:
        return "not read: no set_eagle3_layers_to_capture reached"
    try:
        got = [_captured(audit.run_hook(func, PROBE_DEPTH, list(ids))) for ids in PROBE_IDS]
    except Exception as exc:  # the hook may use names a probe cannot stand in for (get_pp_group, ...)
        return f"not read ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    plus = [[i + 1 for i in ids] for ids in PROBE_IDS]
    if got == list(PROBE_IDS):
        return "ids as given"
    if got == plus:
        return "ids + 1"
    if got == [PROBE_IDS[0], plus[1]]:
        return "ids + 1 only when the first id is 1"
    if got == [None, None]:
        return "not read: the hook sets no layer list itself"
    return "other: " + "; ".join(f"{ids} -> {g}" for ids, g in zip(PROBE_IDS, got))


def _first_raise(answer: dict[str, Any]) -> str:
    """Where start-up raises first: the GPU path's certain site when there is one, else the CPU path's."""
    for profile in ("gpu", "cpu"):
        site = answer["first_raise"].get(profile)
        if site:
            if not site.get("certain", True) and site.get("otherwise"):
                site = site["otherwise"]
            return f"{site['where'].rsplit('/', 1)[-1]} ({profile})"
    return ""


def row_of(src: SglangSource, res: Resolver, architecture: str) -> Row:
    """One class of one release: ``preflight-model``'s verdict, the audit's kind, the layer-id convention."""
    model = MODEL_OF.get(architecture, architecture)
    watched = architecture in MODEL_OF
    if architecture not in release_facts(src).registry:
        return Row(architecture, model, ABSENT, watched=watched)
    answer = preflight([architecture], src=src)
    verdict = {True: FAIL, None: UNDECIDED, False: PASS}[answer["will_crash"]]
    missing = answer["missing"] or sorted(answer["unresolved"])
    patch = answer.get("patch") or {}
    return Row(architecture, model, verdict, missing=missing, layer_ids=layer_id_convention(res, architecture),
               watched=watched, kind=answer["kind"], first_raise=_first_raise(answer) if verdict == FAIL else "",
               fix=patch.get("path"))


def wrappers(src: SglangSource) -> list[str]:
    """The release's wrappers of EAGLE-3-capable models, as the static audit finds them."""
    return [row["entry"] for row in audit.conformance(src)["rows"]]


# Packages whose installed source the audit reads, never imports: torch.nn.Module's members (``resolve``), and the
# transformers classes some wrappers build on (``modindex``'s external modules).
SOURCES_READ = ("torch", "transformers")


def check_sources_read() -> None:
    """Without those sources every class would seem to lack ``modules``, ``named_modules``, ..., and wrappers built on
    transformers would be undecided: one line instead of wrong rows."""
    absent = [name for name in SOURCES_READ if importlib.util.find_spec(name) is None]
    if absent or not torch_module_members():
        names = ", ".join(absent or ["torch"])
        raise SourceError(f"the source of {names} is not installed here, and the audit reads it (it never imports "
                          "it); install it without its dependencies (pip install --no-deps NAME==VERSION at the pins "
                          "of requirements.txt) and rerun", problem="sources_not_installed", packages=absent)


def open_release(version: str) -> SglangSource:
    """The release's source, from its wheel (fetched once into the cache; a corrupt one is one line)."""
    check_sources_read()
    return open_source(wheels.check_version(version))


def candidates(srcs: Sequence[SglangSource]) -> list[str]:
    """The classes to check in every one of these releases: the watched ones, then every wrapper any of them has."""
    found = [arch for src in srcs for arch in wrappers(src)]
    return list(dict.fromkeys([*WATCHED.values(), *found]))


def rows(src: SglangSource, architectures: Sequence[str]) -> ReleaseRows:
    """The rows of one release over the given classes (absent ones included)."""
    res = Resolver(src)
    return ReleaseRows(NAME, src.version, f"wheel {src.origin_label}", [row_of(src, res, a) for a in architectures])


def recorded_rows(version: str) -> ReleaseRows:
    """The rows the shipped release record holds for one release (the incident's wrapper, audited by this trace
    code): no download and no parse. One line when the record lacks the release or is stale."""
    version = wheels.check_version(version)
    known = recorded_releases()
    if version not in known:
        held = f"it holds {known[0]} to {known[-1]}" if known else "none is shipped"
        raise SourceError(f"sglang {version} is not in the release record ({held}); "
                          "drop --from-record to read the release from the package index", version=version,
                          problem="not_in_record")
    row = release_record.recorded(release_record.BISECT_ROW, [version], audit.KIMI_ENTRY).get(version)
    if row is None:
        raise SourceError(f"the release record holds no row of sglang {version} for this trace code (stale); rerun "
                          f"`{release_record.RECORD_COMMAND}`, or drop --from-record", version=version,
                          problem="stale_record")
    verdict = ABSENT if not row["present"] else (FAIL if row["missing"] else PASS)
    arch = audit.KIMI_ENTRY
    return ReleaseRows(NAME, version, f"the release record ({release_record.RECORD.name})",
                       [Row(arch, MODEL_OF[arch], verdict, missing=list(row.get("missing", [])),
                            layer_ids="not in the record", watched=True, kind=audit.WRAPPER if row["present"] else "")])
