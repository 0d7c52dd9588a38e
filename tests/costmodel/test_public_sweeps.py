"""The transcribed rtx6kpro sweeps: they parse, each speedup is its two published rates' ratio, each row names its
page's URL, commit, engine and TP, and the figures issue 36 quotes from them are the file's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eagle3lab.costmodel.public_sweeps import SPEEDUP_DECIMALS, SWEEPS, accept_length, load_sweeps
from eagle3lab.errors import PerfModelError


@pytest.fixture(scope="module")
def sweeps():
    return load_sweeps()


def test_every_speedup_is_its_rates_ratio_and_every_row_cites_its_page(sweeps):
    assert sweeps.role == "development"
    pages = {p.key: p for p in sweeps.pages}
    for row in sweeps.rows:
        page = pages[row.page]
        assert row.url.startswith(f"https://github.com/local-inference-lab/rtx6kpro/blob/{row.commit}/models/")
        assert (row.engine, row.engine_version, row.commit) == (page.engine, page.engine_version, page.commit)
        assert row.tp in (8, 16) and row.concurrency in (1, 2, 4, 8, 16, 32, 64, 128)
        if row.speedup is not None:
            assert row.speedup == pytest.approx(row.spec_tok_s / row.no_spec_tok_s, abs=0.5 * 10 ** -SPEEDUP_DECIMALS)
        else:
            assert row.spec_tok_s is None or row.no_spec_tok_s is None


def test_the_v4_sweep_has_every_cell_with_its_acceptance(sweeps):
    # the v4 page's tables: DCP 1 fits 22 cells (8 + 5 + 4 + 3 + 2), DCP 2 26, DCP 4 30, DCP 8 34; each with acceptance
    counts = {dcp: len(sweeps.cells("k26-v4", dcp)) for dcp in (1, 2, 4, 8)}
    assert counts == {1: 22, 2: 26, 4: 30, 8: 34}
    assert all(c.acceptance_rate is not None for c in sweeps.cells("k26-v4"))
    assert all(c.acceptance_rate is None for page in ("k26-v3", "k26-v2", "k26-v1", "k26-v1-marlin")
               for c in sweeps.cells(page))
    assert {c.context for c in sweeps.cells("k26-v4", 1)} == {"0", "16k", "32k", "64k", "128k"}


def test_the_figures_issue_36_quotes_are_the_files(sweeps):
    by_cell = {(c.context, c.concurrency): c for c in sweeps.cells("k26-v4", 1)}
    one, peak = by_cell[("0", 1)], by_cell[("0", 128)]
    assert (one.no_spec_tok_s, one.spec_tok_s, one.speedup) == (92.4, 122.0, 1.32)
    assert (peak.no_spec_tok_s, peak.spec_tok_s, peak.speedup) == (2222.6, 2245.8, 1.01)
    assert max(c.no_spec_tok_s for c in by_cell.values()) == 2222.6  # the no-spec peak the issue compares to 2,370
    assert accept_length(one, 3) == pytest.approx(1 + 3 * 0.494)
    assert sweeps.acceptance_summary.profiles[1][0] == 0.386  # the page's JSON mean for DCP 1


def test_a_speedup_that_is_not_the_ratio_fails_loudly(tmp_path: Path):
    raw = yaml.safe_load(SWEEPS.read_text(encoding="utf-8"))
    raw["rows"][0]["speedup"] = round(raw["rows"][0]["speedup"] + 0.01, 3)
    bad = tmp_path / "sweeps.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(PerfModelError, match=r"rows\.0.*speedup"):
        load_sweeps(bad)


def test_a_row_from_another_commit_fails_loudly(tmp_path: Path):
    raw = yaml.safe_load(SWEEPS.read_text(encoding="utf-8"))
    raw["rows"][0]["commit"] = "0" * 40
    bad = tmp_path / "sweeps.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    with pytest.raises(PerfModelError, match="commit"):
        load_sweeps(bad)
