"""The right capture fix for a drafter on an sglang release, and the 0.5.9 backport of sglang PR #25454's hook rule.

sglang 0.5.9-0.5.12's ``DeepseekV2ForCausalLM.set_eagle3_layers_to_capture`` adds 1 to every drafter id; from
0.5.13 it adds 1 only when the first id is 1 (sglang PR #25454, https://github.com/sgl-project/sglang/pull/25454),
which treats any other first id as "capture at the input of that layer" and names the unconditional +1 a bug (about
0.10 acceptance length lost on a Kimi-K2.5 drafter, as the PR reports). Under that convention the fix depends on the
drafter's ids (``trace.capture_rule``, ``trace.capture_order``):

- first id 1 (SpecForge's default ids): the +1 is what it was trained on; graphs need the ids too, so the order fix
  alone (``patches/sglang-eagle3-capture-order.patch``, or sglang PR #22836's release) is right;
- any other first id (``AQ-MedAI/Kimi-K25-eagle3``'s [2, 30, 58]): the order fix *and* the ids taken as given. On
  0.5.9 the graph path already captures [2, 30, 58] for that drafter (the defaults); the order fix alone moves it to
  [3, 31, 59], which is what PR #25454 calls the bug. This module backports the PR's rule to 0.5.9's hook as
  ``patches/sglang-eagle3-first-id-rule.patch``; with the order patch, both paths capture [2, 30, 58].

What the drafter was really trained on is the drafter's recipe, not read here: the advice follows upstream's
convention and says so.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Optional, Sequence

from eagle3lab.atomic import write_text_atomic
from eagle3lab.errors import SourceError
from eagle3lab.fix import capture_order_fix
from eagle3lab.package import patching
from eagle3lab.trace import capture_rule, release_layers, release_record
from eagle3lab.trace.capture_order import FIX_PR
from eagle3lab.trace.sources import SglangSource

PATCH_NAME = "sglang-eagle3-first-id-rule"
CONVENTION_PR = capture_rule.PR_25454
_PLUS_ONE = re.compile(r"^(?P<indent>\s*)self\.model\.layers_to_capture = \[val \+ 1 for val in layer_ids\]\n$")


def _plus_one_line(src: SglangSource) -> tuple[str, int]:
    """(path, 1-based line) of the Kimi family hook's unconditional ``[val + 1 for val in layer_ids]``."""
    rule = capture_rule.kimi_rule(src)
    if rule is None:
        raise SourceError(f"sglang {src.version} has no {capture_rule.KIMI_FAMILY}.{capture_rule.HOOK}",
                          version=src.version, problem="no_hook")
    if rule.rule() != capture_rule.RULE_PLUS_ONE:
        raise SourceError(f"sglang {src.version}'s {rule.family}.{capture_rule.HOOK} ({rule.where}) has no "
                          f"unconditional +1 to replace (its rule: {rule.rule()}): nothing to backport",
                          version=src.version, problem="no_plus_one")
    lines = src.text(rule.path).splitlines(keepends=True)
    for number in range(rule.line, len(lines)):
        if number > rule.line and lines[number].lstrip().startswith("def "):
            break
        if _PLUS_ONE.match(lines[number]):
            return rule.path, number + 1
    raise SourceError(f"sglang {src.version}'s {rule.family}.{capture_rule.HOOK} ({rule.where}) has no "
                      "unconditional +1 to replace: nothing to backport", version=src.version, problem="no_plus_one")


def patched_texts(src: SglangSource) -> dict[str, str]:
    """sglang-relative path -> the file with PR #25454's rule in place of the unconditional +1."""
    path, line = _plus_one_line(src)
    lines = src.text(path).splitlines(keepends=True)
    pad = _PLUS_ONE.match(lines[line - 1]).group("indent")  # type: ignore[union-attr]
    lines[line - 1] = (f"{pad}if layer_ids and layer_ids[0] == 1:\n"
                       f"{pad}    self.model.layers_to_capture = [val + 1 for val in layer_ids]\n"
                       f"{pad}else:\n"
                       f"{pad}    self.model.layers_to_capture = list(layer_ids)\n")
    return {path: "".join(lines)}


def patched_source(src: SglangSource) -> SglangSource:
    """``src`` with the rule backported in memory, for the trace to judge the patched release."""
    texts = {p: src.text(p).encode() for p in src.files(suffix="")}
    texts.update({p: t.encode() for p, t in patched_texts(src).items()})
    return SglangSource(f"{src.version}+{PATCH_NAME}", src.origin, texts)


