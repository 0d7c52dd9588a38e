"""sglang 0.5.9's own EAGLE-3 loop on a real CPU server: the full patch plus the speculative shims serve, speculate,
return exactly the greedy tokens of a server without speculation, and refuse sampling in one line."""

from __future__ import annotations

import pytest
import requests

from eagle3lab.runtime.cpu_harness import CONTROL_SHIMS, SPEC_SHIMS
from eagle3lab.runtime.cpu_harness.spec_shims import GREEDY_ONLY
from timing import patience

PROMPTS = [[(37 * i + 11 * j) % 1000 + 16 for j in range(24)] for i in range(3)]
NEW_TOKENS = 24


def _generate(base_url: str, prompt: list[int], **sampling) -> requests.Response:
    params = {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True, **sampling}
    return requests.post(f"{base_url}/generate", json={"input_ids": prompt, "sampling_params": params},
                         timeout=patience(300))


@pytest.mark.server
def test_patched_speculative_cpu_server_is_lossless_and_refuses_sampling(tmp_path, cpu_profile, tiny_models):
    from eagle3lab.package.patching import FULL_DELEGATION_PATCH
    from eagle3lab.fix.relaunch import ChainStep, run_step, stop_serving
    from eagle3lab.runtime.deployment import server_spec
    from eagle3lab.runtime.server import free_port, running_server

    step = run_step(ChainStep("full delegation patch", (FULL_DELEGATION_PATCH,)), cpu_profile, tiny_models, tmp_path,
                    SPEC_SHIMS, port=free_port(), keep_serving=True)
    try:
        assert step.status == "ready", step.report.signature if step.report else step.status
        assert step.probe.ok and step.probe.speculated
        base_url = step.server.spec.base_url
        speculative = []
        for prompt in PROMPTS:
            meta = _generate(base_url, prompt).json()
            assert meta["meta_info"]["spec_verify_ct"] > 0
            assert meta["meta_info"]["spec_accept_length"] == pytest.approx(
                meta["meta_info"]["completion_tokens"] / meta["meta_info"]["spec_verify_ct"])
            speculative.append(meta["output_ids"])
        refused = _generate(base_url, PROMPTS[0], temperature=0.7)
        assert refused.status_code == 400 and GREEDY_ONLY in refused.text
    finally:
        stop_serving([step])

    spec = server_spec(cpu_profile, tiny_models, speculative=False, shims=CONTROL_SHIMS, port=free_port())
    with running_server(spec, tmp_path / "baseline.log", cpu_profile.ready_timeout_s):
        greedy = [_generate(spec.base_url, prompt).json()["output_ids"] for prompt in PROMPTS]
        assert _generate(spec.base_url, PROMPTS[0], temperature=0.7).status_code == 200  # only speculation refuses
    assert speculative == greedy and all(len(ids) == NEW_TOKENS for ids in greedy)
