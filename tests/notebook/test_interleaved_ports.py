"""The interleaved launch takes each speculative server's free port just before that server starts.

Why: a server already up listens on free ports of its own (sglang's scheduler takes one), so a port chosen for a
later launch before the earlier ones started could be taken by then; the full-report test failed once with
"port 38437 ... is already in use by pid ... (sglang::scheduler)". The launches here are recorded, not run (the
real interleaved launch runs in the full-report test); only the order of port choice and launch is checked.
"""

from __future__ import annotations

import contextlib

import pytest

from eagle3lab.bench import interleave
from eagle3lab.bench.workload import SweepConfig
from eagle3lab.notebook.patch_and_bench import relaunched_pairs
from eagle3lab.runtime.deployment import Models
from eagle3lab.runtime.profiles import load_profile


class Measured(Exception):
    """Raised by the first block: every server is up by then."""


def test_each_speculative_port_is_chosen_after_the_servers_before_it_are_up(monkeypatch, tmp_path):
    events: list[tuple[str, object]] = []
    ports = iter(range(41000, 41100))

    def chosen_port(host: str) -> int:
        port = next(ports)
        events.append(("port", port))
        return port

    @contextlib.contextmanager
    def launched(spec, log, timeout_s, patches):
        events.append(("up", spec.port))
        yield None

    def first_block(*args, **kwargs):
        raise Measured

    monkeypatch.setattr(relaunched_pairs, "free_port", chosen_port)
    monkeypatch.setattr(relaunched_pairs, "patched_server", launched)
    monkeypatch.setattr(relaunched_pairs, "run_arm", first_block)
    profile = load_profile("cpu")
    models = Models(target=str(tmp_path / "target"), draft=str(tmp_path / "draft"))
    arm = relaunched_pairs._PairArm
    arms = {interleave.BASELINE: arm(False, (), None, models, "baseline"),
            interleave.EAGLE3: arm(True, (), None, models, "eagle3"),
            "eagle3-shifted": arm(True, (), None, models, "eagle3")}
    config = SweepConfig(concurrency=[1], input_len=8, output_len=8, num_prompts=2, vocab_size=1000)
    with pytest.raises(Measured):
        relaunched_pairs._interleaved_pair(2, profile, arms, {1: [config]}, tmp_path, tmp_path, None, ())

    assert events == [("up", profile.port), ("port", 41000), ("up", 41000), ("port", 41001), ("up", 41001)]
