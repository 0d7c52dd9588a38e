"""Notebook 02's steps as functions returning plain data, which the notebook shows and the sidecar keeps."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from packaging.version import Version

from eagle3lab.errors import SourceError
from eagle3lab.package import wheels
from eagle3lab.trace import audit, capture_order, contract, release_layers, release_record, sources
from eagle3lab.report.plots import trace as plots_trace
from eagle3lab.paths import repo_dir
from eagle3lab.trace.startup import StartupProfile
from eagle3lab.runtime.deployment import layer_setup
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.tinymodel.configs import REAL_AUX_LAYER_IDS, REAL_NUM_LAYERS

# The incident's drafter and target: AQ-MedAI/Kimi-K25-eagle3's eagle_aux_hidden_state_layer_ids as the engineer's
# write-up quotes its config (not read from the checkpoint here: it is not on this machine), and Kimi-K2.5's depth.
KIMI_DRAFTER_IDS = tuple(REAL_AUX_LAYER_IDS)
KIMI_DEPTH = REAL_NUM_LAYERS
KIMI_IDS_SOURCE = ("AQ-MedAI/Kimi-K25-eagle3 config.json, as quoted in the engineer's write-up "
                   "(https://huggingface.co/AQ-MedAI/Kimi-K25-eagle3)")

FIRST_RELEASE = "0.5.6"
T = TypeVar("T")


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """(result, seconds): timings are recorded in the sidecar, never asserted on."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, round(time.perf_counter() - start, 3)


def release_source(spec: str) -> tuple[sources.SglangSource, dict[str, Any]]:
    """The source to trace, and a note of where it came from.

    A patched install (notebook 03 patches the wrapper in place) is no longer the release this notebook is
    about, and notebook 03 would read a verdict of "nothing missing" from it; the release wheel is traced
    instead, and the note says so.
    """
    src = sources.open_source(spec)
    note = describe(src)
    if src.modified:
        wheel = sources.open_source(src.version)
        note = {**describe(wheel), "installed_copy_modified": src.modified,
                "note": f"installed sglang is modified ({', '.join(src.modified)}); traced the {src.version} wheel"}
        return wheel, note
    return src, note


def describe(src: sources.SglangSource) -> dict[str, Any]:
    """Which source this is, and whether it is still the release (a patched install is not)."""
    return {"version": src.version, "origin": src.origin, "python_files": len(src.files()),
            "modified_since_install": src.modified, "skipped": [asdict(s) for s in src.skipped]}


def grep_table(src: sources.SglangSource) -> list[dict]:
    return [asdict(h) for h in contract.grep_view(src)]


def contract_table(src: sources.SglangSource) -> list[dict]:
    """EAGLE-3 contract sites on the target and draft model objects."""
    return [s.to_dict() for s in contract.contract(contract.trace(src))]


# The GPU deployment whose drafter a cpu-profile run traces next to its own (the incident's).
GPU_DEPLOYMENT = "blackwell-8x"
CPU_DEPLOYMENT = "cpu"


def layer_setups(profile: Any) -> list[Any]:
    """Depth and aux ids for each start-up path, read from the drafters' own configs (``deployment.layer_setup``):
    the GPU path from this run's profile if it runs on CUDA, else from the incident's deployment; the CPU path
    from this run's profile if it runs on CPU, else from the cpu profile. A deployment whose checkpoints are not
    on disk gives a 'not fetched' setup, never a typed-in number."""

    gpu = profile if profile.device == "cuda" else load_profile(GPU_DEPLOYMENT)
    cpu = profile if profile.device == "cpu" else load_profile(CPU_DEPLOYMENT)
    return [layer_setup(gpu), layer_setup(cpu)]


def layer_ids(src: sources.SglangSource, entry: str, setups: list[Any]) -> list[dict]:
    """One layer-id table per start-up path ('gpu', 'cpu'), each from its deployment's drafter config."""
    tables = []
    for setup in setups:
        origin = {"deployment": setup.deployment, "status": setup.status, "drafter_config": setup.draft_config,
                  "fix": setup.fix}
        if not setup.usable:
            tables.append({"profile": setup.startup, "depth": None, "aux_layer_ids": None, "rows": [],
                           "eager_forwards_capture": None, "cuda_graph_forwards_capture": None, "conflict": False,
                           **origin})
            continue
        startup = StartupProfile(setup.startup, setup.device, cuda_graphs=setup.cuda_graphs)
        tables.append({**audit.layer_table(src, entry, setup.depth, setup.aux_layer_ids, startup), **origin})
    return tables


