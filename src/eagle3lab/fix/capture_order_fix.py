"""A patch for sglang 0.5.9's capture-order defect, generated from the release's own source.

``trace.capture_order`` finds every call of ``set_eagle3_layers_to_capture()`` with no ids under
``srt/model_executor`` (0.5.9: ``CudaGraphRunner.__init__`` before it captures, and ``ModelRunner._dummy_run``).
Each is rewritten to pass the runner's ``eagle_aux_hidden_state_layer_ids`` (set in ``ModelRunner.__init__`` from
the drafter's config before ``initialize()`` builds the graphs; ``None`` when the drafter names none, which keeps the
model's defaults as before). Graph replays then capture the same layers as eager forwards, which is what upstream
reached by moving the call before graph capture (sglang PR #22836). The patch is written to ``patches/`` in the
format ``package.patching`` applies and checks, like the wrapper's delegation patch.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from eagle3lab.atomic import write_text_atomic
from eagle3lab.package import patching
from eagle3lab.trace.capture_order import FIX_PR, HOOK, trace_capture_order
from eagle3lab.trace.sources import SglangSource

PATCH_NAME = "sglang-eagle3-capture-order"
RUNNER_EXPR = {"srt/model_executor/cuda_graph_runner.py": "self.model_runner.eagle_aux_hidden_state_layer_ids",
               "srt/model_executor/model_runner.py": "self.eagle_aux_hidden_state_layer_ids"}


def _header(src: SglangSource, sites: list[str]) -> str:
    return (f"Patch-Name: {PATCH_NAME}\n"
            f"Applies-To: sglang=={src.version}\n"
            "What: every call of set_eagle3_layers_to_capture() with no ids in the model runner and the CUDA-graph\n"
            "  runner passes the drafter's eagle_aux_hidden_state_layer_ids instead:\n  " + ", ".join(sites) + ".\n"
            "Why: CudaGraphRunner.__init__ reset the capture layers to the model's defaults [2, n//2, n-3] right\n"
            "  before capturing the graphs; ModelRunner.initialize set the drafter's ids (+1) only after\n"
            "  init_device_graphs(), so graph-replayed decode/verify read other layers than eager prefill.\n"
            f"Fixed-Upstream: {FIX_PR}\n"
            "  (\"Fix Eagle3/DFLASH aux hidden state capture during CUDA graph init\", merged 2026-04-15: the call\n"
            "  moved before graph capture, the no-argument calls removed).\n"
            f"Apply-With: python -m eagle3lab patch apply patches/{PATCH_NAME}.patch\n"
            f"  (or, from site-packages: patch -p1 < {PATCH_NAME}.patch)\n\n")


def _no_id_calls(src: SglangSource) -> dict[str, list[int]]:
    by_file: dict[str, list[int]] = {}
    for call in trace_capture_order(src).calls:
        if not call.with_ids and call.path in RUNNER_EXPR:
            by_file.setdefault(call.path, []).append(call.line)
    return by_file


def patched_texts(src: SglangSource) -> dict[str, str]:
    """sglang-relative path -> the file's text with every no-argument call passing the drafter's ids."""
    out = {}
    for path, lines in sorted(_no_id_calls(src).items()):
        new = src.text(path).splitlines(keepends=True)
        for line in lines:
            indent = len(new[line - 1]) - len(new[line - 1].lstrip())
            new[line - 1] = (new[line - 1].replace(f"{HOOK}()\n", f"{HOOK}(\n")
                             + f"{' ' * (indent + 4)}{RUNNER_EXPR[path]}\n{' ' * indent})\n")
        out[path] = "".join(new)
    return out


def patched_source(src: SglangSource) -> SglangSource:
    """``src`` with the fix applied in memory, for the trace to judge the patched release."""
    texts = {p: src.text(p).encode() for p in src.files(suffix="")}
    texts.update({p: t.encode() for p, t in patched_texts(src).items()})
    return SglangSource(f"{src.version}+{PATCH_NAME}", src.origin, texts)


def generate_patch(src: SglangSource) -> str:
    """The unified diff (with the project's header) for ``src``; empty when the release has no no-argument call
    under the model executor (nothing to fix)."""
    fixed = patched_texts(src)
    body: list[str] = []
    sites: list[str] = []
    for path, text in fixed.items():
        sites += [f"{path.removeprefix('srt/')}:{line}" for line in _no_id_calls(src)[path]]
        name = f"sglang/{path}"
        body += difflib.unified_diff(src.text(path).splitlines(keepends=True), text.splitlines(keepends=True),
                                     f"a/{name}", f"b/{name}", n=3)
    return _header(src, sites) + "".join(body) if body else ""


def write_patch(src: SglangSource, folder: Path = patching.PATCHES_DIR) -> Path:
    """``patches/<name>.patch`` (atomically)."""
    return write_text_atomic(Path(folder) / f"{PATCH_NAME}.patch", generate_patch(src))
