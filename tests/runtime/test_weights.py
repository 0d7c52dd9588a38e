"""One tensor-parallel rank's weights, from a checkpoint's index and config (or its shards' headers)."""

from __future__ import annotations

import json
import math

import pytest
from kimi_checkpoint import DATA, DTYPE_BYTES, inventory, tensors, write_checkpoint

from eagle3lab.errors import ModelPathError
from eagle3lab.runtime.weights import ConfigShapes, checkpoint_rank_weights, from_headers, placement, rank_weights


@pytest.fixture(scope="module")
def kimi(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("kimi-k2.5"))


def test_the_inventory_is_the_checkpoint_the_hub_reports():
    listed = tensors()
    total = sum(math.prod(shape) * DTYPE_BYTES[dtype] for _, shape, dtype in listed)
    assert len(listed) == inventory()["reported"]["tensors"] == 208_550
    assert round(total / 2**30, 2) == inventory()["reported"]["tensor_gib"]  # 554.27 GiB = 595.1 GB


def test_shapes_derived_from_config_and_quantization_config_match_every_header():
    shapes = ConfigShapes(json.loads((DATA / "config.json").read_text()))
    wrong = [(name, shape, dtype, shapes.tensor(name)) for name, shape, dtype in tensors()
             if (t := shapes.tensor(name)) is None or (t.shape, t.dtype) != (shape, dtype)]
    assert not wrong, wrong[:3]


def test_kimi_k25_at_tp8_holds_about_72_gib_per_rank_with_its_replicated_tensors(kimi):
    weights = checkpoint_rank_weights(kimi, 8)
    assert weights.source == "index + config" and not weights.unknown
    assert weights.total_bytes == weights.index_total_bytes, "the derived shapes add up to the index's total_size"
    naive = weights.total_bytes / 8
    assert weights.per_rank_bytes > naive + 2 * 2**30, "replicated tensors cost every rank more than 1/8"
    # MLA's down-projections, the router, norms and most of the vision tower stay whole on each rank
    assert 1.7 * 2**30 < weights.replicated_bytes < 3.5 * 2**30
    assert 70 * 2**30 < weights.per_rank_bytes < 73 * 2**30
    print(f"Kimi-K2.5 TP 8: {weights.per_rank_bytes / 2**30:.2f} GiB per rank against {naive / 2**30:.2f} GiB "
          f"for size / 8 (replicated {weights.replicated_bytes / 2**30:.2f} GiB, derived "
          f"{weights.derived_bytes / 2**30:.3f} GiB)")


def test_placement_follows_sglangs_modules():
    assert placement("language_model.model.layers.3.mlp.experts.7.down_proj.weight_packed") == "sharded"
    assert placement("language_model.model.layers.3.mlp.experts.7.down_proj.weight_shape") == "replicated"
    assert placement("language_model.model.layers.3.self_attn.q_a_proj.weight") == "replicated"
    assert placement("language_model.model.layers.3.self_attn.kv_b_proj.weight") == "sharded"
    assert placement("language_model.model.layers.3.mlp.gate.weight") == "replicated"
    assert placement("language_model.lm_head.weight") == placement("language_model.model.embed_tokens.weight") \
        == "sharded"
    assert placement("vision_tower.encoder.blocks.0.mlp.fc0.weight") == "replicated"
    assert placement("vision_tower.encoder.blocks.0.wqkv.weight") == "sharded"


def test_the_tiny_checkpoints_headers_and_its_config_agree(tiny_models):
    """The header path (exact) and the config path on a real safetensors checkpoint: the same tensors, shapes and
    bytes per rank."""
    from pathlib import Path

    root = Path(tiny_models.target)
    headers = from_headers(root)
    assert headers
    shapes = ConfigShapes(json.loads((root / "config.json").read_text()))
    # the generator writes the router bias in the model's dtype; Kimi-K2.5 keeps it in fp32 (the inventory's row)
    derived = {t.name: t.shape if t.name.endswith("e_score_correction_bias") else (t.shape, t.dtype)
               for h in headers if (t := shapes.tensor(h.name)) is not None}
    assert derived == {h.name: h.shape if h.name.endswith("e_score_correction_bias")
                       else (h.shape, {"BF16": "bfloat16", "F32": "float32"}[h.dtype]) for h in headers}
    exact = checkpoint_rank_weights(root, 2)
    assert exact.source == "safetensors headers"
    assert exact.per_rank_bytes == rank_weights(headers, 2, "x").per_rank_bytes


def test_a_directory_without_weights_or_index_is_one_clear_error(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelPathError, match="neither every safetensors shard nor model.safetensors.index.json"):
        checkpoint_rank_weights(tmp_path, 8)
