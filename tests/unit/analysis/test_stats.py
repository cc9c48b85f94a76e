"""The statistics every figure carries, checked against cases computed by hand and by simulation."""

import itertools
import math

import numpy as np
import pytest

from ragsweep.analysis import stats


def test_exact_sign_flip_p_matches_the_hand_count_for_n6():
    d = [1.0, 2.0, 3.0, -1.0, 2.0, 4.0]  # |mean| = 11/6
    # by hand: enumerate all 2^6 sign patterns, count those with |sum| >= 11
    hits = sum(abs(sum(s * abs(x) for s, x in zip(signs, d))) >= 11 for signs in itertools.product((1, -1), repeat=6))
    assert hits == 6
    p, exact = stats.sign_flip_p(d)
    assert exact and p == pytest.approx(6 / 64)


def test_sign_flip_p_is_one_for_no_difference_and_small_for_a_clear_one():
    assert stats.sign_flip_p([0.0] * 8) == (1.0, True)
    p, exact = stats.sign_flip_p([0.5] * 30)
    assert exact and p == pytest.approx(2 / 2**30)
    p, exact = stats.sign_flip_p([0.5] * 40)  # Hoeffding's bound 2 exp(-40 / 2), below the flips' floor
    assert not exact and p == pytest.approx(2 * math.exp(-20)) and p < 1 / (stats.RANDOM_FLIPS + 1)
    d = [0.5] * 30 + [-0.5] * 10  # p ~ 0.002: random flips, seeded
    p, exact = stats.sign_flip_p(d)
    assert not exact and p == stats.sign_flip_p(d)[0] and 0.001 < p < 0.004


def test_sign_flip_p_is_calibrated_under_the_null():
    rng = np.random.default_rng(3)
    ps = [stats.sign_flip_p(rng.normal(size=12), seed=i)[0] for i in range(300)]
    assert 0.02 <= np.mean(np.array(ps) < 0.05) <= 0.09


def test_interval_is_seeded_and_covers_the_true_mean_at_about_the_nominal_rate():
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    assert stats.interval(x) == stats.interval(x)
    one = stats.interval([1.0])
    assert one.n == 1 and math.isnan(one.low)
    flat = stats.interval([0.5] * 10)
    assert (flat.low, flat.high, flat.n) == (0.5, 0.5, 10)
    covered = 0
    for i in range(200):
        iv = stats.interval(rng.normal(loc=2.0, size=30), seed=i)
        covered += iv.low <= 2.0 <= iv.high
    assert 0.88 <= covered / 200 <= 0.99  # percentile bootstrap at n=30 runs slightly under 95%


def test_interval_skips_undefined_values_and_counts_the_rest():
    iv = stats.interval([1.0, float("nan"), None, 0.0])
    assert iv.n == 2 and iv.mean == 0.5


def test_holm_on_the_textbook_example():
    # Holm (1979) style example: p = .01, .04, .03, .005 (m = 4)
    # sorted .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> monotone .06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = stats.holm([0.2, float("nan"), 0.01])
    assert out[0] == pytest.approx(0.2) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)


def test_paired_uses_only_the_questions_both_runs_scored():
    a = {"q1": 0.0, "q2": 1.0, "q3": 0.5, "q4": float("nan")}
    b = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "q4": 1.0, "q5": 3.0}
    r = stats.paired(a, b)
    assert r.n == 3 and r.diff == pytest.approx(0.5)
    assert r.mean_a == pytest.approx(0.5) and r.mean_b == pytest.approx(1.0)
    assert r.exact and r.p == pytest.approx(0.5)  # diffs 1, 0, .5: 2 of 4 distinct patterns as extreme
    empty = stats.paired({"a": 1.0}, {"b": 1.0})
    assert empty.n == 0 and math.isnan(empty.p)


def test_n_for_power_grows_as_the_effect_shrinks():
    rng = np.random.default_rng(0)
    noise = rng.normal(size=50)
    big = stats.n_for_power(noise + 1.0)
    small = stats.n_for_power(noise + 0.2)
    assert big is not None and small is not None and big < small
    assert stats.n_for_power([0.0, 0.0, 0.0]) is None


@pytest.mark.parametrize("kind", ["binary", "continuous", "sparse"])
def test_the_bootstrap_interval_is_scipys_percentile_bootstrap(kind):
    from scipy.stats import bootstrap

    rng = np.random.default_rng(7)
    for trial in range(20):
        n = int(rng.integers(2, 300))
        x = {"binary": lambda: rng.integers(0, 2, n).astype(float),
             "continuous": lambda: rng.random(n) * 100,
             "sparse": lambda: np.where(rng.random(n) < 0.1, rng.random(n), 0.0)}[kind]()
        if np.all(x == x[0]):
            continue
        ref = bootstrap((x,), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile",
                        random_state=np.random.default_rng(trial), vectorized=True).confidence_interval
        low, high = stats._bootstrap_mean(x, 0.95, 2000, trial)
        assert low == pytest.approx(ref.low, abs=1e-12) and high == pytest.approx(ref.high, abs=1e-12)
