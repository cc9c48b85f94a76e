"""Comparison with the best that does not assume the systems are exchangeable.

Successive halving (and the report's "tied with the best") drops a system when some other system
is shown better on the questions both scored. Since issue 50 they decide with
:func:`bounded_drop_p` (betting tests on the objective's known range, valid at every n whatever the
distribution of the differences); :func:`drop_p`, below, decided from issue 34 to issue 50 and is
kept as the reference ``experiments/simulations/sim_halving_sweep.py`` measures against (rule ``max-t``): it
lost its level when a system's differences are skewed at a small rung. The permutation test it replaces (``stats.best_p``
before issue 34) permuted the systems' values within each question, which is exact only when tied
systems are exchangeable: with equal means and one system ten times noisier, the noisy system's
range made quiet systems look worse 9-22% of the time at alpha 0.05.

:func:`drop_p` studentizes each paired comparison instead and calibrates the largest of them by
flipping the signs of the questions' differences (a max-t sign-flip test in the manner of Westfall
& Young 1993; its Rademacher-multiplier form is asymptotically valid for the max of means, Romano &
Wolf 2005, Chernozhukov, Chetverikov & Kato 2013), which needs no exchangeability and no equal
variances:

- for every ordered pair (j, i) of the k systems and the n questions: differences
  ``c_q = x_jq - x_iq``, their mean ``D_ji``, centred values ``e_q = c_q - D_ji`` and the paired
  t statistic (up to the constant sqrt((n - 1) / n)) ``T_ji = sum_q c_q / sqrt(sum_q e_q^2)``;
- ``B`` seeded sign patterns ``s`` (one sign per question, shared by every pair, so the pairs'
  dependence is kept), each giving every pair the t statistic of its flipped differences,
  ``S / sqrt(sum_q c_q^2 - S^2 / n)`` with ``S = sum_q s_q c_q``, and ``M_b`` their largest (each
  flipped sample studentized by its own spread, so at small n the max has the t statistic's heavy
  tails rather than the normal's, and with every pair's differences symmetric about 0 the test is
  the exact sign-flip test of the max-t: two questions never make a drop);
- system i's p: ``(1 + #{b : M_b >= max_j T_ji}) / (B + 1)``.

Dropping every system with p < alpha drops a system whose true mean is the largest with probability
at most about alpha (asymptotically exact; its small-n behaviour is measured in
``experiments/simulations/sim_halving_sweep.py``): the max over *all* ordered pairs bounds every comparison a
true best can lose, whichever systems are truly worse.
"""

from __future__ import annotations

import numpy as np

#: sign patterns of the bootstrap (smallest p 1e-4)
RESAMPLES = 9999
SEED = 0
REL_TOL = 1e-9


def _pairs(k: int) -> tuple[np.ndarray, np.ndarray]:
    j, i = np.nonzero(~np.eye(k, dtype=bool))
    return j, i


def drop_p(values: np.ndarray, *, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """For each of the k systems (rows of ``values``, k x n, higher is better, every question scored
    by every system): the p-value of "no other system is better" (see the module docstring)."""
    x = np.asarray(values, dtype=float)
    k, n = x.shape
    if k < 2 or n < 2:
        return np.ones(k)
    j, i = _pairs(k)
    c = x[j] - x[i]  # P x n differences
    mean = c.mean(axis=1)
    e = c - mean[:, None]
    scale = float(np.abs(x).max()) or 1.0
    norm = np.sqrt((e * e).sum(axis=1) + (REL_TOL * scale) ** 2 * n)
    t = c.sum(axis=1) / norm
    t[np.abs(mean) <= REL_TOL * scale] = 0.0
    obs = np.full(k, -np.inf)
    np.maximum.at(obs, i, t)  # the strongest evidence that some j beats i
    ss = (c * c).sum(axis=1)  # sum of squares of the differences: the same for every sign pattern
    floor = (REL_TOL * scale) ** 2 * n
    ct = c.T  # n x P
    rng = np.random.default_rng(seed)
    hits = np.zeros(k, dtype=np.int64)
    chunk = max(1, (1 << 22) // max(1, n + ct.shape[1]))
    done = 0
    while done < resamples:
        b = min(chunk, resamples - done)
        signs = (rng.random((b, n)) < 0.5) * 2.0 - 1.0
        sums = signs @ ct  # b x P
        # each flipped sample's own t statistic: its sum over its own spread, sum (s c - mean)^2 = ss - sum^2 / n
        m = (sums / np.sqrt(np.maximum(ss[None, :] - sums * sums / n, 0.0) + floor)).max(axis=1)
        hits += (m[:, None] >= obs[None, :] - REL_TOL).sum(axis=0)
        done += b
    p = (hits + 1) / (resamples + 1)
    return np.where(obs > 0, p, 1.0)


def bounded_drop_p(values: np.ndarray, scale: float, *, alpha: float = 0.05) -> np.ndarray:
    """:func:`drop_p`'s question answered by a test valid at every n and for every distribution of
    the paired differences, for values in a known range of width ``scale`` (the metric registry's):
    for each system i, ``min(1, (k - 1) * min_j p_ji)``, with ``p_ji`` the one-sided betting p of
    "mean(x_j - x_i) <= 0" (:func:`ragsweep.analysis.bounded.greater_p`, bets tuned for
    ``alpha / (k - 1)``). A true best has ``mean(x_j - x_i) <= 0`` for every j, so by Bonferroni
    over its k - 1 comparisons it is dropped with probability at most ``alpha``.

    Why not :func:`drop_p` alone: the sign flips assume each difference symmetric about its mean; a
    system whose differences are rare large jumps (worse by a little on most questions, better by a
    lot on a few, equal means) looks worse on every question of a small rung and was dropped in
    about 15% of simulated sweeps at a first rung of 20 questions (``experiments/simulations/sim_halving_sweep.py``)."""
    from ragsweep.analysis import bounded

    x = np.asarray(values, dtype=float)
    k, n = x.shape
    if k < 2 or n < 1:
        return np.ones(k)
    a = alpha / (k - 1)
    out = np.ones(k)
    for i in range(k):
        ps = [bounded.greater_p(x[j] - x[i], scale, alpha=a) for j in range(k) if j != i]
        out[i] = min(1.0, (k - 1) * min(ps))
    return out