def verdict_text(verdict: dict[str, Any]) -> str:
    """The verdict in plain sentences: what the wrapper is, what it lacks, where each profile dies."""
    rep = verdict["class_report"]
    lines = [
        f"{verdict['entry_class']} (sglang {verdict['sglang_version']}): resolution order {rep['resolution_order']}",
        f"inner language model: self.{rep['inner_attr']} = {rep['inner_class'] or 'none found'}; "
        f"nn.Module.__getattr__ raises for missing members: {rep['nn_module_getattr']}; "
        f"custom __getattr__: {rep['custom_getattr'] or 'none'}",
        f"needed unguarded but missing: {verdict['missing_members']} "
        f"(delegation gaps {verdict['delegation_gaps']}, real lacks {verdict['real_lacks']})",
    ]
    for profile, site in verdict["first_raise"].items():
        if not site:
            lines.append(f"{profile} profile: no missing member is reached at start-up")
            continue
        lines.append(f"{profile} profile raises first at {site['where']} "
                     f"{site['member']}({', '.join(site['args'])}) in {site['function']}")
        if site.get("otherwise"):
            other = site["otherwise"]
            lines.append(f"  that call sits behind a branch the profile cannot decide; if skipped: "
                         f"{other['where']} {other['member']}")
    for profile, site in verdict["next_raise_after_one_method"].items():
        if site:
            lines.append(f"{profile} profile with only that method delegated raises next at {site['where']} "
                         f"{site['member']}")
    lines.append(f"one delegating method enough: {verdict['one_method_enough']}")
    return "\n".join(lines)


def layer_rows(tables: list[dict]) -> list[dict]:
    """All layer-id rows of all profiles, one table, in start-up order per profile; a deployment whose drafter
    is not on disk is one row saying so."""
    rows = []
    for t in tables:
        head = {"profile": t["profile"], "deployment": t.get("deployment"), "depth": t["depth"],
                "drafter ids": t["aux_layer_ids"]}
        if t.get("status") == "not fetched":
            rows.append({**head, "where": f"not fetched: {t.get('fix')}"})
        rows += [{**head, **row} for row in t["rows"]]
    return rows


def layer_text(tables: list[dict]) -> str:
    """Which forwards see which captured layers, per profile."""
    return "\n".join(
        f"{t['profile']} ({t.get('deployment')}): drafter config not fetched, no claim; {t.get('fix')}"
        if t.get("status") == "not fetched" else
        f"{t['profile']} ({t.get('deployment')}, depth {t['depth']}, drafter ids {t['aux_layer_ids']}): eager "
        f"forwards capture {t['eager_forwards_capture']}; CUDA-graph forwards capture "
        f"{t['cuda_graph_forwards_capture']}; disagree: {t['conflict']}"
        for t in tables
    )


@dataclass(frozen=True)
class Releases:
    """The releases notebook 02 bisects, and one line saying where the list came from."""

    versions: list[str]
    origin: str


def record_releases(entry: str = audit.KIMI_ENTRY, path: Path | None = None) -> list[str]:
    """The releases the shipped release record lists from 0.5.6 on, of them those it holds a current bisect row of
    ``entry`` for (a row traced by other trace code is stale: ``release_record.recorded`` leaves it out)."""
    record = path or release_record.RECORD
    try:
        listed = json.loads(record.read_text(encoding="utf-8")).get("releases", [])
    except (OSError, ValueError, AttributeError):
        return []
    listed = [v for v in listed if isinstance(v, str) and Version(v) >= Version(FIRST_RELEASE)]
    held = release_record.recorded(release_record.BISECT_ROW, listed, entry, path=record)
    return sorted((v for v in listed if v in held), key=Version)


def bisect_releases(requested: list[str], entry: str = audit.KIMI_ENTRY, *, record_fallback: bool = True) -> Releases:
    """The requested releases, or every release from 0.5.6 to the newest on the index; with the index unreachable
    (an air-gapped GPU node) and ``record_fallback``, the releases the shipped record holds, saying so. Their wheels
    are fetched when a release is traced, not here: the record holds the rows of the releases it lists."""
    if requested:
        return Releases([wheels.check_version(v) for v in requested], "the releases asked for (bisect_versions)")
    try:
        return Releases(wheels.releases_between(FIRST_RELEASE), "every release on the package index from "
                                                                 f"{FIRST_RELEASE}")
    except SourceError as err:
        held = record_releases(entry) if record_fallback and err.problem == "offline" else []
        if not held:
            raise
        return Releases(held, f"the package index is unreachable, so the {len(held)} releases the shipped release "
                              f"record holds ({held[0]} to {held[-1]}); releases after {held[-1]} are not covered")


