"""The sealed set's one evaluation (costmodel.sealed_eval): it refuses when its result exists, when the constants
differ from the recorded freeze, or when the set fails its seal, each on copies in a temporary folder; on a tiny
synthetic set it writes one row per point and a summary that follows from those rows."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest
import yaml

from eagle3lab.commands.cli import main
from eagle3lab.commands import evaluate_sealed
from eagle3lab.costmodel.freeze import COMMIT, CONSTANTS, constants_commit
from eagle3lab.costmodel.sealed import RESULT, result_path, sealed_record
from eagle3lab.costmodel.seals import DATA, SEALS, load_seals, sha256_of
from eagle3lab.costmodel.sealed_eval import Paths, check_constants, evaluate, load_set
from eagle3lab.errors import PerfModelError


def _copies(tmp_path: Path) -> Paths:
    for path in (SEALS, DATA / "held_out_4.yaml", CONSTANTS, COMMIT):
        shutil.copy(path, tmp_path / path.name)
    return Paths(result=tmp_path / "held_out_4_evaluation.json", constants=tmp_path / CONSTANTS.name,
                 commit_record=tmp_path / COMMIT.name, seals=tmp_path / SEALS.name, data_dir=tmp_path)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_an_existing_result_is_refused_and_left_as_it_was(tmp_path):
    paths = _copies(tmp_path)
    paths.result.write_text("{}\n", encoding="utf-8")
    with pytest.raises(PerfModelError, match="already evaluated") as err:
        evaluate(paths)
    assert "\n" not in str(err.value) and paths.result.read_text(encoding="utf-8") == "{}\n"


def test_constants_that_differ_from_the_frozen_commit_are_refused(tmp_path):
    paths = _copies(tmp_path)
    assert check_constants(paths) == constants_commit()  # the unchanged copy passes
    _edit(paths.constants, "spec_tp_extra_s: 0.0013197", "spec_tp_extra_s: 0.0013198")
    with pytest.raises(PerfModelError, match="differs from the frozen commit") as err:
        evaluate(paths)
    assert "\n" not in str(err.value) and not paths.result.exists()


def test_a_commit_record_git_cannot_show_is_refused(tmp_path):
    paths = _copies(tmp_path)
    _edit(paths.commit_record, constants_commit() or "", "deadbeef" * 5)
    with pytest.raises(PerfModelError, match="git cannot show"):
        evaluate(paths)
    assert not paths.result.exists()


def test_a_set_that_fails_its_seal_is_refused(tmp_path):
    paths = _copies(tmp_path)
    _edit(paths.data_dir / "held_out_4.yaml", "accept_length: 3.42", "accept_length: 3.5")
    with pytest.raises(PerfModelError, match="edited after sealing") as err:
        evaluate(paths)
    assert "\n" not in str(err.value) and not paths.result.exists()


def test_the_command_refuses_in_one_line_with_exit_2_on_tmp_copies(tmp_path, monkeypatch, capsys):
    """The command on copies (monkeypatched paths: the real files must not be evaluated by a test)."""
    paths = _copies(tmp_path)
    paths.result.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(evaluate_sealed.Paths, "for_set", classmethod(lambda cls, name: paths))
    assert main(["evaluate-sealed"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "already evaluated" in line


def _series(sid: str, baseline: float, eagle: float, accept: float, **more) -> dict:
    return {"id": sid, "quote": "synthetic", "engine": "sglang-0.5", "model": "llama-3.1-8b-instruct",
            "drafter": "EAGLE-3 (synthetic)", "tp": 1, "flags": {"num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4},
            "batches": [1], "baseline_tok_s": [baseline], "eagle3_tok_s": [eagle], "accept_length": accept,
            "calibrate": "baseline_single_stream", **more}


def _synthetic(tmp_path: Path, eagle: float, calibrate: str = "baseline_single_stream") -> Paths:
    """A tiny sealed set in tmp: two H100 series at batch 1 and one at batches 4 and 16, its seal beside it."""
    src = {"id": "synthetic-h100", "title": "synthetic", "authors": "test", "url": "https://example.org/synthetic",
           "date": "2026-12-05", "hardware": "h100-sxm", "split": "tiny", "notes": "synthetic numbers for a test",
           "series": [_series("a", 150.0, eagle, 3.0, calibrate=calibrate), _series("b", 150.0, 260.0, 2.5),
                      _series("c", 600.0, 900.0, 2.8, batches=[4, 16], baseline_tok_s=[600.0, 2000.0],
                              eagle3_tok_s=[900.0, 2400.0], calibrate="baseline_at_first_batch")]}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"set": "tiny", "sources": [src]}), encoding="utf-8")
    seal = load_seals().seals[0].model_copy(update={"set": "tiny", "file": "tiny.yaml", "sha256": sha256_of(path),
                                                    "sources": [src["url"]]})
    (tmp_path / "seals.yaml").write_text(yaml.safe_dump({"seals": [seal.model_dump()]}), encoding="utf-8")
    return Paths(set_name="tiny", result=tmp_path / "tiny_evaluation.json", seals=tmp_path / "seals.yaml",
                 data_dir=tmp_path)


def test_a_synthetic_set_gets_one_row_per_point_and_a_summary_from_those_rows(tmp_path):
    paths = _synthetic(tmp_path, eagle=270.0)
    record = evaluate(paths)
    assert json.loads(paths.result.read_text(encoding="utf-8")) == record
    rows = record["rows"]
    assert [(r["series"], r["conditions"]["batch"]) for r in rows] == [("a", 1), ("b", 1), ("c", 4), ("c", 16)]
    assert record["points"] == 4 and record["constants_commit"] == constants_commit()
    assert record["sha256"] == sha256_of(tmp_path / "tiny.yaml") and record["constants"] == "frozen_3"
    for r in rows:
        assert r["source_url"] == "https://example.org/synthetic" and r["role"] == "predicted"
        assert r["signed_error_pct"] == pytest.approx((r["predicted_speedup"] - r["published_speedup"])
                                                      / r["published_speedup"] * 100, abs=0.01)
    published = [r["published_speedup"] for r in rows]
    assert published[0] == pytest.approx(270.0 / 150.0, abs=1e-4)
    assert record["mape_pct"] == pytest.approx(statistics.fmean(abs(r["signed_error_pct"]) for r in rows), abs=0.01)
    b = record["baselines"]
    expect = {"no_gain": [1.0] * 4, "constant_speedup": [b["constant_speedup"]] * 4,
              "accept_over_cycle": [r["conditions"]["accept_length"] / b["cycle_ratio"] for r in rows]}
    for name, guesses in expect.items():
        want = statistics.fmean(abs(g - y) / y * 100 for g, y in zip(guesses, published))
        assert record["baselines_mape_pct"][name] == pytest.approx(want, abs=0.02), name
    assert record["below_every_baseline"] == (record["mape_pct"] < min(record["baselines_mape_pct"].values()))
    with pytest.raises(PerfModelError, match="already evaluated"):
        evaluate(paths)


def test_the_prediction_never_reads_the_published_eagle_rate(tmp_path):
    """Two sets differing only in one published EAGLE-3 rate: same prediction, different published speedup."""
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir(), second.mkdir()
    a, b = evaluate(_synthetic(first, eagle=270.0))["rows"][0], evaluate(_synthetic(second, eagle=210.0))["rows"][0]
    assert a["predicted_speedup"] == b["predicted_speedup"]
    assert a["published_speedup"] != b["published_speedup"]


def test_a_calibration_on_the_eagle_arm_is_refused(tmp_path):
    paths = _synthetic(tmp_path, eagle=270.0, calibrate="baseline_and_spec_single_stream")
    with pytest.raises(PerfModelError, match="sealed_evaluation_rules"):
        load_set(tmp_path / "tiny.yaml", "tiny", 1024)
    assert not paths.result.exists()


def test_an_unknown_set_is_one_line_naming_it():
    with pytest.raises(PerfModelError, match="no seal recorded for evaluation set 'nope'"):
        Paths.for_set("nope")


def test_the_record_reader_takes_the_set_by_name_and_keeps_the_reports_default():
    """sealed_record was hard-wired to held_out_4; a later set is read by its name, from its own result file."""
    default = sealed_record()
    assert default == sealed_record(name="held_out_4") == sealed_record(RESULT, "held_out_4")
    assert default["set"] == "held_out_4" and default["evaluated"] == RESULT.is_file()
    assert Paths.for_set("held_out_4").result == result_path("held_out_4") == RESULT


def test_the_record_reader_refuses_an_unsealed_set_in_one_line():
    with pytest.raises(PerfModelError, match="no seal recorded for evaluation set 'held_out_99'"):
        sealed_record(name="held_out_99")
