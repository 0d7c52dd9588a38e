"""The canary's sglang: its releases on the package index, and one release's rows, read from the release's wheel
(downloaded once into the eagle3lab cache, never installed) or from the release record the package ships.

Rows come from the two tools a person would run by hand: the static audit (``trace.audit.conformance``) finds every
wrapper of an EAGLE-3-capable model in the release, and ``preflight-model`` (``fix.preflight_model.preflight``) gives
each class its verdict through sglang's own registry rules, where start-up raises first, and a patch that fixes it.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Sequence

from eagle3lab.canary.rows import ABSENT, FAIL, PASS, UNDECIDED, ReleaseRows, Row
from eagle3lab.errors import SourceError
from eagle3lab.fix.preflight_model import preflight
from eagle3lab.package import wheels
from eagle3lab.trace import audit, capture_rule, release_layers, release_record
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

def releases() -> list[str]:
    """Every sglang release on the package index, oldest first."""
    return wheels.list_releases()


def recorded_releases() -> list[str]:
    """The releases the shipped release record covers, in its order (oldest first); none when it is not shipped."""
    if not release_record.RECORD.is_file():
        return []
    about = json.loads(release_record.RECORD.read_text(encoding="utf-8"))
    return list(about.get("releases", [])) if isinstance(about, dict) else []


def layer_id_convention(res: Resolver, rules: dict[str, capture_rule.HookRule], architecture: str) -> str:
    """How this release turns a drafter's ``eagle_aux_hidden_state_layer_ids`` into the layers the class captures:
    the rule of the ``set_eagle3_layers_to_capture`` the class reaches (its own, or its inner model's once delegated),
    evaluated from the release's hook body by ``trace.capture_rule``."""
    owner, _ = audit._hook_function(res, res.find(architecture))  # noqa: SLF001 - the audit's own hook resolution
    rule = rules.get(owner.rsplit(".", 1)[-1]) if owner else None
    if rule is None:
        return "not read: no hook that sets the layers"
    try:
        return rule.rule()
    except SourceError as err:
        return f"not read ({err.fields.get('problem') or err.problem})"


def _first_raise(answer: dict[str, Any]) -> str:
    """Where start-up raises first: the GPU path's certain site when there is one, else the CPU path's."""
    for profile in ("gpu", "cpu"):
        site = answer["first_raise"].get(profile)
        if site:
            if not site.get("certain", True) and site.get("otherwise"):
                site = site["otherwise"]
            return f"{site['where'].rsplit('/', 1)[-1]} ({profile})"
    return ""


def row_of(src: SglangSource, res: Resolver, rules: dict[str, capture_rule.HookRule], architecture: str) -> Row:
    """One class of one release: ``preflight-model``'s verdict, the audit's kind, the layer-id convention."""
    model = MODEL_OF.get(architecture, architecture)
    watched = architecture in MODEL_OF
    if architecture not in release_facts(src).registry:
        return Row(architecture, model, ABSENT, watched=watched)
    answer = preflight([architecture], src=src)
    verdict = {True: FAIL, None: UNDECIDED, False: PASS}[answer["will_crash"]]
    missing = answer["missing"] or sorted(answer["unresolved"])
    patch = answer.get("patch") or {}
    return Row(architecture, model, verdict, missing=missing, layer_ids=layer_id_convention(res, rules, architecture),
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
    res, rules = Resolver(src), capture_rule.hook_rules(src)
    return ReleaseRows(NAME, src.version, f"wheel {src.origin_label}",
                       [row_of(src, res, rules, a) for a in architectures])


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
                            layer_ids=recorded_layer_ids(version) if row["present"] else "-", watched=True,
                            kind=audit.WRAPPER if row["present"] else "")])


def recorded_layer_ids(version: str) -> str:
    """The incident's family's layer-id rule, from the hook body the release record keeps for the release."""
    row = release_record.recorded(release_record.CAPTURE_RULE, [version]).get(version)
    if row is None:
        return "not in the record"
    rule = release_layers.ReleaseCapture.from_row(version, row).rule
    return rule.rule() if rule is not None else "not read: no hook that sets the layers"
