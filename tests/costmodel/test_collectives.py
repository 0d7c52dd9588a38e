"""All-reduces from measured curves per link (costmodel.collectives): the published points come back exactly, the
engine's selector decides the path, and a GPU given by numbers takes its link kind's curve scaled to its link."""

from __future__ import annotations

import pytest

from eagle3lab.costmodel.collectives import allgather, allreduce, curve_seconds, load_links
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.forward import Pass, allreduce_time, forward_cost
from eagle3lab.costmodel.gpus import hardware_preset, parse_gpu_spec
from eagle3lab.costmodel.presets import kimi_k25
from eagle3lab.errors import PerfModelError


def test_every_curve_cites_a_public_page_and_returns_its_published_points():
    links = load_links()
    assert {"pcie5-rtx-pro-6000", "nvlink4-h100", "xgmi-mi300x"} <= set(links)
    for key, link in links.items():
        assert link.curves["nccl"], key
        for algorithm, curves in link.curves.items():
            for c in curves:
                assert "https://" in c.source, (key, algorithm, c.tp)
                for size, micros in c.points:
                    assert curve_seconds(c, size, c.tp) == pytest.approx(micros * 1e-6)


def test_past_the_last_point_the_ring_bandwidth_term_grows_with_the_message():
    nccl = next(c for c in load_links()["pcie5-rtx-pro-6000"].curves["nccl"] if c.tp == 8)
    last_size, last_us = nccl.points[-1]
    extra = 8 * 1024**2
    assert curve_seconds(nccl, last_size + extra, 8) == pytest.approx(
        last_us * 1e-6 + extra * 2 * 7 / 8 / (nccl.bus_bandwidth_gbs * 1e9))


def test_sglang_takes_nccl_on_pcie_and_a_launch_that_enables_the_custom_kernel_takes_it_under_its_cutoff():
    rtx = hardware_preset("rtx-pro-6000-blackwell")
    sglang = engine_preset("sglang-0.5")
    one_token = 7168 * 2
    assert allreduce_time(rtx, sglang, 8, one_token, 1).algorithm == "nccl"  # disabled on >2 PCIe GPUs
    patched = sglang.with_("test: VLLM_ENABLE_PCIE_ALLREDUCE-like launch", custom_allreduce="nvlink+pcie",
                           custom_allreduce_max_bytes=56 * 1024, custom_allreduce_any_size_rows=8)
    small = allreduce_time(rtx, patched, 8, one_token, 1)
    assert small.algorithm == "custom" and small.seconds < allreduce_time(rtx, sglang, 8, one_token, 1).seconds
    eight_rows = allreduce_time(rtx, patched, 8, 8 * one_token, 8)  # 112 KiB: over the cut-off, but only 8 rows
    assert eight_rows.algorithm == "custom"
    sixteen = allreduce_time(rtx, patched, 8, 16 * one_token, 16)
    assert sixteen.algorithm == "nccl"


def test_a_gpu_given_by_numbers_scales_the_reference_curve_by_its_link():
    fast, _ = parse_gpu_spec("hbm=8000,bf16=2500,mem=186,link=nvlink:900")
    slow, _ = parse_gpu_spec("hbm=8000,bf16=2500,mem=186,link=nvlink:450")
    big = 64 * 1024**2
    t_fast = allreduce(None, "nvlink", fast.link_bandwidth, fast.allreduce_latency_s, 8, big, False, 0, 0, 0)
    t_slow = allreduce(None, "nvlink", slow.link_bandwidth, slow.allreduce_latency_s, 8, big, False, 0, 0, 0)
    first = t_slow.seconds - (t_slow.seconds - t_fast.seconds) * 2  # the size-dependent part halves
    assert t_fast.seconds < t_slow.seconds and first == pytest.approx(
        load_links()["nvlink4-h100"].curves["nccl"][0].points[0][1] * 1e-6, rel=1e-6)
    assert "scaled by the datasheet link" in t_fast.source


def test_a_changed_hardware_latency_shifts_the_library_curve():
    rtx = hardware_preset("rtx-pro-6000-blackwell")
    base = allreduce_time(rtx, engine_preset("sglang-0.5"), 8, 1e5, 7).seconds
    later = allreduce_time(rtx.with_("test", allreduce_latency_s=rtx.allreduce_latency_s + 10e-6),
                           engine_preset("sglang-0.5"), 8, 1e5, 7).seconds
    assert later == pytest.approx(base + 10e-6)


def test_logits_gather_costs_half_an_allreduce_of_the_gathered_bytes():
    g = allgather("pcie5-rtx-pro-6000", "pcie", 63e9, 24.6e-6, 8, 4e6)
    a = allreduce("pcie5-rtx-pro-6000", "pcie", 63e9, 24.6e-6, 8, 2e6, False, 0, 0, 0)
    assert g.seconds == pytest.approx(a.seconds)


def test_no_curve_for_the_link_is_one_clear_error_and_tp1_costs_nothing():
    with pytest.raises(PerfModelError) as err:
        allreduce("infiniband-x", "nvlink", 1e9, 1e-5, 8, 1e4, False, 0, 0, 0)
    assert "no measured collectives" in str(err.value)
    assert allreduce(None, "pcie", 63e9, 2e-5, 1, 1e6, True, 1e9, 0, 1).seconds == 0.0


def test_a_backend_that_runs_each_query_as_a_request_reads_the_cache_per_verify_token():
    target, hw = kimi_k25(), hardware_preset("rtx-pro-6000-blackwell")
    once = engine_preset("vllm-0.19")
    per_query = once.with_("test: TRITON_MLA", verify_kv_per_query=True)
    verify = Pass(2, 4, 32768, 4)
    a, b = forward_cost(target, hw, 8, once, verify), forward_cost(target, hw, 8, per_query, verify)
    assert b.kv_bytes - a.kv_bytes == pytest.approx(3 * 2 * target.kv_read_bytes(8, 32768))
    plain = Pass(2, 1, 32768, 1)  # one query token per request: no difference
    assert forward_cost(target, hw, 8, per_query, plain).kv_bytes == forward_cost(target, hw, 8, once, plain).kv_bytes