def generate_patch(src: SglangSource) -> str:
    """The unified diff with the project's header."""
    path, line = _plus_one_line(src)
    name = f"sglang/{path}"
    body = difflib.unified_diff(src.text(path).splitlines(keepends=True),
                                patched_texts(src)[path].splitlines(keepends=True), f"a/{name}", f"b/{name}", n=3)
    header = (f"Patch-Name: {PATCH_NAME}\n"
              f"Applies-To: sglang=={src.version}\n"
              f"What: {capture_rule.KIMI_FAMILY}.{capture_rule.HOOK} ({path.removeprefix('srt/')}:{line}) adds 1\n"
              "  to the drafter's ids only when the first id is 1; other ids are captured as given.\n"
              "Why: a first id other than 1 means the input of that layer (sglang PR #25454's convention); the\n"
              "  unconditional +1 fed such drafters one layer late in eager forwards. Apply with\n"
              f"  {capture_order_fix.PATCH_NAME}.patch so CUDA-graph replays get the same layers.\n"
              f"Fixed-Upstream: {CONVENTION_PR} (first in the release whose hook has the rule; see preflight-model)\n"
              f"Apply-With: python -m eagle3lab patch apply patches/{PATCH_NAME}.patch\n"
              f"  (or, from site-packages: patch -p1 < {PATCH_NAME}.patch)\n\n")
    return header + "".join(body)


def write_patch(src: SglangSource, folder: Path = patching.PATCHES_DIR) -> Path:
    """``patches/<name>.patch`` (atomically)."""
    return write_text_atomic(Path(folder) / f"{PATCH_NAME}.patch", generate_patch(src))


def recorded_milestones() -> dict[str, Optional[str]]:
    """``trace.release_layers.milestones`` over the releases the shipped record holds (offline)."""
    releases = json.loads(release_record.RECORD.read_text(encoding="utf-8")).get("releases", [])
    known = release_record.recorded(release_record.CAPTURE_RULE, releases)
    return release_layers.milestones([release_layers.ReleaseCapture.from_row(v, known[v])
                                      for v in releases if v in known])


def patch_release(name: str, folder: Path = patching.PATCHES_DIR) -> Optional[str]:
    """The release a committed patch applies to, from its ``Applies-To: sglang==X`` header line."""
    path = Path(folder) / f"{name}.patch"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    found = re.search(r"^Applies-To: sglang==(\S+)$", text, re.MULTILINE)
    return found.group(1) if found else None


def right_fix(ids: Optional[Sequence[int]], marks: Optional[dict[str, Optional[str]]] = None,
              plus_one_intended: Optional[bool] = None, release: Optional[str] = None) -> str:
    """What makes both paths capture what the drafter's ids mean: under PR #25454's convention, by its first id,
    unless ``plus_one_intended`` says what the drafter was trained on (the tiny drafter: the output of layer i,
    i.e. the +1, whatever its first id)."""
    marks = marks if marks is not None else recorded_milestones()
    order = f"python -m eagle3lab patch apply patches/{capture_order_fix.PATCH_NAME}.patch"
    rule = f"python -m eagle3lab patch apply patches/{PATCH_NAME}.patch"
    # the patches are offered only on the release they apply to (``release`` None: not known, offered)
    patches = release is None or release == patch_release(PATCH_NAME) == patch_release(capture_order_fix.PATCH_NAME)
    plus_one = (f"upgrade sglang to {marks['order_fixed']} or newer" if marks.get("order_fixed")
                else f"upgrade to an sglang release with {FIX_PR}") + (f", or: {order}" if patches else "")
    as_given = (f"upgrade sglang to {marks['both']} or newer" if marks.get("both")
                else f"upgrade to an sglang release with {FIX_PR} and {CONVENTION_PR}") + \
        (f", or: {order}; {rule}" if patches else "")
    if plus_one_intended is not None:
        return (f"trained on the output of layer i (+1): {plus_one}" if plus_one_intended
                else f"trained on the input of layer i (ids as given): {as_given}")
    if ids is None:
        return (f"drafter ids not known: if its first id is 1, {plus_one}; otherwise (ids as given, "
                f"{CONVENTION_PR}) {as_given}")
    if list(ids)[:1] == [1]:
        return f"first id 1 (+1 intended): {plus_one}"
    return f"first id {list(ids)[0]} (ids as given, {CONVENTION_PR}): {as_given}"
