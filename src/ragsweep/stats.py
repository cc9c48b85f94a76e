"""How far a figure can be trusted: intervals, paired comparisons, multiplicity, power.

Every aggregate ragsweep shows is a mean over questions; its uncertainty is the question sample's.

- :func:`interval`: mean of the defined values with a seeded 95% **percentile** bootstrap interval
  over questions (B = 2,000 resamples, ``scipy.stats.bootstrap``) and the count ``n``.
- :func:`paired`: two runs compared over the questions both scored (finite in both, matched by
  question id): mean difference ``b - a``, its paired percentile-bootstrap interval, and the p-value
  of a two-sided paired sign-flip permutation test of mean zero (``scipy.stats.permutation_test``;
  exact - all 2^n sign patterns - for n <= 16, else 9,999 random flips).
- :func:`holm`: Holm's step-down adjustment of the p-values of one report.
- :func:`n_for_power`: questions a paired test would need to detect the observed mean difference
  at 80% power (normal approximation: n = ((z_{1-a/2} + z_{power}) * sd / |d|)^2).

The formulas and a worked example are in ``docs/statistics.md``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
EXACT_MAX_N = 16  # 2^16 sign patterns: the permutation p-value is exact up to here
RANDOM_FLIPS = 9999
METHOD = "percentile bootstrap"


@dataclass(frozen=True)
class Interval:
    """``mean`` of ``n`` defined values and its ``[low, high]`` interval (NaN when n < 2)."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE
    method: str = METHOD

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Paired:
    """``b - a`` over the ``n`` questions both runs scored."""

    diff: float
    low: float
    high: float
    p: float
    n: int
    mean_a: float
    mean_b: float
    exact: bool
    p_adjusted: float | None = None

    def significant(self, alpha: float = 0.05) -> bool:
        p = self.p if self.p_adjusted is None else self.p_adjusted
        return math.isfinite(p) and p < alpha

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def finite(values: Iterable[float]) -> np.ndarray:
    arr = np.asarray([float(v) for v in values if v is not None], dtype=float)
    return arr[np.isfinite(arr)]


def _bootstrap_mean(x: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    if x.size < 2:
        return float("nan"), float("nan")
    if np.all(x == x[0]):  # no spread: every resample has the same mean
        return float(x[0]), float(x[0])
    from scipy.stats import bootstrap

    res = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=n_resamples, method="percentile",
                    random_state=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def interval(values: Iterable[float], *, confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES,
             seed: int = SEED) -> Interval:
    """Mean and percentile-bootstrap interval of the finite ``values`` (NaN / None skipped)."""
    x = finite(values)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, confidence)
    low, high = _bootstrap_mean(x, confidence, n_resamples, seed)
    return Interval(float(x.mean()), low, high, int(x.size), confidence)


def sign_flip_p(diffs: Sequence[float], *, seed: int = SEED) -> tuple[float, bool]:
    """Two-sided p-value of mean(diffs) = 0 by flipping signs; (p, exact)."""
    d = finite(diffs)
    n = int(d.size)
    if n == 0:
        return float("nan"), True
    if np.all(d == 0):
        return 1.0, True
    exact = n <= EXACT_MAX_N
    if exact:  # all 2^n sign patterns, by hand: cheap and independent of scipy's bookkeeping
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1) * 2 - 1
        stats = np.abs(signs @ d) / n
        observed = abs(d.mean())
        return float(np.mean(stats >= observed - 1e-12 * max(1.0, observed))), True
    from scipy.stats import permutation_test

    res = permutation_test((d,), lambda x, axis=-1: np.mean(x, axis=axis), permutation_type="samples",
                           n_resamples=RANDOM_FLIPS, alternative="two-sided", vectorized=True,
                           random_state=np.random.default_rng(seed))
    return float(res.pvalue), False


def common(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    """Question ids both ``a`` and ``b`` define (finite), in ``a``'s order."""
    def ok(v: Any) -> bool:
        return v is not None and math.isfinite(float(v))

    return [q for q, v in a.items() if ok(v) and q in b and ok(b[q])]


def paired(a: Mapping[str, float], b: Mapping[str, float], *, confidence: float = CONFIDENCE,
           n_resamples: int = RESAMPLES, seed: int = SEED) -> Paired:
    """``b - a`` over the questions (ids) both define: mean difference, interval, sign-flip p."""
    ids = common(a, b)
    xa = np.asarray([float(a[q]) for q in ids])
    xb = np.asarray([float(b[q]) for q in ids])
    if not ids:
        nan = float("nan")
        return Paired(nan, nan, nan, nan, 0, nan, nan, True)
    d = xb - xa
    low, high = _bootstrap_mean(d, confidence, n_resamples, seed)
    p, exact = sign_flip_p(d, seed=seed)
    return Paired(float(d.mean()), low, high, p, len(ids), float(xa.mean()), float(xb.mean()), exact)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order; NaN stays NaN and is not counted)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    m = len(idx)
    out = [float("nan")] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def n_for_power(diffs: Sequence[float], *, alpha: float = 0.05, power: float = 0.8) -> int | None:
    """Questions needed to detect mean(diffs) at ``power`` (two-sided ``alpha``); None when the
    observed difference is zero or its spread unknown."""
    from scipy.stats import norm

    d = finite(diffs)
    if d.size < 2:
        return None
    effect, sd = abs(float(d.mean())), float(d.std(ddof=1))
    if effect == 0 or not math.isfinite(sd):
        return None
    if sd == 0:
        return int(d.size)
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return int(math.ceil((z * sd / effect) ** 2))


def diffs(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """Per-question ``b - a`` over the common questions."""
    return [float(b[q]) - float(a[q]) for q in common(a, b)]
