"""Intervals for the mean of a bounded quantity that hold whatever its distribution: betting.

A metric's per-question values lie in ``[0, scale]`` (the metric registry), so a paired difference
lies in ``[-scale, +scale]``. For such values a confidence interval for the mean that is valid at
every n and for every distribution - including the common one where almost every difference is
exactly 0 and a few are large - comes from *testing by betting* (Waudby-Smith & Ramdas 2023,
"Estimating means of bounded random variables by betting", JRSS-B; Theorem 3, the hedged capital
process with predictable plug-in bets):

- rescale to ``x_i = (d_i + R) / (2R)`` in [0, 1]; for a candidate mean ``m`` two gamblers bet on
  "the mean is above m" and "below m": ``K+(m) = prod_i (1 + l+_i(m) (x_i - m))`` and
  ``K-(m) = prod_i (1 - l-_i(m) (x_i - m))``;
- bets ``l_i = sqrt(2 log(2 / alpha) / (n s2_{i-1}))`` from the values before question i only
  (``s2`` a regularised running variance, prior 1/4), truncated at ``c / m`` (``K+``) and
  ``c / (1 - m)`` (``K-``), ``c`` = :data:`TRUNCATION`;
- under mean ``m`` both are nonnegative martingales, so by Ville's inequality ``max(K+, K-) / 2``
  reaches ``1 / alpha`` with probability at most alpha: the interval is every m where it does not.
  ``K+`` falls and ``K-`` rises with m, so the interval is ``[low, high]``, found by bisection.

Why betting: measured against Hoeffding's and the empirical-Bernstein bound in
``experiments/simulations/sim_equivalence.py`` it is the narrowest of the three valid intervals in every cell
there (results in ``experiments/results/sim_equivalence.md``), and it adapts to spread: 300 zero
differences of a 0/1 metric give +-1.7 points where Hoeffding gives +-15.7.

The p-values of "barely moves" read the same capital processes at ``+-tol`` (so ``p < alpha``
exactly when the whole 95% interval lies inside ``(-tol, +tol)``, resp. outside ``[-tol, +tol]``):
:func:`within_p` of H0 ``|mean| >= tol`` and :func:`beyond_p` of H0 ``|mean| <= tol``. The
values are taken in the order given (any order fixed before looking at the values is valid; the
report uses the questions' order in the run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

ALPHA = 0.05
#: largest bet as a share of the most a gambler can bet without going broke (W-S & R: 1/2 or 3/4)
TRUNCATION = 0.75
THETA = 0.5  # the hedge: K = max(THETA K+, (1 - THETA) K-)
_BISECT = 60
#: :func:`n_for` searches up to this many questions
N_MAX = 1 << 22
METHOD = "betting CI (Waudby-Smith & Ramdas 2023)"


class RangeError(ValueError):
    """No known range, a value outside it, or a tolerance at or above it: the interval's guarantee
    needs every value inside a finite range, and a tolerance that covers the whole range tests nothing."""


class MissingValueError(ValueError):
    """A NaN among the values: a failed or undefined question must be left out (and counted) by the
    caller before the interval is taken, never averaged in."""


@dataclass(frozen=True)
class BoundedInterval:
    """Mean of ``n`` values in ``[-range, +range]`` and its betting interval ``[low, high]``."""

    mean: float
    low: float
    high: float
    n: int
    range: float
    confidence: float = 1 - ALPHA
    method: str = METHOD


def _unit(d: Sequence[float], r: float) -> np.ndarray:
    x = np.asarray(d, dtype=float)
    if r is None or not (r > 0 and math.isfinite(r)):
        raise RangeError(f"range {r!r}: a betting interval needs a finite positive range (the metric's scale)")
    missing = int(np.isnan(x).sum())
    if missing:
        raise MissingValueError(f"{missing} of {x.size} values are NaN: leave the failed or undefined questions out "
                                "(ragsweep.analysis.stats.finite) and count them before taking a betting interval")
    worst = float(np.max(np.abs(x))) if x.size else 0.0
    if worst > r * (1 + 1e-9):
        raise RangeError(f"a value of {worst:g} lies outside [-{r:g}, +{r:g}]: the metric registry's scale is too small "
                         "for these values (fix the metric's scale, or give range=)")
    return np.clip((x + r) / (2 * r), 0.0, 1.0)


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets for a fixed n: from the values before each one (W-S & R eq. 26-27)."""
    n = x.size
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    s2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    prev = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2 * math.log(2 / alpha) / (n * prev))


def _log_up(x: np.ndarray, lam: np.ndarray, m: float) -> float:
    """log K+(m): the gambler betting that the mean exceeds m."""
    bet = np.minimum(lam, TRUNCATION / m) if m > 0 else lam
    return float(np.log1p(bet * (x - m)).sum())


def _log_down(x: np.ndarray, lam: np.ndarray, m: float) -> float:
    """log K-(m): the gambler betting that the mean is below m."""
    bet = np.minimum(lam, TRUNCATION / (1 - m)) if m < 1 else lam
    return float(np.log1p(-bet * (x - m)).sum())


