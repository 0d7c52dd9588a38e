"""The canary's vLLM: its releases on the package index, and one release's rows, from the release's own source (the
wheel's Python files read by HTTP range requests, cached once per release, never installed) or from the vLLM audits
the package ships (offline).

Rows come from the two tools a person would run by hand: ``audit --engine vllm`` (``trace.vllm.audit``: every
registered target, whether it implements ``SupportsEagle3`` and how, and what a wrapper wraps) and
``preflight-model --engine vllm`` (``trace.vllm.preflight.answer``: the allow-list gate, then the ``supports_eagle3``
check, then the protocol's default setter). The gate tests the target's text model type, which a class name does not
carry: the watched models get the one their published config.json gives; any other class is undecided while a
release has the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from packaging.version import Version

from eagle3lab.canary.rows import ABSENT, FAIL, PASS, UNDECIDED, ReleaseRows, Row
from eagle3lab.canary.sglang_engine import MODEL_OF, check_sources_read
from eagle3lab.errors import SourceError
from eagle3lab.package.wheels import check_version
from eagle3lab.trace import capture_rule
from eagle3lab.trace.vllm import preflight, record
from eagle3lab.trace.vllm.audit import audit
from eagle3lab.trace.vllm.bisect import KIMI_K25, KIMI_K25_TEXT_TYPE
from eagle3lab.trace.vllm.interface import PROTOCOL
from eagle3lab.trace.vllm.source import open_vllm, vllm_releases

NAME = "vllm"
# The watched models (the same models and class names as sglang's, ``sglang_engine.WATCHED``) with the text model
# type vLLM's allow-list tests (``hf_text_config.model_type``), as each model's config.json on Hugging Face gives it:
# Kimi-K2.5's text_config (``trace.vllm.bisect``), deepseek-ai/DeepSeek-V3, Qwen/Qwen3-30B-A3B,
# meta-llama/Llama-4-Scout-17B-16E-Instruct's text_config, zai-org/GLM-4.5, MiniMaxAI/MiniMax-M2. KimiVL's is left
# unnamed: the class lacks the interface in every release the record holds, so the gate never decides its verdict.
TEXT_MODEL_TYPE: dict[str, Optional[str]] = {
    KIMI_K25: KIMI_K25_TEXT_TYPE,
    "KimiVLForConditionalGeneration": None,
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "Llama4ForConditionalGeneration": "llama4_text",
    "Glm4MoeForCausalLM": "glm4_moe",
    "MiniMaxM2ForCausalLM": "minimax_m2",
}
LACKS = f"not a {PROTOCOL}: lacks "  # how the audit's evidence names the protocol members a class lacks


@dataclass(frozen=True)
class Release:
    """One release's audit (``audit --engine vllm --json``) and where it was read from."""

    version: str
    audit: dict[str, Any]
    source: str


def releases() -> list[str]:
    """Every vLLM release with a wheel on the package index, oldest first."""
    return vllm_releases()


def recorded_releases() -> list[str]:
    """The releases the shipped vLLM audit record names, oldest first."""
    return sorted(record.releases(), key=Version)


def open_release(version: str) -> Release:
    """The release's audit, traced now from its wheel's Python files (fetched once into the cache by range
    requests; a corrupt cached copy is one line)."""
    check_sources_read()  # the audit reads transformers' source for the classes wrappers build on, as sglang's does
    src = open_vllm(check_version(version))
    return Release(src.version, audit(src), f"wheel {src.origin_label}")


def open_recorded(version: str) -> Release:
    """The release's audit from the record the package ships; one line when it lacks the release or is stale."""
    version = check_version(version)
    known = recorded_releases()
    if version not in known:
        held = f"it holds {known[0]} to {known[-1]}" if known else "none is shipped"
        raise SourceError(f"vllm {version} is not in the release record ({held}); drop --from-record to read the "
                          "release from the package index", version=version, problem="not_in_record")
    found = record.recorded(version)
    if found is None:
        raise SourceError(f"the release record holds no audit of vllm {version} for this trace code (stale); rerun "
                          f"`{record.RECORD_COMMAND}`, or drop --from-record", version=version, problem="stale_record")
    return Release(version, found, f"the release record ({record.RECORD.name}, traced {found['traced_at']['date'][:10]})")


