"""Notebook 02 on an air-gapped GPU node (issue 41, item 5): with pip's index unreachable and no cached wheels, the
releases come from the shipped release record and the newest release's sections are skipped, each said in one
line, and the notebook still completes. Real pip, real record, real notebook; only the index is unreachable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3lab.errors import SourceError
from eagle3lab.notebook import interface_trace as tracebook
from eagle3lab.trace import release_record, sources
from notebook_02 import run_notebook_02


def offline_env(tmp_path: Path) -> dict[str, str]:
    """pip pointed at an index nobody listens on, with no config, and an empty eagle3lab cache (no wheels)."""
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
            "PIP_EXTRA_INDEX_URL": "", "EAGLE3LAB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf")}


@pytest.fixture
def offline(tmp_path, monkeypatch):
    for key, value in offline_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    sources._open_cached.cache_clear()  # a wheel opened by an earlier test must not answer for the cache
    yield
    sources._open_cached.cache_clear()


def shipped_releases() -> list[str]:
    return json.loads(release_record.RECORD.read_text(encoding="utf-8"))["releases"]


def test_an_unreachable_index_gives_the_records_releases(offline):
    assert tracebook.bisect_versions([]) == shipped_releases()
    releases = tracebook.bisect_releases([])
    newest = shipped_releases()[-1]
    assert releases.origin.startswith(f"the package index is unreachable, so the {len(shipped_releases())} releases "
                                      f"the shipped release record holds (0.5.6 to {newest})")
    assert "\n" not in releases.origin
    with pytest.raises(SourceError) as err:
        tracebook.bisect_versions([], record_fallback=False)  # what writes the record never reads it back
    assert err.value.problem == "offline"


def test_an_entry_the_record_holds_no_rows_for_keeps_the_index_error(offline):
    with pytest.raises(SourceError, match="cannot list sglang releases"):
        tracebook.bisect_releases([], "NoSuchEntryForCausalLM")


def test_a_stale_or_missing_record_holds_no_releases(tmp_path):
    assert tracebook.record_releases(path=tmp_path / "missing.json") == []
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"format": 1, "releases": ["0.5.9"], "entries": {}}))
    assert tracebook.record_releases(path=stale) == []


def test_the_newest_release_without_its_wheel_is_skipped_in_one_line(offline):
    newest = shipped_releases()[-1]
    src, skipped = tracebook.open_newest(shipped_releases())
    assert src is None and skipped is not None and "\n" not in skipped
    assert skipped.startswith(f"skipped for the newest release, sglang {newest}: its audit, capture-order rows and "
                              "fixes (no cached wheel and the package index is unreachable")
    assert tracebook.newest_text(None, skipped) == skipped


@pytest.mark.notebook
def test_notebook_02_completes_offline(tmp_path):
    """The installed release traced, every release's bisect row from the record, the newest release skipped."""
    side = run_notebook_02(tmp_path, 'sglang_source: "installed"\nbisect_versions: []\nverify_fixes: false\n',
                           offline_env(tmp_path))
    out = (tmp_path / "out.ipynb").read_text(encoding="utf-8")
    assert "releases bisected: the package index is unreachable, so the" in out
    releases = shipped_releases()
    assert side["parameters"]["bisect_versions"] == releases and side["timings"]["bisect_releases"] == len(releases)
    assert sorted(side["bisect"]["from_record"]) == sorted(releases) and side["bisect"]["traced_now"] == []
    assert f"skipped for the newest release, sglang {releases[-1]}: its audit" in out
    assert set(side["conformance"]) == {"traced"} and set(side["fixes"]["releases"]) == {"0.5.9"}
    assert side["capture_order"]["first_fixed"], "bisected from the record"
