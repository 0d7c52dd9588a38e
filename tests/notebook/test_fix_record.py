"""The release record of notebook 02's fix checks: it holds every check this code would run (a stale record is
caught here, with the command that regenerates it), a fresh machine takes its checks from it and says so, and the
writer refuses a failing check or a machine path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from eagle3lab import resultcache
from eagle3lab.errors import ExpectationError
from eagle3lab.fix import fixverify
from eagle3lab.notebook import fixes as fixbook

pytestmark = pytest.mark.network  # reads the newest recorded release's wheel (cached after the first run)


@pytest.fixture(scope="module")
def record_about():
    assert fixbook.RELEASE_RECORD.is_file(), f"no release record shipped; run `{fixbook.RECORD_COMMAND}`"
    return json.loads(fixbook.RELEASE_RECORD.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def results(record_about):
    """Notebook 02's fix results on this code: the installed release and the newest release the record covers."""
    return fixbook.notebook_results(max(record_about["releases"], key=Version))


def test_the_shipped_record_holds_every_check_notebook_02_would_run_on_this_code(results):
    record = resultcache.load_record(fixbook.RELEASE_RECORD)
    keys = fixbook.check_keys(results)
    assert any(what.startswith("capture ") for what in keys.values())
    missing = sorted(what for key, what in keys.items() if key not in record)
    assert not missing, (f"the release record is stale (fix/, runtime/cpu_harness, the capture model code or the "
                         f"pinned versions changed) for {missing}: rerun `{fixbook.RECORD_COMMAND}` "
                         "(7-10 minutes on 2 cores)")


def test_the_record_holds_only_passing_checks_with_their_date_and_no_machine_path(record_about):
    assert record_about["made_by"] == fixbook.RECORD_COMMAND
    text = fixbook.RELEASE_RECORD.read_text(encoding="utf-8")
    for entry in record_about["entries"].values():
        result = entry["result"]
        assert result.get("ok", result.get("verified")) is True, entry["check"]
        assert entry["measured_at"]["date"] and entry["measured_at"]["machine"]
        assert "measured here" not in str(result.get("provenance", ""))
    assert all(path not in text for path in fixbook._machine_paths())


def test_on_an_empty_cache_verify_takes_every_check_from_the_record_and_measures_none(results, monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))

    def not_measured(*args, **kwargs):
        raise AssertionError("measured although the release record holds this check")

    monkeypatch.setattr(fixverify, "import_check", not_measured)
    monkeypatch.setattr(fixverify, "capture_verify", not_measured)
    out = fixbook.verify(results)
    got = [*out["imports"].values(), *out["capture"]]
    assert got and all(r["from_record"] for r in got)
    assert all(resultcache.measured_label(r).endswith("(release record)") for r in got)
    assert all(row["measured"].endswith("(release record)") for row in fixverify.capture_rows(out["capture"]))


def stand_in(verified: bool, provenance: str = "measured here: stand-in"):
    def check(*args, **kwargs):
        return {"ok": verified, "verified": verified, "provenance": provenance}
    return check


def test_the_writer_records_passing_checks_atomically_with_stand_in_checks(results, monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fixverify, "import_check", stand_in(True))
    monkeypatch.setattr(fixverify, "capture_verify", stand_in(True))
    made = fixbook.write_release_record(results, tmp_path / "record.json")
    record = resultcache.load_record(made["path"])
    assert set(record) == set(fixbook.check_keys(results)) and made["entries"] == len(record)
    assert all(e["result"]["provenance"] == "measured for the release record: stand-in" for e in record.values())
    assert list(tmp_path.glob("record.json*")) == [tmp_path / "record.json"]  # no temporary file left


@pytest.mark.parametrize("fault, says", [("a failed check", "failed here"), ("a machine path", "machine path")])
def test_the_writer_writes_nothing_on_a_failed_check_or_a_machine_path_with_stand_in_checks(
        results, monkeypatch, tmp_path, fault, says):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fixverify, "import_check", stand_in(True))
    monkeypatch.setattr(fixverify, "capture_verify", stand_in(False) if fault == "a failed check" else
                        stand_in(True, f"measured here: built in {Path.home()}/x"))
    with pytest.raises(ExpectationError, match=says):
        fixbook.write_release_record(results, tmp_path / "record.json")
    assert not list(tmp_path.glob("record.json*"))
