"""How far a figure can be trusted: intervals, paired comparisons, multiplicity, power.

Every aggregate ragsweep shows is a mean over questions; its uncertainty is the question sample's.

- :func:`interval`: mean of the defined values with a seeded 95% **percentile** bootstrap interval
  over questions (B = 2,000 resamples, ``scipy.stats.bootstrap``) and the count ``n``.
- :func:`paired`: two runs compared over the questions both scored (finite in both, matched by
  question id): mean difference ``b - a``, its paired percentile-bootstrap interval, and the p-value
  of a two-sided paired sign-flip permutation test of mean zero (:func:`sign_flip_p`: exact - all
  2^n sign patterns, counted by meeting in the middle - for n <= 30, else up to 199,999 seeded
  random flips - stopping at the 500th that reaches the observed statistic, p = 500 / flips drawn - or
  Hoeffding's bound on the exact p where that is below their floor of 5e-6).
- "barely moves" (equivalence) is not decided here: a sign-flip test of shifted differences tests
  their symmetry, not |mean| < tol, so it is decided by the betting interval of
  :mod:`ragsweep.analysis.bounded`, valid on the metric's bounded range (issue 34).
- :func:`holm`: Holm's step-down adjustment of the p-values of one report.
- :func:`n_for_power`: questions a paired test would need to detect the observed mean difference
  at 80% power (normal approximation), never fewer than the test needs to reach alpha at all
  (:func:`min_n`).

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
#: the sign-flip p is exact (all 2^n sign patterns) up to here: two halves of 2^15 partial sums each
EXACT_MAX_N = 30
#: random sign patterns above EXACT_MAX_N: the smallest p is 1 / (RANDOM_FLIPS + 1) = 5e-6, far below
#: alpha / m for the few hundred comparisons of a report (0.05 / 500 = 1e-4)
RANDOM_FLIPS = 199_999
#: random sign patterns stop once this many reached the observed statistic (p then >= ~0.003)
STOP_HITS = 500
_CHUNK = 1 << 14  # sign patterns (or half-sums) handled at once: memory stays under a few MB
#: ties in the test statistic are judged relative to the scale of the differences (sum |d|)
REL_TOL = 1e-9
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
    # scipy.stats.bootstrap(method="percentile", vectorized=True) step by step, the same draws from
    # the same generator (equal to float rounding: tests/unit/analysis/test_stats.py), without
    # importing scipy.stats: about a second of every run that reports an interval
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, (n_resamples, x.size))].mean(axis=-1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def interval(values: Iterable[float], *, confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES,
             seed: int = SEED) -> Interval:
    """Mean and percentile-bootstrap interval of the finite ``values`` (NaN / None skipped)."""
    x = finite(values)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, confidence)
    low, high = _bootstrap_mean(x, confidence, n_resamples, seed)
    return Interval(float(x.mean()), low, high, int(x.size), confidence)


# -- the sign-flip test ---------------------------------------------------------------------------
def _half_sums(a: np.ndarray) -> np.ndarray:
    """All 2^len(a) signed sums sum_i s_i a_i, sorted."""
    sums = np.zeros(1)
    for x in a:
        sums = np.concatenate((sums + x, sums - x))
    return np.sort(sums)


def _count_exact(m: np.ndarray, obs: float, eps: float, alternative: str) -> int:
    """Number of sign patterns s with sum s_i m_i >= obs - eps ("greater"), <= obs + eps ("less"),
    or |sum| >= |obs| - eps ("two-sided"); m >= 0. The sum splits into two halves of at most 2^15
    partial sums each; for every left sum the right sums that reach the bound are found by binary
    search, in chunks."""
    h = m.size // 2
    left, right = _half_sums(m[:h]), _half_sums(m[h:])
    total = 0
    for start in range(0, left.size, _CHUNK):
        s1 = left[start:start + _CHUNK]
        if alternative == "greater":
            total += int(right.size * s1.size - np.searchsorted(right, obs - eps - s1, side="left").sum())
        elif alternative == "less":
            total += int(np.searchsorted(right, obs + eps - s1, side="right").sum())
        else:
            bound = abs(obs) - eps
            if bound <= 0:
                return 2 ** m.size
            hi = right.size * s1.size - np.searchsorted(right, bound - s1, side="left").sum()
            lo = np.searchsorted(right, -bound - s1, side="right").sum()
            total += int(hi + lo)
    return total


def _count_random(m: np.ndarray, obs: float, eps: float, alternative: str, flips: int, seed: int) -> tuple[int, int]:
    """(hits, patterns drawn): seeded random sign patterns in chunks, stopping at the pattern that
    is the STOP_HITS-th to reach the observed statistic (Besag & Clifford's sequential Monte Carlo
    p-value STOP_HITS / patterns drawn: a large p needs few patterns; only a small one needs them all)."""
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < flips:
        k = min(max(256, (1 << 20) // m.size), flips - done)  # at most ~1M signs (8 MB) at once
        signs = (rng.random((k, m.size)) < 0.5) * 2.0 - 1.0
        s = signs @ m
        if alternative == "greater":
            hit = s >= obs - eps
        elif alternative == "less":
            hit = s <= obs + eps
        else:
            hit = np.abs(s) >= abs(obs) - eps
        found = np.flatnonzero(hit)
        if hits + found.size >= STOP_HITS:  # stop at the STOP_HITS-th hit: p = STOP_HITS / patterns drawn so far
            return STOP_HITS, done + int(found[STOP_HITS - hits - 1]) + 1
        hits += int(found.size)
        done += k
    return hits, done


def sign_flip_p(diffs: Sequence[float], *, alternative: str = "two-sided", seed: int = SEED,
                flips: int = RANDOM_FLIPS) -> tuple[float, bool]:
    """p-value of mean(diffs) = 0 by flipping signs; (p, exact).

    ``alternative``: "two-sided" (share of sign patterns with |sum s_i |d_i|| >= |sum d_i|),
    "greater" (sum s|d| >= sum d) or "less" (sum s|d| <= sum d). Exact for n <= EXACT_MAX_N; above,
    up to ``flips`` seeded random patterns with the observed one counted, p = (hits + 1) / (flips + 1),
    or hits / patterns drawn once STOP_HITS patterns reached the observed statistic; when Hoeffding's
    bound on the exact p is already below 1 / (flips + 1), that bound, with no pattern drawn.
    Ties are judged within REL_TOL of sum |d| (the scale of the differences, not an absolute 1e-12)."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided, greater or less, not {alternative!r}")
    d = finite(diffs)
    n = int(d.size)
    if n == 0:
        return float("nan"), True
    m = np.abs(d)
    scale = float(m.sum())
    if scale == 0:
        return 1.0, True
    obs, eps = float(d.sum()), REL_TOL * scale
    if n <= EXACT_MAX_N:
        return _count_exact(m, obs, eps, alternative) / 2.0 ** n, True
    # Hoeffding: P(sum s_i |d_i| >= t) <= exp(-t^2 / (2 sum d_i^2)) bounds the exact p from above;
    # below the random flips' floor it is the p (a valid, conservative one) and no flip is drawn
    t = {"greater": obs, "less": -obs}.get(alternative, abs(obs)) - eps
    if t > 0:
        bound = (1 if alternative != "two-sided" else 2) * math.exp(-t * t / (2 * float(np.sum(m * m))))
        if bound <= 1 / (flips + 1):
            return bound, False
    hits, drawn = _count_random(m, obs, eps, alternative, flips, seed)
    if hits >= STOP_HITS:  # stopped early: p = STOP_HITS / patterns drawn (sequential Monte Carlo)
        return min(1.0, hits / drawn), False
    return (hits + 1) / (drawn + 1), False


