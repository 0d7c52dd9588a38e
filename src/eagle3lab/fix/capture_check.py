"""The parent side of the in-process EAGLE-3 capture check: start the child, with the patches asked for applied.

The check itself (``capture_child``) builds sglang's own ``ModelRunner`` in a child process, because sglang's CPU
environment must be set before sglang is imported; it prints one JSON line (a ``capture_result.CaptureResult``).
``run_capture_check`` holds the patch lock, insists on a pristine package, applies the patches, starts the child and
restores the package on every way out. ``capture_trace`` compares the results with notebook 02's trace.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

from eagle3lab.childjson import ask
from eagle3lab.errors import CaptureCheckError, PatchError
from eagle3lab.fix.capture_result import DEFAULT_INNER, CaptureResult
from eagle3lab.package import patching
from eagle3lab.package.location import site_packages_root
from eagle3lab.package.restore import require_known_state
from eagle3lab.runtime.cpu_harness import cpu_environment
from eagle3lab.runtime.tinymodel import build_tiny_models

# In-process on CPU only the DeepSeek MLA prefill needs a shim (cpu_harness obstacle 7); 8 and 9 belong to the draft.
CPU_SHIMS: tuple[str, ...] = ("mla_torch_native",)


PatchArg = str | os.PathLike | Sequence[str | os.PathLike] | None


def child_argv(target: str | os.PathLike, draft: str | os.PathLike, *, prompt_len: int = 8, batch_size: int = 2,
               load_format: str = "auto", profile: str = "cpu", python: str = sys.executable,
               inner_attr: str = DEFAULT_INNER, inner_post_load: bool = False) -> list[str]:
    """The command line of the child process."""
    argv = [python, "-m", "eagle3lab.fix.capture_child", "--target", str(target), "--draft", str(draft),
            "--prompt-len", str(prompt_len), "--batch-size", str(batch_size), "--load-format", load_format,
            "--profile", profile, "--inner-attr", inner_attr]
    return argv + ["--inner-post-load"] if inner_post_load else argv


def run_capture_check(
    target: str | os.PathLike,
    draft: str | os.PathLike,
    patch: PatchArg = None,
    *,
    load_format: str = "auto",
    profile: str = "cpu",
    site_packages: str | os.PathLike | None = None,
    env: dict[str, str] | None = None,
    prompt_len: int = 8,
    batch_size: int = 2,
    timeout_s: float = 900.0,
    inner_attr: str = DEFAULT_INNER,
    inner_post_load: bool = False,
) -> CaptureResult:
    """Run the check in a child process, with ``patch`` (one name/path or several) applied to the installed sglang.

    ``env`` is added to the child's environment; the ``cpu`` profile passes ``cpu_environment()`` (stub
    libcuda, CPU engine, shims). The installed package must carry none of the project's patches beforehand
    (checked under the patch lock), so each result shows exactly the patches asked for; it is restored after.
    ``load_format="dummy"`` exercises sglang's dummy loader instead of the checkpoint; ``profile`` names the
    params file whose launch flags (backend, dtype, lengths, speculative settings) the runner gets.
    ``inner_post_load`` runs the inner model's ``post_load_weights`` after a dummy load, which sglang's dummy
    loader does not do for a wrapper without one (so the Kimi wrapper shows that gap unless asked); the generated
    fixes' verification asks, since it checks delegation of the EAGLE-3 hooks, not the dummy loader.
    """
    for name, path in (("target", target), ("draft", draft)):
        if not Path(path).is_dir():
            raise CaptureCheckError(f"{name} model {path} is not a directory; build the tiny models first",
                                    path=Path(path), problem="not_a_directory")
    argv = child_argv(target, draft, prompt_len=prompt_len, batch_size=batch_size, load_format=load_format,
                      profile=profile, inner_attr=inner_attr, inner_post_load=inner_post_load)
    with _patch_state(patch, site_packages) as label:
        result = _run_child(argv, {**os.environ, **(env or {})}, timeout_s)
    result.patch = label
    return result


def run_cpu_capture_check(
    patch: PatchArg = None,
    *,
    load_format: str = "auto",
    num_layers: int = 4,
    site_packages: str | os.PathLike | None = None,
    timeout_s: float = 900.0,
) -> CaptureResult:
    """The ``cpu`` profile's check: tiny models from the cache, the CPU harness with only the shims it needs."""

    models = build_tiny_models(num_layers=num_layers)
    return run_capture_check(models.target_dir, models.draft_dir, patch, load_format=load_format,
                             site_packages=site_packages,
                             env=cpu_environment(shims=CPU_SHIMS), timeout_s=timeout_s)


@contextlib.contextmanager
def _patch_state(patch: PatchArg, site_packages: str | os.PathLike | None) -> Iterator[str | None]:
    """Hold the patch lock, insist on a pristine package, apply ``patch`` (one or several), restore on exit."""

    names = [patch] if isinstance(patch, (str, os.PathLike)) else list(patch or [])
    with patching.held(site_packages), contextlib.ExitStack() as stack:
        _require_pristine(site_packages)
        labels = [stack.enter_context(patching.patched(name, site_packages)).patch for name in names]
        yield "+".join(labels) or None


def _require_pristine(site_packages: str | os.PathLike | None) -> None:
    """No project patch may be in place already, or a result would show patches nobody asked for."""

    require_known_state(site_packages_root(site_packages))  # a patch left by a killed run: say so, with the fix
    applied, mismatched = [], []
    for path in sorted(patching.PATCHES_DIR.glob("*.patch")):
        try:
            if patching.check(path, site_packages).status == patching.ALREADY_APPLIED:
                applied.append(path.stem)
        except PatchError:
            mismatched.append(path.stem)
    if applied:
        raise CaptureCheckError(f"the installed sglang already carries {', '.join(applied)}; "
                                "revert with python -m eagle3lab patch revert NAME first", patch=applied[0],
                                problem="already_patched")
    if mismatched:
        raise CaptureCheckError(f"the installed sglang does not match {', '.join(mismatched)}: not the pristine "
                                "release the patches expect; reinstall sglang==0.5.9", patch=mismatched[0],
                                problem="not_pristine")


def _run_child(argv: list[str], env: dict[str, str], timeout_s: float) -> CaptureResult:
    started = time.monotonic()
    answer = ask(argv, env=env, timeout_s=timeout_s)
    if answer.timed_out:
        raise CaptureCheckError(f"the capture check did not finish within {timeout_s:.0f} s; raise timeout_s",
                                timeout_s=timeout_s, problem="timeout")
    if not answer.ok:
        raise CaptureCheckError(f"the capture check gave no result: {answer.failure()}",
                                returncode=answer.returncode, problem="no_result")
    result = CaptureResult.from_dict(answer.payload)
    result.seconds["wall"] = round(time.monotonic() - started, 2)
    return result
