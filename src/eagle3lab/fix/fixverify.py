"""Run-time checks of the generated fixes: the patched modules still import, and the hook really reaches the model.

Import check: every module a release's series patches is imported in a child process (the CPU harness's stub
driver and environment, no shims), once from the pristine release and once with the whole series applied, and
the two outcomes are compared per module. For the installed release the installed package is patched (under the
patch lock, restored afterwards); for any other release its wheel is unpacked into a temporary folder put first
on ``PYTHONPATH``, where its modules import against this environment's torch and transformers: a module that
does not import there unpatched says so, and the check then only shows that the patch changes nothing about it.

Capture check: for wrappers with a tiny config (``runtime.tinymodel.wrappers``), sglang's own ``ModelRunner`` is
built with the EAGLE-3 server arguments on CPU, once without and once with the generated patch
(``fix.capture_check``): unpatched it must die on the missing hook, patched the hook must reach the inner model
and a real prefill and decode must return the aux hidden states of the layers the drafter names.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from eagle3lab.package import wheels
from eagle3lab import resultcache
from eagle3lab.childjson import ask_child, emit
from eagle3lab.errors import CaptureCheckError
from eagle3lab.package import patching
from eagle3lab.fix.fixgen import Fix
from eagle3lab.trace import sources
from eagle3lab.trace.modindex import module_name
from eagle3lab.runtime.cpu_harness import cpu_environment
from eagle3lab.fix.capture_check import run_capture_check
from eagle3lab.runtime.tinymodel import build_tiny_models
from eagle3lab.runtime.tinymodel.wrappers import build_wrapper_model

# The wrappers' start-up needs, besides the MLA handler, the KV-copy warm-up skipped on a CPU pool (MHA models).
WRAPPER_SHIMS: tuple[str, ...] = ("mla_torch_native", "kv_copy_warmup_cpu")


def _import_child(modules: Sequence[str], env: dict[str, str], timeout_s: float = 600) -> dict[str, Any]:
    """module -> "ok" or "<error type>: <first line>", from a fresh interpreter (``main`` below)."""
    answer = ask_child("eagle3lab.fix.fixverify", modules, env=env, timeout_s=timeout_s)
    if not answer.ok:
        raise CaptureCheckError(f"the import check gave no result: {answer.failure()}",
                                returncode=answer.returncode, problem="no_result")
    return answer.payload


def _harness_env(extra_path: str | None = None) -> dict[str, str]:

    env = {**os.environ, **cpu_environment(shims=())}
    if extra_path:
        env["PYTHONPATH"] = f"{extra_path}{os.pathsep}{env['PYTHONPATH']}"
    return env


@contextlib.contextmanager
def _release_root(release: str) -> Iterator[tuple[Path, bool]]:
    """(site-packages-like root holding that release's ``sglang/``, whether it is the installed package)."""
    installed = sources.open_source(sources.INSTALLED)
    if installed.version == release and not installed.modified:
        with patching.held() as root:
            yield root, True
        return
    wheel = wheels.fetch_wheel(release)
    with tempfile.TemporaryDirectory(prefix=f"sglang-{release}-") as tmp:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang/")])
        yield Path(tmp), False


def import_check(release: str, fixes: Sequence[Fix]) -> dict[str, Any]:
    """Import every module the release's passing patches touch, pristine and with the series applied."""
    good = [f for f in fixes if f.ok and f.release == release]
    modules = sorted({module_name(f.file) for f in good})
    if not modules:
        return {"release": release, "modules": {}, "where": "", "ok": True}
    with _release_root(release) as (root, installed):
        env = _harness_env(None if installed else str(root))
        before = _import_child(modules, env)
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:  # patches outlive the reverts
            for fix in good:
                path = Path(tmp) / f"{fix.name}.patch"
                path.write_text(fix.text, encoding="utf-8")
                stack.enter_context(patching.patched(path, root))
            after = _import_child(modules, env)
    rows = {}
    for name in modules:
        b, a = before["modules"][name], after["modules"][name]
        rows[name] = {"pristine": b, "patched": a, "ok": a == "ok" or a == b,
                      "verdict": "imports" if a == "ok" else ("same failure as the pristine release" if a == b
                                                              else "the patch breaks the import")}
    where = ("the installed sglang (patched in place, restored)" if installed else
             f"the {release} wheel unpacked next to this environment's packages; {_pins(release)}")
    return {"release": release, "modules": rows, "where": where, "ok": all(r["ok"] for r in rows.values()),
            "imported": sum(r["patched"] == "ok" for r in rows.values()), "of": len(rows)}


def _pins(release: str) -> str:
    """The release's own torch/transformers requirements next to what this environment has."""
    from importlib import metadata

    with zipfile.ZipFile(wheels.fetch_wheel(release)) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), "")
        text = zf.read(name).decode("utf-8", "replace") if name else ""
    wanted = {}
    for line in text.splitlines():
        match = re.match(r"Requires-Dist: (torch|transformers)\s*([=<>!~][^;]*)?$", line.strip())
        if match:
            wanted[match.group(1)] = (match.group(2) or "").strip()
    have = {pkg: metadata.version(pkg) for pkg in ("torch", "transformers")}
    return (f"it requires {', '.join(f'{k}{v}' for k, v in wanted.items()) or 'no pinned torch/transformers'}, "
            f"this environment has {', '.join(f'{k} {v}' for k, v in have.items())}")