def min_n(alpha: float = 0.05, *, sided: int = 2) -> int:
    """The fewest questions at which the exact sign-flip test can give p < alpha at all: the
    smallest p is 2 / 2^n two-sided, 1 / 2^n one-sided (6 and 5 questions at alpha 0.05)."""
    n = 1
    while sided / 2.0 ** n >= alpha:
        n += 1
    return n


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


def n_for_power(diffs: Sequence[float], *, alpha: float = 0.05, power: float = 0.8, sided: int = 2) -> int | None:
    """Questions needed to detect mean(diffs) at ``power`` (``sided``-sided ``alpha``): the normal
    approximation n = ((z_{1-alpha/sided} + z_power) * sd / |mean|)^2, never below :func:`min_n` (the
    fewest questions at which the test can reach alpha; also the answer when sd = 0, or when one
    question is known and its spread is not). None when the observed difference is zero (no finite
    n detects it) or no difference is known."""
    from scipy.stats import norm

    d = finite(diffs)
    if d.size == 0 or abs(float(d.sum())) <= REL_TOL * float(np.abs(d).sum()):
        return None
    if d.size == 1:  # one non-zero difference: its spread is unknown, so the floor is all that is known
        return min_n(alpha, sided=sided)
    effect, sd = abs(float(d.mean())), float(d.std(ddof=1))
    if not math.isfinite(sd):
        return None
    floor = min_n(alpha, sided=sided)
    if sd == 0:
        return floor
    z = norm.ppf(1 - alpha / sided) + norm.ppf(power)
    return max(floor, int(math.ceil((z * sd / effect) ** 2)))


def diffs(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """Per-question ``b - a`` over the common questions."""
    return [float(b[q]) - float(a[q]) for q in common(a, b)]
