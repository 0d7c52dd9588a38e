"""fixgen: generated delegation patches for every lacking wrapper, checked against their release, or refused."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from eagle3lab.package import wheels
from eagle3lab.fix import fixcheck, fixgen, fixseries
from eagle3lab.package import patching
from eagle3lab.trace import audit, sources
from eagle3lab.trace.resolve import Resolver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trace"))
import synthetic_sglang as syn  # noqa: E402

HOOKS = ["set_eagle3_layers_to_capture", "get_embed_and_head"]


@pytest.fixture(scope="module")
def src() -> sources.SglangSource:
    return syn.source(shapes=True)


@pytest.fixture(scope="module")
def fixes(src) -> dict[str, fixgen.Fix]:
    conf = audit.conformance(src, members=HOOKS)
    return {f.owner: f for f in fixseries.fixes_for(src, conf)}


def test_every_lacking_wrapper_is_covered_by_a_fix(src, fixes):
    lacking = {e["entry"] for e in audit.conformance(src, members=HOOKS)["lacking"]}
    covered = {entry for fix in fixes.values() for entry in fix.entries}
    assert lacking == covered


def test_generated_patch_has_the_kimi_shape_and_passes_every_check(fixes):
    fix = fixes["GapWrapper"]
    assert fix.ok, fix.refused
    assert fix.attr == "language_model" and fix.members == sorted(HOOKS)
    assert "Applies-To: sglang==0.0.0" in fix.text and "Fixes-Entry-Classes: GapWrapper" in fix.text
    assert 'if not hasattr(self.language_model, "set_eagle3_layers_to_capture"):' in fix.text
    assert "return self.language_model.set_eagle3_layers_to_capture(layer_ids)" in fix.text  # inner's own params
    assert {k: v["ok"] for k, v in fix.checks.items()} == {"applies": True, "compiles": True, "delegates": True,
                                                           "re-audit": True, "output": True}


def test_helper_built_inner_model_is_fixed_in_the_base_that_assigns_it(fixes):
    fix = fixes["HelperBase"]
    assert fix.file == "srt/models/shape_bases.py" and fix.attr == "llm"
    assert {"HelperWrapper", "DispatchProxy"} <= set(fix.entries)  # the proxy reaches it through its options
    assert fix.ok


def test_forward_that_post_processes_the_inner_output_is_refused_with_the_reason(fixes):
    fix = fixes["PostProcessWrapper"]
    assert not fix.ok and "logits_processor" in fix.refused and "would not reach the drafter" in fix.refused


def test_patch_that_does_not_match_the_release_is_refused(src, fixes):
    good = fixes["GapWrapper"]
    broken = fixgen.Fix(**{**good.to_dict(), "checks": {}, "refused": ""} | {"ok": None} and {
        k: v for k, v in good.to_dict().items() if k not in ("ok", "checks", "refused")})
    broken.text = good.text.replace("self.vision = object()", "self.vision = None")
    fixcheck.check(src, broken, HOOKS)
    assert not broken.ok and broken.refused.startswith("does not apply")
    patched, _ = fixcheck.patched_source(src, good.text)
    again, why = fixcheck.patched_source(patched, good.text)
    assert again is None and "already carries" in why


def test_re_audit_of_the_patched_release_finds_the_wrapper_conforming(src, fixes):
    patched, why = fixcheck.patched_source(src, fixes["GapWrapper"].text)
    assert patched is not None, why
    res = Resolver(patched)
    statuses = {m: res.status(res.find("GapWrapper"), m).status for m in HOOKS}
    assert statuses == {m: "delegated" for m in HOOKS}


@pytest.mark.network
@pytest.mark.parametrize("release", ["0.5.9", "0.5.23"])
def test_committed_series_is_current_and_covers_every_lacking_wrapper(release, tmp_path: Path):
    """Regenerating gives the committed files byte for byte; every lacking wrapper has a patch or a refusal;
    every patch applies with the project's patch tool to the release unpacked from its wheel."""
    src = sources.open_source(release)
    conf = audit.conformance(src)
    made = fixseries.fixes_for(src, conf)
    assert all(fixseries.committed_state(f) in ("identical", "refused") for f in made)
    covered = {e for f in made if f.ok for e in f.entries} | set(fixseries.refusals(release))
    assert {e["entry"] for e in conf["lacking"]} <= covered
    with zipfile.ZipFile(wheels.fetch_wheel(release)) as zf:
        zf.extractall(tmp_path, [n for n in zf.namelist() if n.startswith("sglang/srt/models/")])
    for path in fixseries.read_series(release):
        assert patching.check(path, tmp_path).status == patching.APPLICABLE


@pytest.mark.network
def test_kimi_fix_generated_for_0_5_9_matches_the_projects_fix_in_substance():
    src = sources.open_source("0.5.9")
    kimi = next(f for f in fixseries.fixes_for(src) if "KimiK25ForConditionalGeneration" in f.entries)
    assert kimi.ok and kimi.members == sorted(HOOKS) and kimi.attr == "language_model"
    project = {m.name for m in patching.added_members(patching.resolve_patch("kimi_k25-eagle3-delegation"),
                                                      _site_packages_with(src))}
    assert project == set(kimi.members)


def _site_packages_with(src: sources.SglangSource) -> Path:
    import tempfile

    root = Path(tempfile.mkdtemp())
    target = root / "sglang" / "srt" / "models" / "kimi_k25.py"
    target.parent.mkdir(parents=True)
    target.write_text(src.text("srt/models/kimi_k25.py"))
    return root


def test_proxy_over_two_options_conforms_once_the_whole_series_is_applied(src):
    conf = audit.conformance(src, members=HOOKS)
    _, series = fixseries.fixes_with_series(src, conf)
    assert "DispatchProxy" in series["conforming"]  # needs HelperBase's and SwitchWrapper's patches together
    assert set(series["still_lacking"]) == {"PostProcessWrapper"} and series["ok"]  # the refused one only
