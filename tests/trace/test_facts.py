"""facts: the per-release trace results are cached on disk, keyed by release, wheel and trace code."""

from __future__ import annotations

import json
from pathlib import Path

import synthetic_sglang as syn
from eagle3lab.trace import facts, sources


def test_wheel_facts_are_cached_and_read_back_equal(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))
    wheel = syn.write_wheel(tmp_path / "sglang-0.0.7-py3-none-any.whl", "0.0.7", syn.SHAPES)
    first = facts.release_facts(sources.wheel_source(wheel, "0.0.7"))
    assert not first.cached
    files = list((tmp_path / "cache" / "trace-facts").glob("0.0.7-*.json"))
    assert len(files) == 1
    again = facts.release_facts(sources.wheel_source(wheel, "0.0.7"))  # a new source object: read from disk
    assert again.cached
    assert [s.to_dict() for s in again.sites] == [s.to_dict() for s in first.sites]
    assert again.startup == json.loads(json.dumps(first.startup))
    assert again.registry["GapWrapper"]["file"] == "srt/models/wrappers.py"
    assert again.draft_only == ["InnerForCausalLMNextN"]


def test_damaged_cache_is_recomputed_and_synthetic_sources_are_not_cached(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "cache"))
    wheel = syn.write_wheel(tmp_path / "sglang-0.0.8-py3-none-any.whl", "0.0.8")
    facts.release_facts(sources.wheel_source(wheel, "0.0.8"))
    (cached,) = (tmp_path / "cache" / "trace-facts").glob("0.0.8-*.json")
    cached.write_text("{not json")
    redone = facts.release_facts(sources.wheel_source(wheel, "0.0.8"))
    assert not redone.cached and json.loads(cached.read_text())["version"] == "0.0.8"
    facts.release_facts(syn.source(version="0.0.9"))
    assert not list((tmp_path / "cache" / "trace-facts").glob("0.0.9-*"))
