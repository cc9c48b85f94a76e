"""Issue 34, item 1: "barely moves" decided by an interval valid for a bounded metric whatever the
distribution of differences (the betting interval of :mod:`ragsweep.analysis.bounded`), on the
issue's inputs; each failed with the shifted sign-flip TOST it replaces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsweep.analysis import bounded
from ragsweep.analysis.report.directions import NOT_TESTABLE, OPPOSITE_NS, REPRODUCED, SAME_NS, zero_n
from ragsweep.analysis.report.paired import UNTESTABLE, compare

from test_verdicts_every_n import _direction

CR = "ragchecker/retriever/claim_recall"  # 0-100
HIT = "retrieval/hit_at_k"  # 0/1


def test_all_zero_differences_are_not_equivalence_at_small_n():
    # before: d = [0]*5 at tol 2 gave REPRODUCED with p = 1/32; d = [0]*20 gave p = 9.5e-7
    five = _direction([[50.0] * 5, [50.0] * 5], "flat", tol=2.0)
    assert five.verdict == SAME_NS and five.p == 1.0
    twenty = _direction([[30.0, 70.0] * 10, [30.0, 70.0] * 10], "flat", tol=2.0)
    assert twenty.verdict == SAME_NS and twenty.p > 0.5
    assert twenty.n_needed == 249 and twenty.steps[0]["ci_low"] < -2 and twenty.steps[0]["ci_high"] > 2
    assert "~249 questions for its interval to lie inside ±2" in twenty.line()
    # on a 0/1 metric the default tol is 0.02: the same 249 questions
    hit = _direction([[1.0, 0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 1.0, 1.0, 0.0]], "flat", metric=HIT)
    assert hit.verdict == SAME_NS and hit.tol == pytest.approx(0.02) and hit.n_needed == 249 == zero_n()


def test_a_real_change_carried_by_a_few_questions_is_not_called_equivalence():
    # the simulation: true mean difference 3 = 1.5 x tol, carried by +100 on 3% of questions;
    # before: REPRODUCED 0.70 / 0.52 / 0.41 / 0.23 / 0.05 of the time at n = 10 / 20 / 30 / 60 / 100
    rng = np.random.default_rng(34)
    for n in (10, 20, 30, 60, 100):
        hits = 0
        for _ in range(150):
            d = np.where(rng.random(n) < 0.03, 100.0, 0.0)
            a = {f"q{i}": 0.0 for i in range(n)}
            b = {f"q{i}": float(x) for i, x in enumerate(d)}
            c = compare(CR, "A", a, "B", b, tol=2.0)
            hits += c.hypothesis == "within" and c.result.p < 0.05
        assert hits == 0, (n, hits)


def test_a_ten_point_change_of_a_01_metric_that_leaves_most_questions_unchanged():
    # a true +0.1 of a 0/1 metric at n = 5 gives "every difference 0" 59% of the time: never equivalence
    c = compare(HIT, "A", {f"q{i}": 1.0 for i in range(5)}, "B", {f"q{i}": 1.0 for i in range(5)}, tol=0.02)
    assert c.hypothesis == "within" and c.result.p == 1.0 and c.n_needed == 249


def test_the_interval_holds_its_level_on_sparse_bounded_differences():
    rng = np.random.default_rng(7)
    for n, share, mean in ((30, 0.05, 0.05), (100, 0.02, 0.02), (300, 0.01, -0.01)):
        missed = 0
        for _ in range(300):
            d = np.where(rng.random(n) < share, np.sign(mean), 0.0)
            iv = bounded.interval(d, 1.0)
            missed += not (iv.low <= mean <= iv.high)
        assert missed / 300 <= 0.05, (n, missed)


def test_the_capital_process_by_hand():
    # three differences on [-1, 1]: x = (d + 1) / 2; bets from the values before each one
    d = [0.0, 1.0, -0.5]
    x = [(v + 1) / 2 for v in d]
    alpha, n, m = 0.05, 3, 0.6
    mu, s2, lam = [], [], []
    for t in range(1, n + 1):
        mu.append((0.5 + sum(x[:t])) / (t + 1))
        s2.append((0.25 + sum((x[i] - mu[i]) ** 2 for i in range(t))) / (t + 1))
    prev = [0.25] + s2[:-1]
    lam = [math.sqrt(2 * math.log(2 / alpha) / (n * v)) for v in prev]
    up = math.prod(1 + min(b, 0.75 / m) * (xi - m) for b, xi in zip(lam, x))
    down = math.prod(1 - min(b, 0.75 / (1 - m)) * (xi - m) for b, xi in zip(lam, x))
    got = bounded._bets(np.asarray(x), alpha)
    assert list(got) == pytest.approx(lam)
    assert bounded._log_up(np.asarray(x), got, m) == pytest.approx(math.log(up))
    assert bounded._log_down(np.asarray(x), got, m) == pytest.approx(math.log(down))
    # the interval's ends are where the hedged capital reaches 1 / alpha
    iv = bounded.interval(d, 1.0)
    lo, hi = (iv.low + 1) / 2, (iv.high + 1) / 2
    assert 0.5 * math.exp(bounded._log_up(np.asarray(x), got, lo)) == pytest.approx(1 / alpha, rel=1e-6) or iv.low == -1
    assert 0.5 * math.exp(bounded._log_down(np.asarray(x), got, hi)) == pytest.approx(1 / alpha, rel=1e-6) or iv.high == 1


def test_p_below_alpha_exactly_when_the_interval_is_inside_or_outside_tol():
    rng = np.random.default_rng(1)
    for _ in range(40):
        n = int(rng.integers(50, 600))
        d = np.clip(rng.normal(rng.uniform(-0.05, 0.05), rng.uniform(0.001, 0.2), n), -1, 1)
        tol = float(rng.uniform(0.01, 0.1))
        iv = bounded.interval(d, 1.0)
        assert (bounded.within_p(d, tol, 1.0) < 0.05) == (-tol < iv.low and iv.high < tol)
        assert (bounded.beyond_p(d, tol, 1.0) < 0.05) == (iv.low > tol or iv.high < -tol)


def test_values_outside_the_range_and_unbounded_metrics_are_refused():
    with pytest.raises(bounded.RangeError, match=r"outside \[-1, \+1\].*metric registry's scale"):
        bounded.interval([0.5, 3.0], 1.0)
    with pytest.raises(bounded.RangeError, match="finite positive range"):
        bounded.interval([1.0], math.inf)
    n_claims = "ragchecker/overall/n_response_claims"  # a count: no finite scale
    c = compare(n_claims, "A", {"q1": 3.0, "q2": 4.0}, "B", {"q1": 3.0, "q2": 4.0}, tol=1.0)
    assert c.hypothesis == UNTESTABLE and math.isnan(c.result.p)  # no test: nothing for Holm to count
    v = _direction([[3.0] * 300, [3.0] * 300], "flat", tol=1.0, metric=n_claims)
    assert v.verdict == NOT_TESTABLE and v.steps[0]["test"].startswith("not testable: no known range")


def test_n_for_is_the_first_n_at_which_the_test_passes():
    d = [0.0, 0.01, -0.01, 0.0]
    n = bounded.n_for(d, 0.05, 1.0)
    assert bounded.within_p(np.resize(d, n), 0.05, 1.0) < 0.05 <= bounded.within_p(np.resize(d, n - 1), 0.05, 1.0)
    assert bounded.n_for([0.1, 0.1], 0.05, 1.0) is None  # the mean is beyond tol: never within
    far = [0.3, 0.25]
    m = bounded.n_for(far, 0.05, 1.0, "beyond")
    assert bounded.beyond_p(np.resize(far, m), 0.05, 1.0) < 0.05 <= bounded.beyond_p(np.resize(far, m - 1), 0.05, 1.0)
    v = _direction([[50.0] * 40, [50.0 + 3 * (i % 2) for i in range(40)]], "flat", tol=2.0)  # mean +1.5
    assert v.verdict == SAME_NS and v.n_needed is not None and v.n_needed > 40
    assert v.verdict != REPRODUCED and v.verdict != OPPOSITE_NS