def bisect_versions(requested: list[str], *, record_fallback: bool = True) -> list[str]:
    """``bisect_releases(requested).versions``; the commands that write the record pass ``record_fallback=False``
    (a record must come from the index, never from itself)."""
    return bisect_releases(requested, record_fallback=record_fallback).versions


def open_newest(versions: list[str]) -> tuple[Optional[sources.SglangSource], Optional[str]]:
    """The newest release's source (its wheel from the cache, else the index), or, with neither, None and the one
    line saying what the notebook skips instead."""
    try:
        return sources.open_source(versions[-1]), None
    except SourceError as err:
        if err.problem != "offline":
            raise
        return None, (f"skipped for the newest release, sglang {versions[-1]}: its audit, capture-order rows and "
                      "fixes (no cached wheel and the package index is unreachable; connect, or put its wheel in "
                      "the eagle3lab cache's wheels/ folder)")


def newest_text(conf_newest: Optional[dict[str, Any]], skipped: Optional[str]) -> str:
    return audit_summary(conf_newest) if conf_newest else str(skipped)


def write_release_rows(versions: list[str], entry: str = audit.KIMI_ENTRY) -> Path:
    """Trace every release now and write the release record notebook 02 reads (``trace.release_record``): the
    audit's bisect row of ``entry`` for each release, and the capture-order defect of each release from the
    installed one on (every release, not only those a binary search would open)."""
    rows = audit.bisect(versions, entry, use_record=False)["rows"]
    entries = release_record.entries_for(release_record.BISECT_ROW, {r["version"]: r for r in rows}, entry)
    ordered = versions_from(sources.open_source().version, versions)
    defects = {v: capture_order.trace_capture_order(sources.open_source(v)).defect for v in ordered}
    entries.update(release_record.entries_for(release_record.CAPTURE_ORDER, defects))
    captures = release_layers.release_captures(ordered, sources.open_source, known={})
    entries.update(release_record.entries_for(release_record.CAPTURE_RULE, {c.release: c.to_row() for c in captures}))
    return release_record.write(entries, versions)


def figures(conf_here: dict, conf_newest: Optional[dict], bis: dict) -> list[Path]:
    """Matrix for the traced release and the newest one, and the bisect timeline, under figures/."""
    out = repo_dir("figures")
    confs = [conf_here] + ([conf_newest] if conf_newest and conf_newest["sglang_version"] != conf_here["sglang_version"]
                           else [])
    paths = [plots_trace.conformance_matrix(c, out / f"02_matrix_{c['sglang_version']}.png") for c in confs]
    paths.append(plots_trace.bisect_timeline(bis, out / "02_bisect_timeline.png"))
    return paths


def audit_summary(conf: dict[str, Any]) -> str:
    """The audit's counts in one sentence, every number computed from the conformance result."""
    c = conf["counts"]
    return (f"sglang {conf['sglang_version']} [traced]: {c['entry_classes']} registered entry classes; "
            f"{c['wrapper']} wrap an EAGLE-3-capable model ({c['wrappers_conforming']} conforming, "
            f"{c['wrappers_lacking']} lacking, {c['wrappers_unresolved']} unresolved); "
            f"{c['other_wrapper']} wrap a model without EAGLE-3; {c['plain']} are not wrappers; "
            f"{c['draft']} are draft heads; {c['unresolved']} could not be resolved. Contract members: "
            f"{', '.join(conf['members'])} (left out, every nn.Module has them: "
            f"{', '.join(conf['every_module_has']) or 'none'}). Audited in {conf['seconds']} s [measured].")