def _root(f, lo: float, hi: float) -> float:
    """The point in [lo, hi] where the decreasing f crosses 0 (bisection)."""
    for _ in range(_BISECT):
        mid = (lo + hi) / 2
        if f(mid) >= 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def interval(d: Sequence[float], range: float, *, alpha: float = ALPHA) -> BoundedInterval:
    """The ``1 - alpha`` betting interval for the mean of ``d`` (each value in ``[-range, +range]``)."""
    x = _unit(d, range)
    n = int(x.size)
    if n == 0:
        nan = float("nan")
        return BoundedInterval(nan, nan, nan, 0, range, 1 - alpha)
    lam = _bets(x, alpha)
    bar = math.log(1 / alpha)
    up = lambda m: _log_up(x, lam, m) + math.log(THETA) - bar  # noqa: E731 - >= 0: m rejected from below
    down = lambda m: _log_down(x, lam, m) + math.log(1 - THETA) - bar  # noqa: E731 - >= 0: m rejected from above
    low = 0.0 if up(0.0) < 0 else _root(up, 0.0, 1.0)
    high = 1.0 if down(1.0) < 0 else 1.0 - _root(lambda s: down(1.0 - s), 0.0, 1.0)
    to = lambda m: 2 * range * m - range  # noqa: E731
    return BoundedInterval(float(np.mean(d)), to(low), to(high), n, range, 1 - alpha)


def _check_tol(tol: float, range: float) -> None:
    if math.isfinite(range) and tol >= range:
        raise RangeError(f"tol {tol:g} is at or above the range {range:g}: every mean difference of values in "
                         f"[-{range:g}, +{range:g}] lies within it, so 'barely moves' at this tol tests nothing "
                         "(give a tol below the metric's scale)")


def _capitals(d: Sequence[float], tol: float, range: float, alpha: float) -> tuple[float, float, float, float]:
    """log K+ and log K- at the two margins -tol and +tol (on the unit scale)."""
    x = _unit(d, range)
    lam = _bets(x, alpha)
    lo_m, hi_m = 0.5 - tol / (2 * range), 0.5 + tol / (2 * range)
    return _log_up(x, lam, lo_m), _log_down(x, lam, lo_m), _log_up(x, lam, hi_m), _log_down(x, lam, hi_m)


def _p(log_k: float, weight: float) -> float:
    return float(min(1.0, math.exp(-(math.log(weight) + log_k)))) if log_k > -700 else 1.0


def within_p(d: Sequence[float], tol: float, range: float, *, alpha: float = ALPHA) -> float:
    """p of H0 "|mean| >= tol" (equivalence): ``max(2 / K-(+tol), 2 / K+(-tol))``. Below alpha
    exactly when the ``1 - alpha`` interval lies inside ``(-tol, +tol)``. Raises :class:`RangeError`
    (no finite range, a value outside it, or ``tol >= range``) and :class:`MissingValueError` (a NaN)."""
    _unit(d, range)
    _check_tol(tol, range)
    if not (tol > 0) or len(d) == 0:
        return 1.0
    up_lo, _, _, down_hi = _capitals(d, tol, range, alpha)
    return max(_p(down_hi, 1 - THETA), _p(up_lo, THETA))


def beyond_p(d: Sequence[float], tol: float, range: float, *, alpha: float = ALPHA) -> float:
    """p of H0 "|mean| <= tol": ``min(2 / K+(+tol), 2 / K-(-tol))``, so that either side counts and
    both together hold the level. Below alpha exactly when the interval lies outside ``[-tol, +tol]``.
    Raises as :func:`within_p` does."""
    _unit(d, range)
    _check_tol(tol, range)
    if len(d) == 0:
        return 1.0
    _, down_lo, up_hi, _ = _capitals(d, max(tol, 0.0), range, alpha)
    return min(_p(up_hi, THETA), _p(down_lo, 1 - THETA))


def greater_p(d: Sequence[float], range: float, *, alpha: float = ALPHA) -> float:
    """One-sided p of H0 "mean <= 0" for values in ``[-range, +range]``: ``1 / K+(0)``, the capital
    of the gambler betting that the mean is above 0 (no hedge: one side), with bets tuned for a test
    at ``alpha`` (``log(1 / alpha)`` in place of ``log(2 / alpha)``). Under H0 the capital is a
    nonnegative supermartingale from 1, so ``P(p <= a) <= a`` for every a, at every n, whatever the
    distribution inside the range - rare large jumps included. Raises as :func:`within_p` does."""
    x = _unit(d, range)
    if x.size == 0:
        return 1.0
    log_k = _log_up(x, _bets(x, 2 * alpha), 0.5)
    return _p(log_k, 1.0)


def n_for(d: Sequence[float], tol: float, range: float, test: str = "within", *, alpha: float = ALPHA) -> int | None:
    """Questions the test would need at ``alpha`` if further questions looked like these (the observed
    differences repeated in their order): the fewest n at which :func:`within_p` (``test="within"``)
    or :func:`beyond_p` (``"beyond"``) falls below alpha. None when the observed mean is on the other
    side of tol (no number of such questions shows it) or more than :data:`N_MAX` would be needed."""
    if test not in ("within", "beyond"):
        raise ValueError(f"test must be 'within' or 'beyond', not {test!r}")
    x = _unit(d, range)  # refuses what within_p / beyond_p refuse
    _check_tol(tol, range)
    x = np.asarray(d, dtype=float)
    if x.size == 0:
        return None
    inside = abs(float(x.mean())) < tol
    if inside != (test == "within") or (test == "beyond" and abs(float(x.mean())) == tol):
        return None
    fn = within_p if test == "within" else beyond_p

    def ok(n: int) -> bool:
        return fn(np.resize(x, n), tol, range, alpha=alpha) < alpha

    hi = x.size
    while not ok(hi):
        if hi >= N_MAX:
            return None
        hi = min(N_MAX, hi * 2)
    lo = hi // 2 if hi > x.size else 0  # not enough (or nothing) below hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi
