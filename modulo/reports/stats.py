"""Statistics for reports: percentile bootstrap intervals and paired tests between two runs.

Every rate in a report is a ratio over problems, ``sum(num) / sum(den)``: a macro rate has ``num`` in
{0, 1} and ``den = 1``; a micro rate has the passed and the applicable constraint counts of each problem.
The bootstrap resamples *problems* (with replacement) and recomputes the ratio, which is the right unit
for both: constraints of one problem are not independent.

All resampling is vectorised with numpy and seeded, so a report is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
#: resampling is done in blocks so that memory stays at about ``_BLOCK_CELLS`` indices at a time
_BLOCK_CELLS = 2_000_000
#: up to this many columns, index each column; beyond, count and multiply
_FANCY_MAX_COLUMNS = 3
#: the paired bootstrap p-value is reported from this many discordant problems on (see :func:`paired_test`)
MIN_BOOTSTRAP_DISCORDANT = 10


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval (``low``/``high`` NaN when it cannot be computed)."""

    value: float
    low: float
    high: float
    level: float = 0.95

    def percent(self, digits: int = 1) -> str:
        if np.isnan(self.value):
            return "n/a"
        if np.isnan(self.low):
            return f"{100 * self.value:.{digits}f}"
        return f"{100 * self.value:.{digits}f} [{100 * self.low:.{digits}f}, {100 * self.high:.{digits}f}]"


@dataclass(frozen=True)
class PairedTest:
    """Run B against run A on the same problems (B - A), for a 0/1 outcome per problem."""

    n: int
    rate_a: float
    rate_b: float
    #: problems A passes and B fails / A fails and B passes
    only_a: int
    only_b: int
    difference: Interval
    mcnemar_p: float
    bootstrap_p: float


def _as_float(values: npt.ArrayLike) -> FloatArray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-d array, got shape {arr.shape}")
    return arr


