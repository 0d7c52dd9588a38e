"""KV tokens per arm on a mocked 8x RTX PRO 6000 box, from sglang 0.5.9's own sizing functions run on Kimi-K2.5's
published config and index (no GPU: the GPU memory sglang's sizing reads is supplied, 97,887 MiB per card)."""

from __future__ import annotations

import pytest
from kimi_checkpoint import RTX_PRO_6000_MIB, write_checkpoint

from eagle3lab.runtime.deployment import Models, server_spec
from eagle3lab.runtime.kv_budget import ARMS, describe, kv_tokens, launches_without_fraction, memory_budget
from eagle3lab.runtime.profiles import load_profile
from eagle3lab.runtime.sglang_args import parse_launches
from eagle3lab.runtime.weights import checkpoint_rank_weights
from timing import patience

FREE = RTX_PRO_6000_MIB * 2**20  # idle cards: free before launch = total


@pytest.fixture(scope="module")
def kimi_launches(tmp_path_factory, tiny_models):
    """Both arms of blackwell-8x as the profile launches them and with the fraction left to sglang, on Kimi-K2.5's
    config (the tiny drafter's config stands in for the drafter's: only the target is sized), in one child."""
    root = write_checkpoint(tmp_path_factory.mktemp("kimi"))
    profile = load_profile("blackwell-8x")
    models = Models(str(root), tiny_models.draft, trust_remote_code=True)
    argvs, env = {}, None
    for kind, prof in (("profile", profile), ("default", launches_without_fraction(profile))):
        for label in ARMS:
            spec = server_spec(prof, models, speculative=label == "EAGLE-3")
            argvs[f"{kind} {label}"], env = spec.argv(), spec.env
    parsed = parse_launches(argvs, env, check=False, sizing=True, gpu_memory_mib=RTX_PRO_6000_MIB,
                            timeout_s=patience(600))
    return profile, checkpoint_rank_weights(root, profile.tp_size), parsed


def _budget(profile, weights, parsed, kind):
    launched = {label: parsed[f"{kind} {label}"] for label in ARMS}
    defaults = {label: parsed[f"default {label}"] for label in ARMS}
    return memory_budget(profile, weights, RTX_PRO_6000_MIB, FREE, launched, defaults)


def test_sglangs_own_default_leaves_the_eagle3_arm_no_kv_cache_mocked_8x_rtx_pro_6000(kimi_launches):
    profile, weights, parsed = kimi_launches
    old = launches_without_fraction(profile)
    budget = _budget(old, weights, parsed, "default")
    baseline, eagle3 = budget.arm("baseline"), budget.arm("EAGLE-3")
    assert (round(baseline.fraction, 3), round(eagle3.fraction, 3)) == (0.771, 0.752)  # sglang's, VLM-scaled
    assert (baseline.reserve_fraction, eagle3.reserve_fraction) == (0.848, 0.827)  # before the vision scaling
    assert budget.kv_cell_bytes == (512 + 64) * 61 * 2  # MLA latent + rope key, 61 layers, bf16
    assert eagle3.pool_tokens < budget.min_tokens and eagle3 in budget.short
    assert not budget.same_pool and not budget.ok
    lines = describe(budget)
    print("\n".join(f"default {k}: {v}" for k, v in lines.items()))


def test_the_named_fraction_gives_both_arms_the_same_pool_mocked_8x_rtx_pro_6000(kimi_launches):
    profile, weights, parsed = kimi_launches
    default = _budget(launches_without_fraction(profile), weights, parsed, "default")
    assert default.fitting_fraction == 0.827 and default.fitting_tokens >= default.min_tokens
    assert profile.mem_fraction_static == default.fitting_fraction, "blackwell-8x launches with the fraction that fits"
    budget = _budget(profile, weights, parsed, "profile")
    assert budget.ok and budget.same_pool and not budget.short
    assert {a.pool_tokens for a in budget.arms} == {default.fitting_tokens}
    assert all(a.set_by == "profile" for a in budget.arms)
    print("\n".join(f"named {k}: {v}" for k, v in describe(budget).items()))


def test_kv_tokens_follow_profile_max_num_token():
    gib = 2**30
    assert kv_tokens(100 * gib, 0.8, 70 * gib, 2**20) == 10 * 1024
    assert kv_tokens(100 * gib, 0.7, 71 * gib, 2**20) < 0  # the weights alone overflow the fraction
