"""The capture check next to notebook 02's static trace: does what the live runs show agree with what the trace
read from sglang's source (missing members, first raises, drafter layer ids, ``layers_to_capture``)?
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eagle3lab import sidecars
from eagle3lab.errors import CaptureCheckError
from eagle3lab.fix.capture_result import CaptureResult
from eagle3lab.package import patching
from eagle3lab.package.patching import FULL_DELEGATION_PATCH as FULL_PATCH, ONE_METHOD_PATCH
from eagle3lab.sidecars import InterfaceTraceSidecar


@dataclass(frozen=True)
class Agreement:
    """One claim of the static trace (notebook 02) next to what the patch or the live check shows."""

    item: str
    trace: Any
    measured: Any

    @property
    def agree(self) -> bool:
        return self.trace == self.measured

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agree": self.agree}


def load_trace(profile: str = "cpu", path: str | os.PathLike | None = None) -> InterfaceTraceSidecar:
    """Notebook 02's typed sidecar for ``profile`` (one clear line if it is missing or unusable)."""
    return sidecars.read(InterfaceTraceSidecar, profile, Path(path) if path is not None else None)


def compare_with_trace(
    trace: InterfaceTraceSidecar,
    results: dict[str | None, CaptureResult],
    *,
    profile: str = "cpu",
    full_patch: str | os.PathLike = FULL_PATCH,
    site_packages: str | os.PathLike | None = None,
) -> list[Agreement]:
    """Rows for a table: the trace's missing members vs the full patch, and its first raises and layer ids vs
    the live runs in ``results`` (keyed by patch name, ``None`` for the unpatched run). Absent runs are skipped."""

    verdict, layer_table = trace.verdict, trace.layer_table(profile)
    if layer_table is None:
        raise CaptureCheckError(f"the trace has no layer-id table for profile {profile}; rerun notebook 02",
                                profile=profile, problem="no_layer_table")
    members = sorted(m.name for m in patching.added_members(full_patch, site_packages))
    rows = [Agreement("members the full patch delegates", sorted(verdict.missing_members), members)]

    def failed(key: str | None) -> str | None:
        hook = results[key].failed_hook
        return hook.hook if hook else None

    if None in results:
        first = verdict.first_raise.get(profile)
        rows.append(Agreement("first missing hook, unpatched", first.member if first else None, failed(None)))
    if ONE_METHOD_PATCH in results:
        after = verdict.next_raise_after_one_method.get(profile)
        rows.append(Agreement("next missing hook, one-method patch", after.member if after else None,
                              failed(ONE_METHOD_PATCH)))
    patched_runs = [r for key, r in results.items() if key is not None and r.layers_to_capture is not None]
    if patched_runs:
        run = patched_runs[0]
        init_row = next((row for row in layer_table.rows if row["function"] == "ModelRunner.initialize"), None)
        rows.append(Agreement("drafter aux layer ids", list(layer_table.aux_layer_ids or []), run.drafter_layer_ids))
        if init_row is not None:
            rows.append(Agreement("layers_to_capture after ModelRunner.initialize",
                                  init_row["result"].get("self.model.layers_to_capture"), run.layers_to_capture))
    return rows
