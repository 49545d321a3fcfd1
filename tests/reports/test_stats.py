"""Bootstrap intervals and paired tests against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from modulo.reports.stats import bootstrap_ratio, mcnemar_exact, paired_test


def test_bootstrap_mean_matches_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(42)
    data = (rng.random(60) < 0.4).astype(float)
    ours = bootstrap_ratio(data, n_resamples=10_000, seed=1)
    ref = stats.bootstrap(
        (data,), np.mean, n_resamples=10_000, method="percentile", confidence_level=0.95, random_state=7
    ).confidence_interval
    assert ours.value == pytest.approx(data.mean())
    # two independent Monte Carlo estimates of the same percentiles: within about half a problem
    assert ours.low == pytest.approx(ref.low, abs=0.02)
    assert ours.high == pytest.approx(ref.high, abs=0.02)
    assert ours.low < ours.value < ours.high


def test_bootstrap_ratio_matches_scipy_paired_ratio() -> None:
    rng = np.random.default_rng(3)
    den = rng.integers(1, 6, size=50).astype(float)
    num = np.array([rng.integers(0, int(d) + 1) for d in den], dtype=float)

    def ratio(n: np.ndarray, d: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(n, axis=axis) / np.sum(d, axis=axis)

    ours = bootstrap_ratio(num, den, n_resamples=10_000, seed=2)
    ref = stats.bootstrap(
        (num, den), ratio, paired=True, vectorized=True, n_resamples=10_000, method="percentile", random_state=5
    ).confidence_interval
    assert ours.value == pytest.approx(num.sum() / den.sum())
    assert ours.low == pytest.approx(ref.low, abs=0.02)
    assert ours.high == pytest.approx(ref.high, abs=0.02)


def test_bootstrap_degenerate_and_analytic_cases() -> None:
    all_pass = bootstrap_ratio(np.ones(20))
    assert (all_pass.value, all_pass.low, all_pass.high) == (1.0, 1.0, 1.0)
    # n = 2 with one pass: a resample has 0, 1 or 2 passes with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% percentiles are 0 and 1
    half = bootstrap_ratio([0.0, 1.0], n_resamples=10_000, seed=0)
    assert (half.value, half.low, half.high) == (0.5, 0.0, 1.0)
    empty = bootstrap_ratio([])
    assert math.isnan(empty.value)
    assert bootstrap_ratio([1.0, 0.0], n_resamples=0).percent() == "50.0"


def test_bootstrap_is_seeded() -> None:
    data = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1], dtype=float)
    assert bootstrap_ratio(data, seed=4) == bootstrap_ratio(data, seed=4)


@pytest.mark.parametrize(("b", "c"), [(0, 6), (1, 3), (5, 5), (2, 11), (0, 0), (7, 1)])
def test_mcnemar_matches_binomtest(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected)


def test_mcnemar_hand_case() -> None:
    # six discordant problems, all won by B: two-sided p = 2 * (1/2)^6
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    # one vs three: 2 * (C(4,0) + C(4,1)) / 2^4 = 10/16
    assert mcnemar_exact(1, 3) == pytest.approx(10 / 16)


def test_paired_test_counts_and_difference() -> None:
    a = [1, 1, 0, 0, 0, 1, 0, 0]
    b = [1, 0, 1, 1, 1, 1, 1, 0]
    t = paired_test(a, b, n_resamples=5_000, seed=0)
    assert (t.n, t.only_a, t.only_b) == (8, 1, 4)
    assert t.difference.value == pytest.approx(3 / 8)
    assert t.rate_a == pytest.approx(3 / 8) and t.rate_b == pytest.approx(6 / 8)
    assert t.mcnemar_p == pytest.approx(stats.binomtest(1, 5, 0.5).pvalue)
    assert t.difference.low <= t.difference.value <= t.difference.high
    assert np.isnan(t.bootstrap_p)  # 5 discordant problems: too few for the bootstrap's p (McNemar's is there)


def test_the_paired_bootstrap_p_is_left_out_where_it_would_understate_the_exact_p() -> None:
    """With few discordant problems the null-shifted bootstrap has a handful of distinct resamples: 3 problems,
    B alone passing 2, would give 0.039 (27 equally likely draws, one of them all the third problem) against
    McNemar's exact 0.5. It is not reported below MIN_BOOTSTRAP_DISCORDANT; from there on it is."""
    from modulo.reports.stats import MIN_BOOTSTRAP_DISCORDANT

    tiny = paired_test([1, 0, 0], [1, 1, 1], n_resamples=20_000, seed=0)
    assert tiny.mcnemar_p == pytest.approx(0.5) and np.isnan(tiny.bootstrap_p)
    assert tiny.difference.value == pytest.approx(2 / 3)  # the difference and its interval are still given
    k = MIN_BOOTSTRAP_DISCORDANT
    few = paired_test(np.zeros(100), np.r_[np.ones(k - 1), np.zeros(100 - k + 1)], n_resamples=2_000)
    enough = paired_test(np.zeros(100), np.r_[np.ones(k), np.zeros(100 - k)], n_resamples=2_000)
    assert np.isnan(few.bootstrap_p) and 0.0 < enough.bootstrap_p < 0.05
    assert enough.mcnemar_p == pytest.approx(stats.binomtest(0, k, 0.5).pvalue)


def test_paired_bootstrap_p_small_for_a_clear_difference_and_one_for_none() -> None:
    a = np.zeros(40)
    b = np.ones(40)
    clear = paired_test(a, b, n_resamples=2_000)
    assert clear.bootstrap_p == pytest.approx(1 / 2001)
    assert clear.mcnemar_p < 1e-9
    same = paired_test(b, b, n_resamples=2_000)
    assert same.bootstrap_p == 1.0 and same.mcnemar_p == 1.0


def test_batched_ratios_equal_one_by_one() -> None:
    from modulo.reports.stats import bootstrap_ratios

    rng = np.random.default_rng(9)
    pairs = []
    for _ in range(6):  # more columns than the direct-indexing path takes
        den = rng.integers(1, 4, size=40).astype(float)
        pairs.append((np.minimum(den, rng.integers(0, 4, size=40)).astype(float), den))
    batch = bootstrap_ratios(pairs, n_resamples=3_000, seed=11)
    for (num, den), iv in zip(pairs, batch, strict=True):
        one = bootstrap_ratio(num, den, n_resamples=3_000, seed=11)
        assert iv.value == pytest.approx(one.value)
        assert iv.low == pytest.approx(one.low) and iv.high == pytest.approx(one.high)
