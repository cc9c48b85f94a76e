"""Issue 34, item 3: paired prediction-powered intervals that cover when two systems differ on few
questions (before: PPI++'s CLT interval on the differences covered 0.64-0.74 at 100 yes/no labels
where B differed on ~1% of the questions)."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.analysis import ppi


def _pair(rng: np.random.Generator, N: int = 1000, share: float = 0.01):
    """System A: yes/no labels (85% yes) and a judge that sees them through noise; system B: A's
    answers except on ``share`` of the questions, where both the label and the judge's value flip."""
    ya = (rng.random(N) < 0.85).astype(float)
    fa = np.clip(0.6 * ya + 0.2 + rng.normal(0, 0.15, N), 0, 1)
    moved = rng.random(N) < share
    yb = np.where(moved, 1 - ya, ya)
    fb = np.where(moved, np.clip(0.6 * yb + 0.2 + rng.normal(0, 0.15, N), 0, 1), fa)
    return ya, fa, yb, fb


def _dicts(v: np.ndarray, ids=None) -> dict[str, float]:
    return {f"q{i}": float(v[i]) for i in (range(v.size) if ids is None else ids)}


def test_paired_intervals_cover_sparse_yes_no_differences_at_the_minimum_labels():
    rng = np.random.default_rng(34)
    draws, covered, sparse = 200, 0, 0
    for _ in range(draws):
        ya, fa, yb, fb = _pair(rng)
        lab = rng.choice(ya.size, ppi.MIN_LABELS_BINARY, replace=False)
        res, est = ppi.paired(_dicts(fa), _dicts(ya, lab), _dicts(fb), _dicts(yb, lab))
        truth = float((yb - ya).mean())
        covered += res.low <= truth <= res.high
        sparse += est.method == ppi.SPARSE_METHOD
    assert covered / draws >= 0.93, covered
    assert sparse == draws  # ~1 labelled difference of 100 is non-zero: never enough for the CLT interval


def test_the_clt_interval_is_kept_where_enough_labelled_differences_are_not_zero():
    rng = np.random.default_rng(3)
    ya, fa, yb, fb = _pair(rng, share=0.3)
    lab = rng.choice(ya.size, 100, replace=False)
    res, est = ppi.paired(_dicts(fa), _dicts(ya, lab), _dicts(fb), _dicts(yb, lab))
    assert np.count_nonzero((yb - ya)[lab]) >= ppi.MIN_NONZERO and est.method == ppi.METHOD
    assert est.p is None and res.p == pytest.approx(ppi.p_value(est))


def test_few_nonzero_differences_use_the_labels_betting_interval_and_its_p():
    from ragsweep.analysis import bounded

    y = np.zeros(100)
    y[:3] = 1.0  # three labelled questions where B is better, 97 where the systems agree
    f = y * 0.5
    est = ppi.paired_mean(y, f, np.zeros(400))
    iv = bounded.interval(y, 1.0)
    assert est.method == ppi.SPARSE_METHOD and (est.mean, est.low, est.high) == pytest.approx((0.03, iv.low, iv.high))
    assert est.low < 0 < est.high and ppi.p_value(est) > 0.05  # 3 of 100 does not show a difference
    clt = ppi.mean(y, f, np.zeros(400), minimum=2)
    assert clt.high - clt.low < (est.high - est.low) / 2  # what the CLT claimed: far narrower


def test_a_report_step_decided_by_sparse_labels_says_so():
    from ragsweep.analysis.labels.hook import SPARSE_METHOD, Judged
    from ragsweep.analysis.report.paired import compare

    metric = "trace/adherence_rate"  # 0..1, yes/no label "supported"
    judge = {f"q{i}": 0.8 for i in range(300)}
    human_a = {f"q{i}": 1.0 for i in range(100)}
    human_b = {f"q{i}": (0.0 if i == 0 else 1.0) for i in range(100)}
    a, b = Judged(judge, human_a), Judged(dict(judge), human_b)
    c = compare(metric, "A", a, "B", b)
    assert c.method == SPARSE_METHOD and c.result.n == 100 and c.result.low < -0.01 < 0 < c.result.high
    flat = compare(metric, "A", a, "B", b, tol=0.02)
    assert flat.method == SPARSE_METHOD and flat.hypothesis == "within" and flat.result.p > 0.5 and flat.n_needed > 100
    assert "labelled (labels, betting)" in " ".join(flat.row())


def test_ppi_md_states_the_coverage_at_the_labels_the_user_has():
    from ragsweep.analysis.labels import Label
    from ragsweep.analysis.labels.estimate import estimate, markdown

    rng = np.random.default_rng(5)
    metric = "trace/adherence_rate"
    ya, fa, yb, fb = _pair(rng, N=300)
    recs = {rid: [{"query_id": f"q{i}", "scores": {metric: float(f[i])}} for i in range(300)]
            for rid, f in (("ra", fa), ("rb", fb))}
    lab = [Label(rid, f"q{i}", "supported", float(y[i])) for rid, y in (("ra", ya), ("rb", yb)) for i in range(120)]
    md = markdown(estimate([("ra", "A"), ("rb", "B")], recs, lab, [f"q{i}" for i in range(120)]))
    assert "coverage of the 95% interval at these labels" in md
    assert "measured 0.935-0.98 at 120 yes/no labels" in md  # each system: the single-system CLT interval
    pair = next(ln for ln in md.splitlines() if ln.startswith("| trace/adherence_rate (supported) | A → B"))
    assert ppi.SPARSE_METHOD in pair and "valid whatever the distribution" in pair
    assert ppi.coverage_note(60, False, False, ppi.METHOD) == "measured 0.91-0.93 at 60 graded labels"
    assert ppi.coverage_note(40, False, False, ppi.METHOD) == "no interval below the minimum"
