"""Issue 34, "Also": the details around the verdicts, each on the issue's input."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.analysis import stats


def test_one_question_with_a_difference_has_a_finite_power_n():
    # before: n_for_power returned None below two questions, printed as "no finite n"
    assert stats.n_for_power([12.5]) == stats.min_n() == 6
    assert stats.n_for_power([12.5], sided=1) == 5
    assert stats.n_for_power([0.0]) is None and stats.n_for_power([]) is None
    from test_verdicts_every_n import _direction

    v = _direction([[40.0], [52.5]], "increasing")
    assert v.n_needed == 6 and not v.no_finite_n and "~6 questions for 80% power" in v.line()


def test_a_failed_judge_without_ground_truth_leaves_token_f1_undefined_not_failed():
    from ragsweep.judge import ledger
    from ragsweep.judge.metrics.registry import find, values

    recs = [{"query_id": "a", "response": "paris", "gt_answer": None, "trace": {"annotation_failed": True}},
            {"query_id": "b", "response": "paris", "gt_answer": "paris"}]
    ledger.mark_judge_failures(recs)
    assert recs[0]["failure"]["stage"] == "judge"
    names = ("baseline/token_f1", "trace/adherence_rate")
    vals = {n: values(find(n), recs) for n in names}
    out = ledger.ledger(recs, vals, {n: find(n).family for n in names})
    assert out["baseline/token_f1"] == {"attempted": 2, "scored": 1, "failed_generation": 0, "failed_judge": 0, "undefined": 1,
                                         "not_attempted": 0}
    assert out["trace/adherence_rate"]["failed_judge"] == 1  # a metric the judge computes: failed


def test_early_stopped_sign_flip_p_is_500_over_the_patterns_drawn_to_the_500th_hit():
    rng = np.random.default_rng(2)
    d = rng.normal(size=40)  # p far above 0.003: drawing stops early
    p, exact = stats.sign_flip_p(d, seed=5)
    assert not exact
    # replay the same seeded patterns and find the 500th that reaches |sum d|
    m, obs = np.abs(d), abs(d.sum())
    gen = np.random.default_rng(5)
    k = max(256, (1 << 20) // d.size)
    signs = (gen.random((k, d.size)) < 0.5) * 2.0 - 1.0
    hit = np.abs(signs @ m) >= obs - stats.REL_TOL * m.sum()
    drawn = int(np.flatnonzero(hit)[stats.STOP_HITS - 1]) + 1
    assert p == pytest.approx(stats.STOP_HITS / drawn, rel=1e-12)


def test_the_rules_text_names_hoeffdings_bound_beside_the_flips_floor():
    from ragsweep.analysis.report.paired import RULES

    assert "smallest p is 5e-06, or Hoeffding's bound on the exact p where that is smaller" in RULES
    assert stats.sign_flip_p([0.5] * 40)[0] < 5e-6  # what the bound allows


def test_the_directions_docstring_uses_the_verdict_names():
    from ragsweep.analysis.report import directions

    doc = directions.__doc__
    for name in directions.VERDICTS:
        assert name in doc.replace("\n", " ")
    assert "NOT REPRODUCED" not in doc
