"""The release record of notebook 02's bisect: it holds this trace code's row for every release it names (a stale
record is caught here, with the command that rewrites it), a bisect takes those rows and traces only what it lacks,
and a recorded row is what tracing the release gives."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from eagle3lab.package.location import installed_version
from eagle3lab.trace import audit, capture_order, release_layers, release_record, sources


@pytest.fixture(scope="module")
def record_about() -> dict:
    assert release_record.RECORD.is_file(), f"no release record shipped; run `{release_record.RECORD_COMMAND}`"
    return json.loads(release_record.RECORD.read_text(encoding="utf-8"))


def test_the_shipped_record_holds_this_codes_row_of_every_release_it_names(record_about):
    releases = record_about["releases"]
    assert record_about["made_by"] == release_record.RECORD_COMMAND and len(releases) >= 20
    rows = release_record.recorded(release_record.BISECT_ROW, releases, audit.KIMI_ENTRY)
    defects = release_record.recorded(release_record.CAPTURE_ORDER, releases)
    captures = release_record.recorded(release_record.CAPTURE_RULE, releases)
    from_installed = [v for v in releases if Version(v) >= Version(installed_version())]
    stale = (sorted(set(releases) - set(rows)) + sorted(set(from_installed) - set(defects))
             + sorted(set(from_installed) - set(captures)))
    assert not stale, (f"the release record is stale (the trace code changed) for {stale}: rerun "
                       f"`{release_record.RECORD_COMMAND}`")
    assert [rows[v]["version"] for v in releases] == releases
    assert all(entry["measured_at"]["date"] for entry in record_about["entries"].values())


def test_a_bisect_of_recorded_releases_fetches_and_traces_nothing(record_about, monkeypatch):
    def not_traced(*args, **kwargs):
        raise AssertionError("traced although the release record holds this release")

    monkeypatch.setattr(audit, "bisect_row", not_traced)
    monkeypatch.setattr(audit, "fetch_wheels", not_traced)
    releases = record_about["releases"]
    got = audit.bisect(releases, workers=1)
    assert got["from_record"] == releases and got["traced_now"] == []
    assert got["rows"] == [release_record.recorded(release_record.BISECT_ROW, [v], audit.KIMI_ENTRY)[v]
                           for v in releases]
    assert got["appeared"] and got["first_fixed"]  # the incident's wrapper appears, and is fixed later


def test_a_release_the_record_lacks_is_fetched_traced_and_named(record_about, monkeypatch, tmp_path):
    releases = record_about["releases"]
    lacking = releases[-3]
    dropped = release_record.row_key(release_record.BISECT_ROW, lacking, audit.KIMI_ENTRY)
    entries = {key: entry for key, entry in json.loads(release_record.RECORD.read_text())["entries"].items()
               if key != dropped}
    smaller = release_record.write(entries, releases, tmp_path / "record.json")
    monkeypatch.setattr(release_record, "RECORD", smaller)
    traced, fetched = [], []
    monkeypatch.setattr(audit, "bisect_row", lambda v, entry: traced.append(v) or {"version": v, "present": False})
    monkeypatch.setattr(audit, "fetch_wheels", fetched.extend)
    got = audit.bisect(releases, workers=1)
    assert traced == [lacking] and got["traced_now"] == [lacking] and lacking not in got["from_record"]
    assert fetched == []  # one release: fetched when it is opened, not in a batch
    assert len(got["from_record"]) == len(releases) - 1


def test_rows_of_other_trace_code_are_never_read(monkeypatch, record_about):
    monkeypatch.setattr(release_record, "_trace_code", lambda: "another version of the trace code")
    assert release_record.recorded(release_record.BISECT_ROW, record_about["releases"], audit.KIMI_ENTRY) == {}


def test_the_capture_order_bisect_opens_only_the_releases_it_was_not_given():
    versions = ["0.5.9", "0.5.10", "0.5.11", "0.5.12"]
    opened = []

    def open_release(version):
        opened.append(version)
        raise AssertionError(f"opened {version} although its defect was given")

    got = capture_order.bisect_fix(versions, open_release, {"0.5.9": True, "0.5.10": True, "0.5.11": False,
                                                            "0.5.12": False})
    assert got["first_fixed"] == "0.5.11" and opened == []


@pytest.mark.network
def test_a_recorded_row_is_what_tracing_the_release_gives(record_about):
    newest = max(record_about["releases"], key=Version)
    recorded = release_record.recorded(release_record.BISECT_ROW, [newest], audit.KIMI_ENTRY)[newest]
    assert audit.bisect_row(newest, audit.KIMI_ENTRY) == recorded
    defect = release_record.recorded(release_record.CAPTURE_ORDER, [newest])[newest]
    assert capture_order.trace_capture_order(sources.open_source(newest)).defect == defect
    captured = release_record.recorded(release_record.CAPTURE_RULE, [newest])[newest]
    assert release_layers.trace_release(sources.open_source(newest)).to_row() == captured


def test_the_per_release_table_is_computed_from_the_record_without_opening_a_wheel(record_about):
    def not_opened(version):
        raise AssertionError(f"opened sglang {version} although the record holds it")

    from_installed = [v for v in record_about["releases"] if Version(v) >= Version(installed_version())]
    captures = release_layers.release_captures(from_installed, not_opened)
    assert all(c.from_record for c in captures)
    marks = release_layers.milestones(captures)
    assert marks["order_fixed"] == "0.5.11" and marks["convention_rule"] == marks["both"] == "0.5.13"
