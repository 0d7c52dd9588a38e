"""Typed sidecars: what a notebook writes is what the next stage reads, or one line says why not."""

from __future__ import annotations

import json
import shutil

import pytest
from pydantic import ValidationError

from eagle3lab import sidecars
from eagle3lab.errors import SidecarError
from eagle3lab.errors import ReportInputError
from eagle3lab.report.inputs import check_inputs, check_sidecar
from eagle3lab.sidecars import CrashReproSidecar, InterfaceTraceSidecar, PatchBenchSidecar


@pytest.fixture(autouse=True)
def artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_ARTIFACTS_DIR", str(tmp_path))
    return tmp_path


def crash_sidecar(**changes) -> CrashReproSidecar:
    data = dict(
        profile="cpu", parameters={"expected_attribute": "set_eagle3_layers_to_capture"},
        profile_values={"name": "cpu"}, environment={"sglang": "0.5.9"},
        models={"target": "/m/t", "draft": "/m/d", "cache_key": "k", "aux_layer_ids": [0, 1, 2]},
        crash={"status": "died", "seconds_to_outcome": 17.2, "returncode": 137, "peak_rss_bytes": 3_328_599_654,
               "category": "interface_gap", "signature": "AttributeError: x", "call_site": "a.py:1", "log": "l"},
        control={"seconds_to_ready": 25.0, "peak_rss_bytes": 3_865_470_566, "generate_seconds": 0.1,
                 "completion_tokens": 16, "completion": "w w", "log": "l"})
    data.update(changes)
    return CrashReproSidecar(**data)


def test_round_trip_gives_the_same_typed_object(artifacts):
    written = crash_sidecar()
    path = sidecars.write(written)
    assert path == artifacts / "01_crash_repro.cpu.json"
    again = sidecars.read(CrashReproSidecar, "cpu")
    assert again == written
    assert again.crash.seconds_to_outcome == 17.2 and again.models.aux_layer_ids == [0, 1, 2]
    assert again.notebook == "01_crash_repro" and again.schema_version == sidecars.SCHEMA_VERSION
    assert again.date == again.written_at[:10]


def test_unknown_top_level_key_is_a_bug_caught_before_writing(artifacts):
    with pytest.raises(ValidationError) as err:
        crash_sidecar(seconds_to_outcome=1.0)
    assert [(e["type"], e["loc"]) for e in err.value.errors()] == [("extra_forbidden", ("seconds_to_outcome",))]
    assert list(artifacts.iterdir()) == []


def test_missing_sidecar_names_the_notebook_and_the_command():
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    assert err.value.path == sidecars.sidecar_path(CrashReproSidecar.NOTEBOOK, "cpu") and err.value.profile == "cpu"
    assert "--notebooks 01" in str(err.value)  # the line names the command that writes it
    assert sidecars.read_if_present(CrashReproSidecar, "cpu") is None


def test_truncated_sidecar_is_one_line_naming_the_file(artifacts):
    path = sidecars.write(crash_sidecar())
    path.write_text(path.read_text()[:200])
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    assert "\n" not in str(err.value) and str(path) in str(err.value) and "unreadable" in str(err.value)


def test_other_schema_version_is_refused(artifacts):
    path = sidecars.write(crash_sidecar())
    data = json.loads(path.read_text())
    data["schema_version"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    assert (err.value.version, err.value.expected) == (1, sidecars.SCHEMA_VERSION)
    assert err.value.path == path


def test_wrong_field_type_names_the_field(artifacts):
    path = sidecars.write(crash_sidecar())
    data = json.loads(path.read_text())
    data["crash"]["seconds_to_outcome"] = "slow"
    path.write_text(json.dumps(data))
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    assert err.value.location == "crash.seconds_to_outcome" and err.value.path == path


def test_a_written_sidecar_records_the_digest_of_its_body(artifacts):
    """Issue 43, item 5 (7): the digest is over the content, not the layout: re-indenting the file is no edit."""
    path = sidecars.write(crash_sidecar())
    data = json.loads(path.read_text())
    assert data[sidecars.DIGEST_KEY] == sidecars.content_digest(data)
    path.write_text(json.dumps(data, sort_keys=True))
    assert sidecars.read(CrashReproSidecar, "cpu") == crash_sidecar().model_copy(update={
        "written_at": data["written_at"]})


def test_a_number_edited_by_hand_is_refused_naming_the_file(artifacts):
    """Issue 43, item 5 (7): a schema-valid sidecar with one number typed over is not read as the run's."""
    path = sidecars.write(crash_sidecar())
    text = path.read_text()
    assert '"seconds_to_outcome": 17.2' in text
    path.write_text(text.replace('"seconds_to_outcome": 17.2', '"seconds_to_outcome": 1.72'))
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    line = str(err.value)
    assert err.value.problem == "changed" and err.value.path == path and "\n" not in line
    assert f"sidecar {path} was changed after the run wrote it" in line and "--notebooks 01" in line


def test_a_sidecar_of_another_profile_is_refused_naming_both(artifacts):
    """Issue 43, item 5 (7): the gpu run's sidecar copied over the cpu one is not read as cpu's."""
    gpu = sidecars.write(crash_sidecar(profile="gpu"))
    cpu = sidecars.sidecar_path(CrashReproSidecar.NOTEBOOK, "cpu")
    shutil.copy(gpu, cpu)
    with pytest.raises(SidecarError) as err:
        sidecars.read(CrashReproSidecar, "cpu")
    assert err.value.problem == "other_profile" and err.value.found == "gpu" and err.value.path == cpu
    assert f"sidecar {cpu} was written for profile 'gpu', not for 'cpu'" in str(err.value)
    assert sidecars.read(CrashReproSidecar, "gpu", gpu).profile == "gpu"


def test_a_sidecar_from_before_digests_is_read_and_the_report_notes_it(artifacts, capsys):
    """Sidecars written before digests stay readable (a rerun may take hours); the report says it cannot check
    them, and a digested one gets no note."""
    path = sidecars.write(crash_sidecar())
    check_sidecar(CrashReproSidecar.NOTEBOOK, "cpu", path, "rerun it: x")
    assert capsys.readouterr().err == ""
    data = json.loads(path.read_text())
    del data[sidecars.DIGEST_KEY]
    path.write_text(json.dumps(data, indent=2))
    assert sidecars.read(CrashReproSidecar, "cpu").crash.seconds_to_outcome == 17.2
    assert not sidecars.has_digest(path)
    check_sidecar(CrashReproSidecar.NOTEBOOK, "cpu", path, "rerun it: x")
    note = capsys.readouterr().err
    assert note.startswith(f"note: sidecar {path} records no content digest") and note.count("\n") == 1


def test_the_report_refuses_a_benchmark_record_of_another_profile(artifacts, tmp_path):
    """Issue 43, item 5 (7): notebook 03's sidecar may point at the gpu run's benchmark record; it is refused."""
    executed = tmp_path / "03_patch_and_bench.cpu.ipynb"
    executed.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"start_time": "2020-01-01T00:00:00Z"}}}))
    bench = tmp_path / "03_bench.gpu" / "bench_report.json"
    bench.parent.mkdir()
    bench.write_text(json.dumps({"profile": "gpu", "date": "2026-12-05", "machine": {}, "arms": []}))
    sidecars.write(PatchBenchSidecar(profile="cpu", profile_values={}, models={"target": "t", "draft": "d"}, patch="p",
                                     delegated_members=[], chain=[], story=[], bench_report=str(bench)))
    with pytest.raises(ReportInputError) as err:
        check_inputs("cpu", ["03_patch_and_bench"], [executed])
    assert err.value.problem == "other_profile" and err.value.path == bench
    assert f"{bench} was written for profile 'gpu', not for 'cpu'" in str(err.value)