def capture_verify(fix: Fix, entry: str, *, num_layers: int = 4, timeout_s: float = 900.0,
                   unpatched: bool = True) -> dict[str, Any]:
    """Unpatched and patched capture check of one wrapper through sglang's own ModelRunner (installed release).

    ``unpatched=False`` skips the run that shows the crash (a test that only needs the fix), and says so."""

    installed = sources.open_source(sources.INSTALLED)
    if installed.version != fix.release:
        raise CaptureCheckError(f"the capture check runs on the installed sglang {installed.version}; "
                                f"{fix.name} is for {fix.release}", patch=fix.name, problem="wrong_release")
    target = build_wrapper_model(entry, num_layers)
    draft = build_tiny_models(num_layers=num_layers).draft_dir
    env = cpu_environment(shims=WRAPPER_SHIMS)
    attr = fix.attr
    with tempfile.TemporaryDirectory() as tmp:
        patch = Path(tmp) / f"{fix.name}.patch"
        patch.write_text(fix.text, encoding="utf-8")
        runs = {}
        plan = (("unpatched", None), ("patched", patch)) if unpatched else (("patched", patch),)
        for label, applied in plan:
            result = run_capture_check(target, draft, applied, load_format="dummy", env=env, inner_attr=attr,
                                       inner_post_load=True,
                                       timeout_s=timeout_s)
            runs[label] = result
    after = runs["patched"]
    before = runs.get("unpatched")
    crashed = before is None or (before.failed_hook is not None and before.failed_hook.error_type == "AttributeError")
    ok = crashed and after.ok
    reason = "" if ok else (
        f"unpatched run did not die on a missing hook ({before.outcome if before else None})" if not crashed
        else f"patched run: {after.outcome} {after.error_type or ''} {after.error_message or ''}".strip())
    return {"entry": entry, "patch": f"{fix.name}.patch", "release": fix.release, "inner": f"self.{attr}",
            "unpatched": before.to_dict() if before else None, "patched": after.to_dict(), "verified": ok,
            "reason": reason,
            "provenance": f"measured here: sglang {installed.version} ModelRunner on CPU, tiny {entry} "
                          f"({num_layers} layers, --load-format dummy)"}


def capture_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per verified wrapper."""
    rows = []
    for r in results:
        before, after = r["unpatched"], r["patched"]
        hook = next((h for h in before["hooks"] if not h["ok"]), None) if before else None
        rows.append({
            "wrapper": r["entry"], "patch": r["patch"], "forwards to": r["inner"],
            "unpatched": (f"{hook['error_type']} at {hook['raised_at']}" if hook else before["outcome"]) if before
            else "not run",
            "patched": after["outcome"], "layers captured": after.get("layers_to_capture"),
            "drafter ids": after.get("drafter_layer_ids"),
            "aux shapes": [f["shape"] for f in after.get("forwards", [])],
            "matched layers": [f["matched_layers"] for f in after.get("forwards", [])],
            "verified": r["verified"], "reason": r["reason"], "measured": resultcache.measured_label(r),
        })
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Child of the import check: import each module named, print one JSON line of outcomes."""
    import importlib
    import importlib.util

    outcomes: dict[str, str] = {}
    for name in list(argv if argv is not None else sys.argv[1:]):
        try:
            importlib.import_module(name)
            outcomes[name] = "ok"
        except BaseException as exc:  # noqa: BLE001 - every outcome is data here
            message = re.sub(r" \(/[^)]*\)", "", (str(exc).splitlines() or [""])[0])[:200]  # no machine paths
            outcomes[name] = f"{type(exc).__name__}: {message}"
            for loaded in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
                del sys.modules[loaded]  # a half-imported package would fail the next module for the wrong reason
    spec = importlib.util.find_spec("sglang")  # which copy was imported, without importing it again
    emit({"modules": outcomes, "file": spec.origin if spec else ""})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