def count_rows(conf: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per kind and per wrapper verdict, with the counts that add up to the entry classes."""
    c = conf["counts"]
    rows = [{"release": conf["sglang_version"], "group": kind, "count": c[audit.KIND_KEYS[kind]]}
            for kind in audit.KINDS]
    rows += [{"release": conf["sglang_version"], "group": f"  of which {v}", "count": c[audit.verdict_key(v)]}
             for v in audit.VERDICTS]
    rows.append({"release": conf["sglang_version"], "group": "entry classes (total)", "count": c["entry_classes"]})
    return rows


def lacking_rows(conf: dict[str, Any]) -> list[dict[str, Any]]:
    """Wrappers that lack part of the contract: what they hold, through what, and what is missing."""
    return [{"entry": r["entry"], "file": r["file"], "inner": f"self.{r['inner_attr']}",
             "inner classes": ", ".join(f"{(o['class'] or '?').rsplit('.', 1)[-1]}{'' if o['eagle3'] else ' (no EAGLE-3)'}"
                                        for o in r["inner_options"]),
             "via": " / ".join(r["via"]), "missing": r["missing"], "gaps": sorted(set(r["gaps"].values()))}
            for r in conf["lacking"]]


def capture_order_record(src: sources.SglangSource, newest: Optional[sources.SglangSource], versions: list[str],
                         setups: list[Any]) -> dict[str, Any]:
    """The capture-order defect for the traced and the newest release (None: offline without its wheel): graph vs
    eager capture layers for the Kimi drafter's ids (and each profile's own drafter), the first release whose order
    is fixed (bisected), and every release's captured layers from the traced one on (``trace.release_layers``, from
    the shipped record)."""
    orders = [capture_order.trace_capture_order(s) for s in (src, newest) if s is not None]
    layers = [o.layers(KIMI_DEPTH, KIMI_DRAFTER_IDS) | {"drafter": "Kimi-K2.5 + AQ-MedAI/Kimi-K25-eagle3"}
              for o in orders]
    cases = [release_layers.KIMI_CASE, release_layers.SPECFORGE_CASE]
    for setup in setups:
        if setup.usable and setup.depth:
            layers += [o.layers(setup.depth, setup.aux_layer_ids) | {"drafter": f"profile {setup.deployment}"}
                       for o in orders]
            cases.append((f"profile {setup.deployment}", setup.depth, tuple(setup.aux_layer_ids)))
    bisected = versions_from(src.version, versions)
    bisect = capture_order.bisect_fix(bisected, sources.open_source,
                                      release_record.recorded(release_record.CAPTURE_ORDER, bisected))
    captures = release_layers.release_captures(bisected, sources.open_source)
    return {"drafter_ids": list(KIMI_DRAFTER_IDS), "depth": KIMI_DEPTH, "ids_source": KIMI_IDS_SOURCE,
            "releases": [o.to_dict() for o in orders], "layers": layers, "first_fixed": bisect["first_fixed"],
            "fix_pr": capture_order.FIX_PR, "bisect_rows": bisect["rows"],
            "release_table": release_layers.case_rows(captures, cases),
            "milestones": release_layers.milestones(captures),
            "release_table_from_record": sum(c.from_record for c in captures)}


def versions_from(first: str, versions: list[str]) -> list[str]:
    """The bisected releases from ``first`` on (the capture-order bisect starts at the traced release)."""
    start = Version(first.split("+")[0])
    return [v for v in versions if Version(v) >= start] or versions


def capture_order_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"release": r["release"], "drafter": r["drafter"], "depth": r["depth"], "drafter ids": r["drafter_ids"],
             "CUDA-graph replays capture": r["cuda_graph_layers"], "eager forwards capture": r["eager_layers"],
             "mismatch": r["mismatch"]} for r in record["layers"]]


def capture_order_text(record: dict[str, Any]) -> str:
    lines = [line for r in record["releases"] for line in r["evidence"]]
    lines.append(f"first release with the order fixed (bisected): {record['first_fixed']} "
                 f"(upstream fix: {record['fix_pr']}); Kimi ids from {record['ids_source']}")
    marks = record.get("milestones")
    if marks:
        lines.append(f"first release whose hook adds 1 only when the first id is 1: {marks['convention_rule']} "
                     f"({marks['convention_pr']}); first with both: {marks['both']}")
    return "\n".join(lines)


def release_table_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Notebook 02's per-release table: each run of releases that capture alike, each drafter's two paths."""
    rows = []
    for span in record.get("release_table", []):
        for what, cell in span["cells"].items():
            rows.append({"releases": span["releases"], "order defect": span["order_defect"], "ids given": span["rule"],
                         "drafter": what, "depth": cell["depth"], "drafter ids": cell["ids"],
                         "CUDA-graph replays capture": cell["cuda_graph_layers"],
                         "eager forwards capture": cell["eager_layers"]})
    return rows
