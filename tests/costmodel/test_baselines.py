"""The three naive baselines: the fitted ones minimise the MAPE on their development pool."""

from __future__ import annotations

import pytest

from eagle3lab.costmodel.baselines import baseline_mapes, fit_baselines, mape, weighted_median
from eagle3lab.errors import PerfModelError


def test_weighted_median_minimises_the_weighted_absolute_deviation():
    values, weights = [1.0, 2.0, 3.0, 10.0], [1.0, 1.0, 1.0, 0.5]
    best = weighted_median(values, weights)
    cost = lambda x: sum(w * abs(v - x) for v, w in zip(values, weights))  # noqa: E731
    assert all(cost(best) <= cost(x) + 1e-12 for x in [0.5 + 0.01 * i for i in range(1000)])
    with pytest.raises(PerfModelError):
        weighted_median([], [])


def test_the_fitted_baselines_are_the_best_of_their_kind_on_their_pool():
    speedups = [1.1, 1.3, 0.9, 1.6, 1.2, 1.0]
    accepts = [2.0, 2.6, 1.9, 3.1, None, 2.2]
    b = fit_baselines(speedups, accepts, "test")
    best_constant = mape([b.constant_speedup] * 6, speedups)
    paired = [(s, a) for s, a in zip(speedups, accepts) if a is not None]
    best_ratio = mape([a / b.cycle_ratio for _, a in paired], [s for s, _ in paired])
    for d in (-0.05, -0.01, 0.01, 0.05):
        assert best_constant <= mape([b.constant_speedup + d] * 6, speedups) + 1e-12
        assert best_ratio <= mape([a / (b.cycle_ratio + d) for _, a in paired], [s for s, _ in paired]) + 1e-12
    out = baseline_mapes(b, speedups, accepts)
    assert out["no_gain"] == pytest.approx(mape([1.0] * 6, speedups))
    assert out["constant_speedup"] == pytest.approx(best_constant) and out["accept_over_cycle"] == pytest.approx(best_ratio)
