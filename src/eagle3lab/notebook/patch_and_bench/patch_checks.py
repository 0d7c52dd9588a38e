"""Notebook 03's patches and capture checks, as tables and as expectations that fail the run in one line.

Why here: the patch and capture machinery lives in ``package.patching`` and ``fix.capture_check``; the notebook
shows what they found and refuses a result that contradicts notebook 02's trace.
"""

from __future__ import annotations

from typing import Any, Sequence

from eagle3lab.errors import ExpectationError
from eagle3lab.package import patching
from eagle3lab.package.diffs import PatchInfo


def patch_table(names: Sequence[str]) -> list[dict[str, Any]]:
    """Each patch's header and whether it applies cleanly to the installed sglang (a dry run)."""
    rows = []
    for name in names:
        result = patching.check(patching.resolve_patch(name))
        info = result.info or PatchInfo(name=name)
        rows.append({"patch": info.name, "what": info.what, "fixed upstream": info.fixed_upstream,
                     "dry run": result.status})
    return rows


def expect_patch_covers_trace(patch_name: str, missing_members: Sequence[str]) -> list[str]:
    """The full patch must delegate exactly the members notebook 02 found missing; fail otherwise."""
    added = sorted(member.name for member in patching.added_members(patch_name))
    if sorted(missing_members) != added:
        raise ExpectationError(f"patch {patch_name} delegates {added} but notebook 02 found {sorted(missing_members)} "
                               f"missing; update the patch or rerun notebook 02")
    return added


def capture_rows(captures: dict[str | None, Any]) -> list[dict[str, Any]]:
    """One row per capture-check run: the failing hook, or the captured layers and aux shapes."""
    rows = []
    for key, result in captures.items():
        hook = result.failed_hook
        shapes = {f.phase: f"{f.shape} (expected {f.expected_shape})" for f in result.forwards}
        rows.append({"patch": key or "none", "outcome": result.outcome,
                     "missing hook": f"{hook.error_type}: {hook.error_message}" if hook else None,
                     "drafter layer ids": result.drafter_layer_ids, "layers captured": result.layers_to_capture,
                     "prefill aux shape": shapes.get("prefill"), "decode aux shape": shapes.get("decode"),
                     "seconds": round(sum(result.seconds.values()), 1)})
    return rows


def expect_capture(captures: dict[str | None, Any], first_missing: str) -> None:
    """Unpatched must fail on the first missing hook; patched must capture the drafter's layers exactly."""
    for key, result in captures.items():
        if key is None:
            hook = result.failed_hook
            if hook is None or hook.hook != first_missing:
                raise ExpectationError(f"unpatched capture check should fail on '{first_missing}', got "
                                       f"{result.outcome} ({hook.hook if hook else result.error_message})")
        elif not result.ok:
            raise ExpectationError(f"patched capture check ({key}) did not capture the drafter's layers: "
                                   f"{result.outcome} {result.error_type or ''} {result.error_message or ''}".strip())
