"""Sealed evaluation sets: the committed sha256 still matches each file, an edit fails loudly, and the fourth set
holds only sources this project had not used, each admitted series in the earlier held-out sets' format."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from eagle3lab.costmodel.seals import DATA, check_seal, load_seals, sha256_of
from eagle3lab.costmodel.validation import DATASET, Series
from eagle3lab.errors import PerfModelError


def test_every_sealed_set_is_unchanged():
    seals = load_seals().seals
    assert {s.set for s in seals} >= {"held_out_4"}
    for seal in seals:
        check = check_seal(seal.set)
        assert check.intact and check.current_sha256 == seal.sha256


def test_an_edited_set_fails_its_seal(tmp_path: Path):
    shutil.copy(DATA / "seals.yaml", tmp_path / "seals.yaml")
    shutil.copy(DATA / "held_out_4.yaml", tmp_path / "held_out_4.yaml")
    check_seal("held_out_4", tmp_path / "seals.yaml", tmp_path)  # the copy is intact
    edited = (tmp_path / "held_out_4.yaml").read_text(encoding="utf-8").replace("accept_length: 3.42", "accept_length: 3.5")
    (tmp_path / "held_out_4.yaml").write_text(edited, encoding="utf-8")
    with pytest.raises(PerfModelError, match="edited after sealing"):
        check_seal("held_out_4", tmp_path / "seals.yaml", tmp_path)
    with pytest.raises(PerfModelError, match="no seal recorded"):
        check_seal("held_out_99")


def test_the_fourth_set_is_new_quoted_and_in_the_held_out_format():
    held = yaml.safe_load((DATA / "held_out_4.yaml").read_text(encoding="utf-8"))
    seal = next(s for s in load_seals().seals if s.set == "held_out_4")
    assert sha256_of(DATA / "held_out_4.yaml") == seal.sha256
    series = [Series.model_validate(s) for src in held["sources"] for s in src["series"]]
    assert sum(len(s.batches) for s in series) == seal.points_admitted
    assert all(s.accept_length is not None and s.quote for s in series)  # published acceptance, quoted
    assert {src["url"] for src in held["sources"]} == set(seal.sources)
    assert all(src["split"] == "held_out_4" for src in held["sources"])
    # none of its sources was used before: not in the earlier sets' URLs or ids
    earlier = DATASET.read_text(encoding="utf-8")
    for src in held["sources"]:
        assert src["url"] not in earlier and src["id"] not in earlier
    assert all(item["missing"] and item["quote"] and item["url"] for item in held["not_admitted"])
