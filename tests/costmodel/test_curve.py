"""Calibration on a measured plain-decode curve (issue 36, item 3): two numbers fitted, recovered from a curve the
model itself generated with known values, and every given point's residual reported."""

from __future__ import annotations

from dataclasses import replace

import pytest

from eagle3lab.costmodel.curve import calibrate_curve, parse_curve
from eagle3lab.costmodel.cycle import Deployment, plain_step
from eagle3lab.costmodel.engine import engine_preset
from eagle3lab.costmodel.gpus import hardware_preset
from eagle3lab.costmodel.perfmodel import predict_from_config
from eagle3lab.costmodel.presets import kimi_k25, kimi_k25_eagle3_drafter, stored_model
from eagle3lab.costmodel.arch import eagle3_drafter
from eagle3lab.errors import PerfModelError


def _kimi() -> Deployment:
    return Deployment(kimi_k25(), kimi_k25_eagle3_drafter(), hardware_preset("rtx-pro-6000-blackwell"), 8,
                      engine_preset("sglang-0.5"), 1024)


def test_parse_curve_reads_pairs_and_rejects_anything_else():
    assert [(p.batch, p.tok_s) for p in parse_curve("128:2370, 1:63.6")] == [(1, 63.6), (128, 2370.0)]
    for bad in ("1=63", "0:5", "1:-3", "1:5,1:6", ""):
        with pytest.raises(PerfModelError):
            parse_curve(bad)


def test_a_moe_curve_gives_back_the_router_concentration_it_was_made_with():
    truth = _kimi()
    moe = truth.target.moe
    assert moe is not None
    made = replace(truth, target=replace(truth.target, moe=replace(moe, effective_experts=200.0)),
                   engine=truth.engine.with_("test", kernel_overhead_s=5e-6))
    points = f"1:{plain_step(made, 1).tok_s},128:{plain_step(made, 128).tok_s}"
    fitted = calibrate_curve(truth, parse_curve(points), "test")
    assert fitted.fitted == "effective experts" and not fitted.at_bound
    assert fitted.value == pytest.approx(200.0, rel=1e-3)
    assert fitted.kernel_overhead_s == pytest.approx(5e-6, rel=1e-3)
    assert all(model == pytest.approx(measured, rel=1e-6) for _, measured, model in fitted.points)


def test_a_dense_curve_gives_back_the_achieved_bandwidth_it_was_made_with():
    target = stored_model("llama-3.3-70b-instruct")
    truth = Deployment(target, eagle3_drafter(target), hardware_preset("h100-sxm"), 4, engine_preset("sglang-0.5"),
                       2048)
    made = replace(truth, engine=truth.engine.with_("test", bandwidth_efficiency=0.6, kernel_overhead_s=4e-6))
    curve = ",".join(f"{b}:{plain_step(made, b).tok_s}" for b in (1, 8, 64))
    fitted = calibrate_curve(truth, parse_curve(curve), "test")
    assert fitted.fitted == "bandwidth efficiency" and fitted.value == pytest.approx(0.6, rel=1e-3)
    middle = next(r for r in fitted.points if r[0] == 8)
    assert middle[2] == pytest.approx(middle[1], rel=1e-3)  # the point in between is predicted, and right here


def test_a_peak_beyond_reach_is_held_at_its_bound_and_said_so():
    fitted = calibrate_curve(_kimi(), parse_curve("1:63.6,128:99999"), "test")
    assert fitted.at_bound and "held at its bound" in fitted.description


def test_predict_takes_the_curve_and_says_what_it_fitted():
    p = predict_from_config("kimi-k2.5", "rtx-pro-6000-blackwell", 8, 3, 1, 4, 2.2, 1024, [1, 128],
                            baseline_curve="1:63.6,128:2370")
    assert "plain-decode curve 1: 63.6 tok/s" in p.calibration and "effective experts" in p.calibration
    assert p.points[0].baseline_tok_s == pytest.approx(63.6, rel=1e-6)
    assert p.points[1].baseline_tok_s == pytest.approx(2370, rel=1e-6)
    with pytest.raises(PerfModelError):
        predict_from_config("kimi-k2.5", "rtx-pro-6000-blackwell", 8, 3, 1, 4, 2.2, 1024, [1], baseline_tok_s=63.6,
                            baseline_curve="1:63.6")
