"""Will an EAGLE-3 launch of this model crash on this vLLM release? Answered from the release's audit in seconds.

vLLM refuses in two places, in this order: ``SpeculativeConfig``'s allow-list (until v0.21) tests the target's text
model type when the engine's config is built, and raises ``ValueError`` (which pydantic reports as a
``ValidationError``); after the model is loaded, the runner's ``supports_eagle3`` check raises ``RuntimeError``. A
class that passes the check through the protocol's default setter can still fail inside it (an ``AssertionError``
when the default finds no ``EagleModelMixin``). The architecture goes through vLLM's registry rules: the first of the
config's ``architectures`` that is registered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from packaging.version import Version

from eagle3lab.errors import EntryClassError
from eagle3lab.trace.vllm.interface import Gate

DEFAULT_ASSERT = "Model instance must inherit from EagleModelMixin to set auxiliary layers"


def text_model_type(config: dict[str, Any]) -> Optional[str]:
    """The model type vLLM's gate tests (``hf_text_config.model_type``): the ``text_config``'s when the config has
    one, else the config's own."""
    text = config.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("model_type"), str):
        return str(text["model_type"])
    value = config.get("model_type")
    return value if isinstance(value, str) else None


def read_config(path: str | Path) -> dict[str, Any]:
    """A ``config.json`` (or a model folder holding one), one line when it cannot be read."""
    where = Path(path)
    if where.is_dir():
        where = where / "config.json"
    try:
        data = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EntryClassError(f"{where} not found; pass a model's config.json or its folder", path=where,
                              problem="missing") from None
    except (OSError, ValueError) as err:
        raise EntryClassError(f"{where} is not readable JSON ({err}); pass a model's config.json", path=where,
                              problem="unreadable") from None
    if not isinstance(data, dict) or not isinstance(data.get("architectures"), list) or not data["architectures"]:
        raise EntryClassError(f"{where} has no 'architectures' list; pass --arch ARCHITECTURE instead", path=where,
                              problem="no_architectures")
    return data


def choose(architectures: list[str], rows: dict[str, dict[str, Any]], release: str) -> dict[str, Any]:
    """The row of the first architecture vLLM registers as a generating model, as its registry picks it."""
    for arch in architectures:
        if arch in rows:
            return rows[arch]
    raise EntryClassError(f"no architecture of {architectures} is a generating model registered in vLLM {release}; "
                          "check the name (case matters) or pick another release", architectures=tuple(architectures),
                          version=release, problem="not_registered")


def _gate(interface: dict[str, Any]) -> Optional[Gate]:
    gate = interface.get("gate")
    if not gate:
        return None
    return Gate(gate["where"], gate["tested"], tuple(gate["allow_list"]), gate["match"], gate["raises"],
                gate["message"])


def answer(audit: dict[str, Any], architectures: list[str], model_type: Optional[str]) -> dict[str, Any]:
    """The preflight's answer as plain data, from a release's audit (``engine_audit.vllm_classes``)."""
    release = audit["release"]
    rows = {row["arch"]: row for row in audit["classes"]}
    row = choose(architectures, rows, release)
    interface = audit["interface"]
    gate = _gate(interface)
    errors: list[dict[str, Any]] = []
    gate_state: Optional[bool] = None
    if gate is not None:
        gate_state = gate.admits(model_type) if model_type else None
        if gate_state is False:
            errors.append({"stage": "engine config (SpeculativeConfig)", "where": gate.where,
                           "raises": f"{gate.raises} (pydantic reports it as a ValidationError)",
                           "message": f"eagle3 is only supported for {list(gate.allow_list)} models. Got "
                                      f"{gate.tested}={model_type!r}"})
    if not interface.get("present"):
        errors.append({"stage": "engine config", "where": "", "raises": "ValueError",
                       "message": f"vLLM {release} has no EAGLE-3 (SupportsEagle3 came in v0.10.1)"})
    elif not row["passes_check"]:
        for site in interface["check_sites"]:
            errors.append({"stage": "model load (supports_eagle3 check)", "where": site["where"],
                           "raises": site["raises"], "message": site["message"]})
    elif not row["implements"] and row["how"] == "protocol default":
        errors.append({"stage": "model load (SupportsEagle3 default setter)", "where": row["evidence"].split("(")[1]
                       .split(")")[0], "raises": "AssertionError", "message": DEFAULT_ASSERT})
    will_crash: Optional[bool] = True if errors else None if gate_state is None and gate is not None else False
    if not errors and row["how"] == "protocol stub":
        will_crash = None  # starts, but the stub sets no layers: no aux hidden states reach the drafter
    return {"engine": "vllm", "release": release, "architecture": row["arch"], "entry_class": row["class"],
            "module": row["module"], "model_type": model_type, "will_crash": will_crash,
            "first_error": errors[0] if errors else None, "errors": errors,
            "gate": {"present": gate is not None, "admits": gate_state,
                     "allow_list": list(gate.allow_list) if gate else None},
            "implements": row["implements"], "how": row["how"], "wrapper_of": row["wrapper_of"],
            "defect": row["defect"], "evidence": row["evidence"], "requested_architectures": list(architectures),
            "provenance": audit["provenance"] + (" (release record)" if audit.get("from_record") else "")}


def fixed_in(audits: list[dict[str, Any]], architectures: list[str], model_type: Optional[str]) -> Optional[str]:
    """The first of these releases (oldest first) where the answer is 'will not crash'."""
    for audit in sorted(audits, key=lambda a: Version(a["release"])):
        try:
            if answer(audit, architectures, model_type)["will_crash"] is False:
                return str(audit["release"])
        except EntryClassError:
            continue
    return None


def text(result: dict[str, Any]) -> str:
    """The answer in a few plain lines."""
    lines = [f"{', '.join(result['requested_architectures'])} -> {result['entry_class']} ({result['module']}, vLLM "
             f"{result['release']}; wrapper of {result['wrapper_of']})" if result["wrapper_of"] else
             f"{', '.join(result['requested_architectures'])} -> {result['entry_class']} ({result['module']}, vLLM "
             f"{result['release']})"]
    if result["will_crash"]:
        first = result["first_error"]
        lines.append(f"EAGLE-3 launch WILL CRASH at {first['stage']}: {first['raises']}: {first['message']}"
                     + (f" ({first['where']})" if first["where"] else ""))
        for later in result["errors"][1:]:
            lines.append(f"  and past that, at {later['stage']}: {later['raises']}: {later['message']}")
    elif result["will_crash"] is None:
        why = ("the model type is unknown (pass --config): the allow-list gate cannot be decided"
               if result["gate"]["present"] and result["gate"]["admits"] is None
               else "the class inherits the protocol's stub: it starts, but captures no aux hidden states")
        lines.append(f"EAGLE-3 launch: UNDECIDED: {why}")
    else:
        lines.append(f"EAGLE-3 launch will not crash on the interface: {result['entry_class']} implements it "
                     f"({result['how']})" + ("" if not result["gate"]["present"] else ", and the allow-list admits "
                                             f"{result['model_type']!r}"))
    if result.get("fixed_in"):
        lines.append(f"first release where it will not crash: vLLM {result['fixed_in']}")
    lines.append(f"({result['provenance']})")
    return "\n".join(lines)
