"""Checkpoints located offline (directory or Hugging Face cache) and checked complete from their own files."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from conftest import HUB_IDS, TINY_COMMIT, seed_hub_cache

from eagle3lab.runtime import checkpoints
from eagle3lab.runtime.checkpoints import Checkpoint, examine, locate


def write_safetensors(path: Path, tensors: dict[str, int]) -> int:
    """A real safetensors file: one uint8 tensor of ``n`` bytes per name. Returns its size."""
    header, offset = {}, 0
    for name, size in tensors.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return 8 + len(raw) + offset


def sharded_model(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "config.json").write_text(json.dumps({"architectures": ["X"]}))
    write_safetensors(root / "model-00001-of-00002.safetensors", {"a": 16, "b": 8})
    write_safetensors(root / "model-00002-of-00002.safetensors", {"c": 32})
    index = {"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                            "b": "model-00001-of-00002.safetensors",
                                            "c": "model-00002-of-00002.safetensors"}}
    (root / checkpoints.INDEX_FILE).write_text(json.dumps(index))
    return root


def test_a_hub_id_resolves_to_its_snapshot_in_the_cache(offline_hub):
    found = examine(locate("draft", HUB_IDS["draft"]))
    assert found.kind == "hub" and found.present and found.complete, found.problems
    assert Path(found.path) == offline_hub / "hub" / "models--AQ-MedAI--Kimi-K25-eagle3" / "snapshots" / TINY_COMMIT
    assert found.revision == TINY_COMMIT
    assert found.bytes == sum(p.stat().st_size for p in Path(found.path).iterdir())
    assert (Path(found.path) / "config.json").is_file()


def test_an_uncached_hub_id_is_not_present(empty_hub):
    found = locate("target", HUB_IDS["target"])
    assert found.kind == "hub" and not found.present and not found.complete


def test_the_cache_location_follows_huggingface_hubs_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert checkpoints.hub_cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "explicit"))
    assert checkpoints.hub_cache_dir() == tmp_path / "explicit"


@pytest.mark.parametrize("source, expected", [("moonshotai/Kimi-K2.5", True), ("/models/x", False),
                                               ("./x/y", False), ("tiny", False)])
def test_hub_ids_are_org_slash_name(source, expected):
    assert checkpoints.is_hub_id(source) is expected


def test_a_complete_sharded_directory_passes(tmp_path):
    found = examine(locate("target", str(sharded_model(tmp_path / "m"))))
    assert found.kind == "local" and found.complete, found.problems
    assert "2 shards, 3 tensors" in found.checked


def test_a_truncated_shard_is_found_from_its_own_header(tmp_path):
    root = sharded_model(tmp_path / "m")
    shard = root / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-5])
    found = examine(locate("target", str(root)))
    assert not found.complete
    assert any("model-00002-of-00002.safetensors" in p and "truncated" in p for p in found.problems)


def test_a_shard_the_index_names_but_that_is_missing(tmp_path):
    root = sharded_model(tmp_path / "m")
    (root / "model-00001-of-00002.safetensors").unlink()
    found = examine(locate("target", str(root)))
    assert found.problems == ["1 of 2 shards the index names are missing (first: model-00001-of-00002.safetensors)"]


def test_a_tensor_the_index_places_in_the_wrong_shard(tmp_path):
    root = sharded_model(tmp_path / "m")
    write_safetensors(root / "model-00002-of-00002.safetensors", {"d": 32})
    found = examine(locate("target", str(root)))
    assert any("1 tensors the index places here are not in it (first: c)" in p for p in found.problems)


def test_no_weights_and_no_config_are_both_reported(tmp_path):
    (tmp_path / "empty").mkdir()
    found = examine(locate("target", str(tmp_path / "empty")))
    assert "no config.json" in found.problems and any("no safetensors weights" in p for p in found.problems)


def test_the_fetch_manifest_catches_a_missing_tokenizer(monkeypatch, tmp_path, tiny_models):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    snapshot = seed_hub_cache(tmp_path / "hf" / "hub", "org/model", tiny_models.draft)
    listed = {p.name: p.stat().st_size for p in snapshot.iterdir()}
    listed["tokenizer.model"] = 1234  # the hub lists a file the snapshot lacks
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "e3l"))
    checkpoints.manifest_path("org/model", TINY_COMMIT).write_text(json.dumps({"files": listed}))
    found = examine(locate("draft", "org/model"))
    assert found.problems == ["1 of %d files the hub lists are missing (first: tokenizer.model)" % len(listed)]


def test_an_interrupted_download_in_the_cache_is_reported(monkeypatch, tmp_path, tiny_models):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    seed_hub_cache(tmp_path / "hf" / "hub", "org/model", tiny_models.draft)
    (checkpoints.repo_folder("org/model") / "blobs" / "abc.incomplete").write_bytes(b"partial")
    found = examine(locate("draft", "org/model"))
    assert found.problems == ["1 interrupted downloads in the cache (resumable)"]


def test_a_stale_partial_blob_of_another_revision_does_not_mark_a_complete_snapshot(monkeypatch, tmp_path,
                                                                                    tiny_models):
    """The fetch manifest shows this snapshot complete; the *.incomplete blob belongs to another download."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path / "e3l"))
    snapshot = seed_hub_cache(tmp_path / "hf" / "hub", "org/model", tiny_models.draft)
    listed = {p.name: p.stat().st_size for p in snapshot.iterdir()}
    checkpoints.manifest_path("org/model", TINY_COMMIT).write_text(json.dumps({"files": listed}))
    (checkpoints.repo_folder("org/model") / "blobs" / "abc.incomplete").write_bytes(b"partial")
    assert examine(locate("draft", "org/model")).problems == []
    listed["tokenizer.model"] = 1234  # now the snapshot itself is incomplete: the partial blob may be its own
    checkpoints.manifest_path("org/model", TINY_COMMIT).write_text(json.dumps({"files": listed}))
    found = examine(locate("draft", "org/model"))
    assert "1 interrupted downloads in the cache (resumable)" in found.problems


def test_a_broken_snapshot_link_counts_as_missing(monkeypatch, tmp_path, tiny_models):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    snapshot = seed_hub_cache(tmp_path / "hf" / "hub", "org/model", tiny_models.draft)
    (snapshot / "model.safetensors").resolve().unlink()
    found = examine(locate("draft", "org/model"))
    assert found.problems == ["1 of 1 shards the index names are missing (first: model.safetensors)"]


def test_generated_checkpoints_pass_through(tiny_models):
    found = examine(Checkpoint("target", "tiny", "generated", tiny_models.target))
    assert found.complete and found.bytes > 0


def test_copying_is_not_needed_for_a_local_directory(tmp_path, tiny_models):
    copy = tmp_path / "draft"
    shutil.copytree(tiny_models.draft, copy)
    found = examine(locate("draft", str(copy)))
    assert found.complete and found.path == str(copy.resolve())