def capable_wrappers(release: Release) -> list[str]:
    """The release's wrappers of an EAGLE-3-capable model: the inner language model implements the interface, or
    the wrapper does itself (its inner model chosen at load time)."""
    return [row["arch"] for row in release.audit["classes"]
            if row["wrapper_of"] and (row["implements"] or row["inner_implements"])]


def candidates(releases_read: Sequence[Release]) -> list[str]:
    """The classes to check in every one of these releases: the watched ones, then every capable wrapper any has."""
    found = [arch for release in releases_read for arch in capable_wrappers(release)]
    return list(dict.fromkeys([*TEXT_MODEL_TYPE, *found]))


def layer_id_convention(layers: dict[str, Any]) -> str:
    """How the release's runner turns a drafter's ``eagle_aux_hidden_state_layer_ids`` into the layers it captures,
    from ``trace.vllm.layers``: the arithmetic of every reader (vLLM uses the ids as given, PR #43671) and where each
    looks for them (the draft config's top level, or also under ``eagle_config``, where SpecForge writes them). The
    runner reads them, so it is the same for every class of a release."""
    readers = [r for r in layers.get("readers", []) if r["top_level"] or r["nested"]]
    if not readers:
        return "not read: no reader of the drafter's ids"
    shifts = sorted({int(r["shift"]) for r in readers})
    rules = [capture_rule.RULE_AS_GIVEN if s == 0 else capture_rule.RULE_PLUS_ONE if s == 1 else f"every id + {s}"
             for s in shifts]
    def scope(reader: dict[str, Any]) -> str:
        return " and ".join(where for where, read in (("top level", reader["top_level"]),
                                                      ("eagle_config", reader["nested"])) if read)

    scopes = {reader["where"].split(":")[0].rsplit("/", 1)[-1]: scope(reader) for reader in readers}
    where = (next(iter(scopes.values())) if len(set(scopes.values())) == 1
             else "; ".join(f"{name}: {text}" for name, text in sorted(scopes.items())))
    return f"{' / '.join(rules)} ({where})"


def _first_raise(answer: dict[str, Any]) -> str:
    """Where an EAGLE-3 launch raises first: the file and line, and what."""
    first = answer["first_error"]
    place = first["where"].rsplit("/", 1)[-1] or first["stage"]
    return f"{place} ({first['raises'].split(' ')[0]})"


def _lacks(evidence: str) -> list[str]:
    if not evidence.startswith(LACKS):
        return []
    return [name.strip() for name in evidence[len(LACKS):].split(";")[0].split(",") if name.strip()]


def row_of(release: Release, by_arch: dict[str, dict[str, Any]], convention: str, architecture: str) -> Row:
    """One class of one release: the preflight's verdict, the audit's interface and how, the layer-id convention."""
    model = MODEL_OF.get(architecture, architecture)
    watched = architecture in TEXT_MODEL_TYPE
    found = by_arch.get(architecture)
    if found is None:
        return Row(architecture, model, ABSENT, watched=watched)
    answer = preflight.answer(release.audit, [architecture], TEXT_MODEL_TYPE.get(architecture))
    verdict = {True: FAIL, None: UNDECIDED, False: PASS}[answer["will_crash"]]
    kind = f"wrapper of {found['wrapper_of']}" if found["wrapper_of"] else "not a wrapper"
    return Row(architecture, model, verdict, missing=_lacks(found["evidence"]), layer_ids=convention,
               watched=watched, kind=kind, first_raise=_first_raise(answer) if verdict == FAIL else "",
               has_interface=bool(found["implements"]), how=found["how"])


def rows(release: Release, architectures: Sequence[str]) -> ReleaseRows:
    """The rows of one release over the given classes (absent ones included)."""
    by_arch = {row["arch"]: row for row in release.audit["classes"]}
    convention = layer_id_convention(release.audit.get("layers", {}))
    return ReleaseRows(NAME, release.version, release.source,
                       [row_of(release, by_arch, convention, arch) for arch in architectures])


def recorded_rows(versions: Sequence[str]) -> list[ReleaseRows]:
    """These releases' rows from the shipped record, over the same classes (no download, no parse)."""
    read = [open_recorded(version) for version in versions]
    classes = candidates(read)
    return [rows(release, classes) for release in read]
