"""The verify dispatch gap, read from the installed sglang 0.5.9 and from hand-written sources with and without it."""

from __future__ import annotations

import textwrap

import pytest

from eagle3lab.errors import SourceError
from eagle3lab.trace.silent_noop import EAGLE_INFO, EAGLE_UTILS, find_dispatch_gap
from eagle3lab.trace.sources import SglangSource, open_source


def _source(utils: str, info: str | None = None) -> SglangSource:
    texts = {EAGLE_UTILS: textwrap.dedent(utils).encode()}
    if info is not None:
        texts[EAGLE_INFO] = textwrap.dedent(info).encode()
    return SglangSource("test", "hand-written", texts)


def test_installed_sglang_verify_has_no_cpu_branch_and_the_caller_passes_an_empty_buffer():
    gap = find_dispatch_gap(open_source())
    assert gap.silent_noop and not gap.has_else and not gap.cpu_branch
    assert [b.condition for b in gap.branches] == ["_is_cuda or _is_hip", "_is_npu"]
    assert all("verify_tree_greedy" in b.calls for b in gap.branches)
    assert gap.returns is not None and gap.returns.code == "return predicts, accept_index, accept_token_num"
    assert {e.code for e in gap.flags} == {"_is_cuda = is_cuda()", "_is_hip = is_hip()", "_is_npu = is_npu()"}
    assert [e.code.split(" = ")[0] for e in gap.caller][:1] == ["predict"]
    assert "torch.empty" in gap.caller[0].code and gap.caller[0].file == EAGLE_INFO
    lines = gap.evidence()
    assert all(line.startswith(("sglang/srt/speculative/", "  no else")) for line in lines)


BRANCHES = """
    _is_cuda = is_cuda()
    _is_cpu = is_cpu()

    def verify_tree_greedy_func(predicts, target_predict):
        if _is_cuda:
            cuda_kernel(predicts)
        {tail}
        return predicts
"""


@pytest.mark.parametrize(("tail", "silent"), [
    ("", True),
    ("elif _is_cpu:\n            cpu_kernel(predicts)", False),
    ("else:\n            torch_fallback(predicts)", False),
])
def test_a_cpu_branch_or_an_else_closes_the_gap(tail, silent):
    gap = find_dispatch_gap(_source(BRANCHES.replace("{tail}", tail)))
    assert gap.silent_noop is silent
    assert gap.branches[0].condition == "_is_cuda" and gap.branches[0].line == 6
    assert gap.returns is not None and gap.returns.code == "return predicts"


def test_a_release_without_the_function_is_one_clear_error():
    with pytest.raises(SourceError) as err:
        find_dispatch_gap(_source("def other():\n    pass\n"))
    assert (err.value.problem, err.value.file) == ("missing_function", "srt/speculative/eagle_utils.py")
    with pytest.raises(SourceError) as err:
        find_dispatch_gap(SglangSource("test", "hand-written", {}))
    assert (err.value.problem, err.value.version) == ("unparsable", "test")