def test_trace_sidecar_exposes_layer_tables_by_profile():
    trace = InterfaceTraceSidecar(
        profile="cpu",
        verdict={"sglang_version": "0.5.9", "required_members": ["a"], "missing_members": ["a"],
                 "one_method_enough": False, "first_raise": {"cpu": {"where": "x.py:1", "member": "a"}}},
        layer_ids=[{"profile": "gpu", "depth": 61, "aux_layer_ids": [2, 30, 58],
                    "eager_forwards_capture": {"self.model.layers_to_capture": [3, 31, 59]},
                    "cuda_graph_forwards_capture": {"self.model.layers_to_capture": [2, 30, 58]},
                    "conflict": True}])
    table = trace.layer_table("gpu")
    assert table is not None and table.captured("eager") == [3, 31, 59] and table.captured("graphs") == [2, 30, 58]
    assert trace.layer_table("cpu") is None
    assert trace.verdict.first_raise["cpu"].member == "a"


def test_chain_records_carry_no_display_labels():
    bench = PatchBenchSidecar(
        profile="cpu", profile_values={}, models={"target": "t", "draft": "d"}, patch="p", delegated_members=[],
        chain=[{"step": "unpatched", "outcome": "died", "category": "interface_gap", "seconds": 16.0}], story=[])
    dumped = json.dumps(bench.model_dump(mode="json"))
    assert "seconds to outcome" not in dumped and "classified error" not in dumped
    from eagle3lab.fix.relaunch import chain_row

    assert chain_row(bench.chain[0])["seconds to outcome"] == 16.0


def test_audit_counts_carry_every_short_key_of_the_audit():
    """The sidecar's typed counts and trace.audit's keys are one vocabulary: a kind added there must be added here."""
    from eagle3lab.sidecars import AuditCounts
    from eagle3lab.trace import audit

    keys = {"entry_classes", *audit.KIND_KEYS.values(), *(audit.verdict_key(v) for v in audit.VERDICTS)}
    assert keys == set(AuditCounts.model_fields)
    assert set(audit.KIND_KEYS) == set(audit.KINDS)


def test_a_classified_crash_is_stored_as_its_typed_record(artifacts):
    """The report of a real traceback (the crash notebook 01 asserts) round-trips through the typed record."""
    from eagle3lab.runtime.crashlog import crash_report

    log = ("Traceback (most recent call last):\n"
           '  File "/x/site-packages/sglang/srt/model_executor/model_runner.py", line 622, in initialize\n'
           "    self.model.set_eagle3_layers_to_capture(ids)\n"
           "AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute "
           "'set_eagle3_layers_to_capture'\n")
    report = crash_report(log)
    crash = {**crash_sidecar().crash.model_dump(), "report": report.to_dict()}
    again = sidecars.read(CrashReproSidecar, "cpu", sidecars.write(crash_sidecar(crash=crash)))
    stored = again.crash.report
    assert stored.signature == report.signature and stored.category == report.category == "interface_gap"
    assert stored.call_site == "sglang/srt/model_executor/model_runner.py:622 in initialize"
    assert [(f.path, f.line) for f in stored.frames] == [(f.path, f.line) for f in report.frames]
