"""Preflight's all-reduce smoke test (issue 41, item 5): the real child, its ranks and torch.distributed, with gloo on
CPU in place of nccl on GPUs (this machine has none): a pass with its bandwidth, an injected hang that becomes one
line and leaves no process behind, an injected wrong sum, a real backend error, and the nccl row skipped here."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest
from conftest import on_cpu

from eagle3lab import preflight
from eagle3lab.preflight import allreduce
from eagle3lab.preflight.allreduce import Deadlines, check_allreduce
from eagle3lab.preflight.allreduce_child import HANG, WRONG_SUM
from eagle3lab.runtime.gpuinfo import Gpu, GpuInventory
from eagle3lab.runtime.profiles import load_profile

KIMI_MESSAGE = 48 * 4 * 7168 * 2  # max_running_requests x draft tokens x Kimi-K2.5's hidden size x bf16
SHORT = Deadlines(allreduce_s=3.0)  # the injected hang waits this out; start-up keeps its full deadline


@pytest.fixture(scope="module")
def two_ranks():
    """blackwell-8x's message (hidden from Kimi-K2.5 while its config is not on disk), between 2 ranks."""
    return load_profile("blackwell-8x", {"tp_size": 2})


def leftovers(marker: str) -> list[int]:
    """Processes still carrying this run's marker: the child or any of its ranks."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(allreduce.RUN_ENV) == marker:
                found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def assert_gone(check: preflight.Check) -> None:
    pids = check.data["answer"]["pids"]
    assert len(pids) == check.data["world"]
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == [] and leftovers(check.data["run"]) == []


def test_two_gloo_ranks_pass_and_report_the_bus_bandwidth(two_ranks):
    check = check_allreduce(two_ranks, None, None, backend="gloo", device="cpu")
    assert check.outcome == "ok", check.detail
    assert check.data["message"]["nbytes"] == KIMI_MESSAGE and check.data["message"]["hidden"] == 7168
    bw = check.data["bandwidth"]
    assert bw["algbw_gb_s"] > 0 and bw["busbw_gb_s"] == pytest.approx(bw["algbw_gb_s"] * 2 * (2 - 1) / 2)
    assert check.detail.startswith("2 ranks (gloo on cpu) all-reduce 2.8 MB (bfloat16, hidden 7168 x 192 verify "
                                   "tokens) 12 times, every sum right")
    assert "busbw" in check.detail and "\n" not in check.detail
    assert_gone(check)
    json.dumps(check.data)


def test_a_hung_rank_becomes_one_line_and_no_process_is_left(two_ranks):
    check = check_allreduce(two_ranks, None, None, backend="gloo", device="cpu", deadlines=SHORT, inject=HANG)
    assert check.outcome == "fail" and "\n" not in check.detail
    assert "hung, ranks 0, 1 did not finish within 3 s (the peer-to-peer hang of PCIe boxes with ACS or the IOMMU on)" \
        in check.detail, check.detail
    assert "NCCL_P2P_DISABLE=1" in check.fix and "ACSCtl" in check.fix and "iommu=pt" in check.fix
    assert check.data["answer"]["ready"] == [0, 1], "both joined; rank 1 sleeps, so rank 0 waits in the all-reduce"
    assert_gone(check)


def test_a_wrong_sum_fails_in_one_line(two_ranks):
    check = check_allreduce(two_ranks, None, None, backend="gloo", device="cpu", inject=WRONG_SUM)
    assert check.outcome == "fail" and "\n" not in check.detail
    assert "wrong sum on rank 0 (1 of 1376256 elements off by up to 1): data is corrupted between GPUs" in check.detail
    assert "NCCL_P2P_DISABLE=1" in check.fix
    assert_gone(check)


def test_a_backend_error_fails_in_one_line(two_ranks):
    """Real: nccl asked to all-reduce a CPU tensor raises in every rank."""
    check = check_allreduce(two_ranks, None, None, backend="nccl", device="cpu")
    assert check.outcome == "fail" and "\n" not in check.detail
    assert ": nccl error on rank " in check.detail, check.detail
    assert "NCCL_DEBUG=INFO" in check.fix
    assert_gone(check)


def test_the_nccl_row_says_why_it_was_skipped_here():
    """Real: eight GPUs described, none present; torch in the child finds no CUDA GPU, so nothing is started."""
    gpus = [Gpu(i, "NVIDIA RTX PRO 6000 Blackwell", (12, 0), 96 * 2**30) for i in range(8)]
    inv = GpuInventory(8, gpus, ["sm_120"], "2.9.1+cu128", "12.8", "580.65.06", used_mib=[3] * 8)
    check = check_allreduce(load_profile("blackwell-8x"), inv, None)
    assert check.outcome == "skipped"
    assert check.detail == "torch sees 0 CUDA GPUs here, fewer than tp_size 8: not run"
    assert check.data["answer"]["pids"] == []


def test_nothing_to_all_reduce_is_skipped_without_a_child(monkeypatch):
    monkeypatch.setattr(allreduce, "ask_child", lambda *a, **k: pytest.fail("no child for a skipped row"))
    assert check_allreduce(load_profile("gpu-1x"), None, None).detail == "tp_size 1: no all-reduce between GPUs"
    rehearsal = check_allreduce(load_profile("blackwell-8x", on_cpu("blackwell-8x")), None, None)
    assert rehearsal.outcome == "skipped" and "runs on cpu" in rehearsal.detail
    assert check_allreduce(load_profile("blackwell-8x"), None, None).detail == \
        "fewer CUDA GPUs than tp_size 8 (see GPUs)"


def test_the_message_takes_the_targets_hidden_size(tiny_models):
    profile = load_profile("blackwell-8x")
    message = allreduce.verify_message(profile, tiny_models.target)
    config = json.loads((Path(tiny_models.target) / "config.json").read_text())
    hidden = config.get("text_config", config)["hidden_size"]
    assert (message.hidden, message.tokens, message.hidden_source) == (hidden, 48 * 4, "the target's config.json")
    assert allreduce.verify_message(load_profile("gpu-1x"), None).dtype == "float32"