def _resample_sums(columns: list[FloatArray], n_resamples: int, seed: int) -> list[FloatArray]:
    """For each resample of problem indices, the sum of each column over the resampled problems.

    Each block of resamples is drawn as indices. For a few columns they index each column directly; for
    more, they become per-problem counts (one bincount) multiplied by the stacked columns, so that each
    extra column costs a matrix product. Both give the same sums for the same seed.
    """
    n = len(columns[0])
    rng = np.random.default_rng(seed)
    matrix = np.stack(columns, axis=1)
    out = np.empty((n_resamples, len(columns)), dtype=np.float64)
    block = max(1, _BLOCK_CELLS // max(n, 1))
    for start in range(0, n_resamples, block):
        stop = min(n_resamples, start + block)
        rows = stop - start
        idx = rng.integers(0, n, size=(rows, n))
        if len(columns) <= _FANCY_MAX_COLUMNS:
            for j, col in enumerate(columns):
                out[start:stop, j] = col[idx].sum(axis=1)
            continue
        idx += (np.arange(rows, dtype=np.int64) * n)[:, None]
        counts = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        out[start:stop] = counts @ matrix
    return [out[:, j] for j in range(len(columns))]


def _percentile_interval(samples: FloatArray, level: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def bootstrap_ratio(
    num: npt.ArrayLike,
    den: npt.ArrayLike | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap CI of ``sum(num) / sum(den)`` resampling problems (``den`` None: a mean)."""
    n_arr = _as_float(num)
    d_arr = np.ones_like(n_arr) if den is None else _as_float(den)
    if n_arr.shape != d_arr.shape:
        raise ValueError("num and den must have the same length")
    total = d_arr.sum()
    if n_arr.size == 0 or total == 0:
        return Interval(float("nan"), float("nan"), float("nan"), level)
    value = float(n_arr.sum() / total)
    if n_resamples <= 0:
        return Interval(value, float("nan"), float("nan"), level)
    if den is None:
        (s_num,) = _resample_sums([n_arr], n_resamples, seed)
        ratios = s_num / n_arr.size
    else:
        s_num, s_den = _resample_sums([n_arr, d_arr], n_resamples, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = s_num / s_den
    low, high = _percentile_interval(ratios, level)
    return Interval(value, low, high, level)


def bootstrap_ratios(
    pairs: list[tuple[npt.ArrayLike, npt.ArrayLike]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> list[Interval]:
    """Several ratios over the same problems, from one stream of resamples (same numbers as one by one)."""
    if not pairs:
        return []
    nums = [_as_float(p[0]) for p in pairs]
    dens = [_as_float(p[1]) for p in pairs]
    n = len(nums[0])
    if any(len(a) != n for a in [*nums, *dens]):
        raise ValueError("all columns must have the same length")
    if n == 0 or n_resamples <= 0:
        return [
            bootstrap_ratio(a, b, n_resamples=n_resamples, seed=seed, level=level)
            for a, b in zip(nums, dens, strict=True)
        ]
    sums = _resample_sums([*nums, *dens], n_resamples, seed)
    out: list[Interval] = []
    for j, (a, b) in enumerate(zip(nums, dens, strict=True)):
        total = b.sum()
        if total == 0:
            out.append(Interval(float("nan"), float("nan"), float("nan"), level))
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            ratios = sums[j] / sums[len(pairs) + j]
        low, high = _percentile_interval(ratios, level)
        out.append(Interval(float(a.sum() / total), low, high, level))
    return out


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact (binomial) McNemar two-sided p-value from the discordant pair counts."""
    if only_a < 0 or only_b < 0:
        raise ValueError("counts must be non-negative")
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    from scipy import stats as sps  # here, not at the top: importing scipy.stats takes a second or more

    return float(min(1.0, 2.0 * sps.binom.cdf(k, n, 0.5)))


def paired_test(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> PairedTest:
    """Compare two runs' 0/1 per-problem outcomes over the same problems (same order).

    Reports exact McNemar on the discordant pairs, and a paired bootstrap of the difference in rates
    (B - A): its percentile interval, and a two-sided p-value from the bootstrap distribution shifted to
    the null of no difference, ``(1 + #{|d* - d| >= |d|}) / (1 + B)``. That p-value is NaN (not reported)
    with fewer than :data:`MIN_BOOTSTRAP_DISCORDANT` discordant problems: there the bootstrap's handful of
    distinct resamples makes it far smaller than the exact test's (3 problems, B alone passing 2: 0.039
    against McNemar's 0.5), a "significant" difference that is not one.
    """
    a_arr = _as_float(a)
    b_arr = _as_float(b)
    if a_arr.shape != b_arr.shape:
        raise ValueError("paired outcomes must have the same length")
    n = int(a_arr.size)
    if n == 0:
        nan = float("nan")
        return PairedTest(0, nan, nan, 0, 0, Interval(nan, nan, nan, level), 1.0, 1.0)
    a_pass = a_arr > 0.5
    b_pass = b_arr > 0.5
    only_a = int(np.sum(a_pass & ~b_pass))
    only_b = int(np.sum(~a_pass & b_pass))
    diff = b_pass.astype(np.float64) - a_pass.astype(np.float64)
    observed = float(diff.mean())
    if n_resamples > 0:
        (sums,) = _resample_sums([diff], n_resamples, seed)
        boot = sums / n
        low, high = _percentile_interval(boot, level)
        extreme = int(np.sum(np.abs(boot - observed) >= abs(observed) - 1e-12))
        discordant = only_a + only_b
        if not discordant:
            boot_p = 1.0
        elif discordant < MIN_BOOTSTRAP_DISCORDANT:
            boot_p = float("nan")  # far below the exact p there: not a number a report should show
        else:
            boot_p = float(min(1.0, (1 + extreme) / (1 + n_resamples)))
    else:
        low = high = float("nan")
        boot_p = float("nan")
    return PairedTest(
        n=n,
        rate_a=float(a_pass.mean()),
        rate_b=float(b_pass.mean()),
        only_a=only_a,
        only_b=only_b,
        difference=Interval(observed, low, high, level),
        mcnemar_p=mcnemar_exact(only_a, only_b),
        bootstrap_p=boot_p,
    )


def holm(pvalues: npt.ArrayLike) -> FloatArray:
    """Holm-Bonferroni adjusted p-values (same order as given) for a family of tests.

    Sorted ascending, the i-th smallest (0-based) of m is multiplied by ``m - i``, made monotone
    non-decreasing and capped at 1. Rejecting every hypothesis whose adjusted p-value is at most
    alpha controls the family-wise error rate at alpha. NaN p-values are left NaN and not counted in m.
    """
    p = _as_float(pvalues)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out[order] = adjusted
    return out
