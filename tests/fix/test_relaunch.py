"""What the relaunch chain must show, judged from hand-written server logs and probe results."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3lab.errors import ExpectationError
from eagle3lab.fix.relaunch import (DEFAULT_CHAIN, ServeProbe, StepResult, expect_chain, not_runnable_reason,
                                    serving_server, stop_serving)
from eagle3lab.runtime.crashlog import crash_report


def _log(exc_line: str, frame: str = "sglang/srt/model_executor/model_runner.py") -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "/venv/site-packages/{frame}", line 10, in initialize\n'
            "    self.call()\n" + exc_line + "\n")


GAP = _log("AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute 'set_eagle3_layers_to_capture'")
NEXT_GAP = _log("AttributeError: 'KimiK25ForConditionalGeneration' object has no attribute 'get_embed_and_head'")
SGLANG_CPU = _log("ValueError: EAGLE is not supported in decode attention backend torch_native",
                  "sglang/srt/speculative/draft_utils.py")
HARNESS_TOPK = _log("eagle3lab.runtime.cpu_harness.spec_attention.SpeculativeCpuError: the eagle3lab CPU harness runs "
                    "EAGLE with --speculative-eagle-topk 1 only (topk 4 needs the draft tree's custom attention mask, "
                    "which torch_native does not apply); use topk 1 on CPU", "sglang/srt/speculative/draft_utils.py")


def _step(index: int, status: str, log: str | None = None, probe: ServeProbe | None = None) -> StepResult:
    return StepResult(DEFAULT_CHAIN[index], status, 1.0, crash_report(log) if log else None, Path("x.log"),
                      probe=probe)


def _chain(last: StepResult) -> list[StepResult]:
    return [_step(0, "died", GAP), _step(1, "died", NEXT_GAP), last]


MEMBERS = ["set_eagle3_layers_to_capture", "get_embed_and_head"]


def test_full_patch_that_serves_and_speculates_ends_the_story(cpu_profile):
    probe = ServeProbe(200, completion_tokens=16, spec_verify_ct=9, spec_accept_length=16 / 9)
    story = expect_chain(_chain(_step(2, "ready", probe=probe)), cpu_profile, MEMBERS)
    assert story[0].startswith("unpatched: dies asking the wrapper for 'set_eagle3_layers_to_capture'")
    assert "get_embed_and_head" in story[1]
    assert story[2].endswith("comes up with EAGLE-3 and answers /generate (16 tokens in 9 verify steps)")
    assert not_runnable_reason(_chain(_step(2, "ready", probe=probe))) is None


@pytest.mark.parametrize(("probe", "problem", "found"), [
    (ServeProbe(200, completion_tokens=16, spec_verify_ct=None), "no_speculation", None),
    (ServeProbe(500, error="boom"), "generate_failed", "boom"),
    (None, "generate_failed", None),
])
def test_a_ready_server_must_answer_and_speculate(cpu_profile, probe, problem, found):
    with pytest.raises(ExpectationError) as err:
        expect_chain(_chain(_step(2, "ready", probe=probe)), cpu_profile, MEMBERS)
    assert (err.value.problem, err.value.found) == (problem, found)


def test_a_setting_the_cpu_harness_refuses_is_the_cpu_limitation_that_remains(cpu_profile):
    story = expect_chain(_chain(_step(2, "died", HARNESS_TOPK)), cpu_profile, MEMBERS)
    assert "stops at what is still GPU-only with these settings" in story[2] and "topk 4" in story[2]
    reason = not_runnable_reason(_chain(_step(2, "died", HARNESS_TOPK)))
    assert reason["category"] == "cpu_limitation" and reason["rule"] == "spec_harness_unsupported"


@pytest.mark.parametrize(("log", "problem", "found"), [
    (SGLANG_CPU, "cpu_backend_missing", None),
    (NEXT_GAP, "interface_gap", None),
    (_log("RuntimeError: something else"), "not_up", "RuntimeError: something else"),
])
def test_anything_else_fails_the_notebook(cpu_profile, log, problem, found):
    with pytest.raises(ExpectationError) as err:
        expect_chain(_chain(_step(2, "died", log)), cpu_profile, MEMBERS)
    assert err.value.problem == problem
    assert found is None or err.value.found == found


def test_stop_serving_is_idempotent_and_clears_the_server():
    class Server:
        stopped = 0

        def stop(self):
            Server.stopped += 1

    chain = _chain(_step(2, "ready", probe=ServeProbe(200, 16, 9)))
    chain[-1].server = Server()  # type: ignore[assignment]
    assert serving_server(chain) is chain[-1].server
    stop_serving(chain)
    stop_serving(chain)
    assert Server.stopped == 1 and serving_server(chain) is None
