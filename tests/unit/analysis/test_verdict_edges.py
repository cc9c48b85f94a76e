"""Issue 50: verdicts that hold at the edges. Each test fails on the statistics before the fix."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsweep.analysis import bounded
from ragsweep.analysis.report.directions import NOT_TESTABLE, REPRODUCED, VERDICTS
from ragsweep.analysis.report.paired import UNTESTABLE, compare

from test_verdicts_every_n import _direction

CR = "ragchecker/retriever/claim_recall"  # registered: 0-100
N_CLAIMS = "ragchecker/overall/n_response_claims"  # registered without a finite scale: a count


# -- 1. a metric without a known range is "not testable", never run on a guessed range -------------
@pytest.mark.parametrize("metric", ["custom/latency_score", "ragchecker/custom/claims_per_answer"])
def test_a_metric_the_registry_does_not_know_is_not_testable(metric):
    # before: range guessed as 1 (100 for ragchecker/*); 300 questions whose differences are all 0 -
    # what a metric with rare large jumps shows in about a quarter of draws - were REPRODUCED
    v = _direction([[0.5] * 300, [0.5] * 300], "flat", metric=metric)
    assert v.verdict == NOT_TESTABLE and v.verdict in VERDICTS
    assert "not testable: no known range" in v.detail and metric in v.detail
    assert v.p is None and v.n_needed is None and not v.no_finite_n
    line = v.line()
    assert "NOT TESTABLE" in line and "not testable" in line
    assert "no finite n" not in line and "NOT SIGNIFICANT" not in line and "questions for" not in line
    # with a tol given, too: the guess was the range, not the tol
    assert _direction([[0.5] * 300, [0.5] * 300], "flat", tol=0.5, metric=metric).verdict == NOT_TESTABLE


def test_a_rare_large_jump_metric_is_never_called_equivalent_on_a_guessed_range():
    # the simulation: differences 0 except a jump of +5 on 0.5% of questions (true mean 0.025
    # > tol 0.02), n = 300; before: REPRODUCED in about a quarter of draws (those without a jump)
    rng = np.random.default_rng(50)
    for _ in range(40):
        d = np.where(rng.random(300) < 0.005, 5.0, 0.0)
        a = {f"q{i}": 1.0 for i in range(300)}
        c = compare("custom/jumpy", "A", a, "B", {f"q{i}": 1.0 + x for i, x in enumerate(d)}, tol=0.02)
        assert c.hypothesis == UNTESTABLE and math.isnan(c.result.p)


# -- 2. a tol at or above the range, or values outside it, never short-circuit to p = 0 ----------
def test_a_tol_at_or_above_the_range_is_refused_not_p_zero():
    # before: within_p returned 0.0 from one question, against "no verdict below 6 questions"
    for tol in (1.0, 2.0):
        with pytest.raises(bounded.RangeError, match=rf"tol {tol:g} is at or above the range 1.*tests nothing"):
            bounded.within_p([0.0], tol, 1.0)
        with pytest.raises(bounded.RangeError, match="at or above the range"):
            bounded.beyond_p([0.0], tol, 1.0)
    for tol in (0.5, 0.9, 0.999999):  # just below the range: valid, and never from fewer than 4 questions
        assert bounded.within_p([0.0] * 3, tol, 1.0) >= 0.05 and bounded.n_for([0.0], tol, 1.0) >= 4
    one = _direction([[50.0], [50.0]], "flat", tol=100.0)  # one question, tol = the whole range of CR
    assert one.verdict == NOT_TESTABLE and one.verdict != REPRODUCED
    assert "tol 100 is at or above the range 100" in one.detail
    assert one.steps[0]["test"].startswith("not testable: tol 100")


def test_values_outside_the_range_are_refused_whatever_the_tol():
    # before: a tol >= range returned 0 before the values were looked at
    with pytest.raises(bounded.RangeError, match=r"outside \[-1, \+1\]"):
        bounded.within_p([5.0], 2.0, 1.0)
    with pytest.raises(bounded.RangeError, match=r"outside \[-1, \+1\]"):
        bounded.within_p([5.0, 0.0], 0.5, 1.0)
    with pytest.raises(bounded.RangeError, match=r"outside \[-1, \+1\]"):
        bounded.n_for([5.0], 0.5, 1.0)
    out = _direction([[0.0] * 10, [300.0] * 10], "flat", tol=2.0)  # differences of 300 on a 0-100 metric
    assert out.verdict == NOT_TESTABLE and "outside [-100, +100]" in out.detail


# -- 3. an untestable step never reads as "not significant ... no finite n"; a count never "<= inf" --
def test_a_count_metric_is_not_testable_and_prints_no_infinite_tol():
    v = _direction([[3.0] * 300, [3.0] * 300], "flat", metric=N_CLAIMS)
    assert v.verdict == NOT_TESTABLE
    assert "inf" not in v.expected and v.expected == "barely moves (no tol: no known range)"
    line = v.line()
    assert "inf" not in line and "no finite n" not in line and "NOT SIGNIFICANT" not in line
    assert v.steps[0]["test"].startswith("not testable: no known range")
    from ragsweep.analysis.report.directions import directions_markdown

    class Runs:
        experiment, parent_id, parent_name, children = "e", "p", "parent", []

    md = directions_markdown([v], Runs(), "the spec")
    assert "**NOT TESTABLE**" in md and "not testable: no known range" in md and "<= inf" not in md
    assert "1 not testable" in md


# -- 5. a NaN among the values is an error that names it, never mean NaN and p = 1 ----------------
def test_a_nan_among_the_values_is_an_error_that_says_so():
    # before: mean NaN, interval [-1, 1], within_p = beyond_p = 1, silently
    for call in (lambda: bounded.interval([0.1, math.nan, 0.2], 1.0),
                 lambda: bounded.within_p([0.1, math.nan], 0.5, 1.0),
                 lambda: bounded.beyond_p([0.1, math.nan], 0.5, 1.0),
                 lambda: bounded.greater_p([0.1, math.nan], 1.0)):
        with pytest.raises(bounded.MissingValueError, match=r"1 of \d values are NaN: leave the failed or undefined"):
            call()
    # the report's callers leave a failed question out (and count it in n) before the interval
    a = {f"q{i}": 50.0 for i in range(40)}
    b = dict(a, q3=math.nan)
    c = compare(CR, "A", a, "B", b, tol=2.0)
    assert c.result.n == 39 and math.isfinite(c.result.low) and math.isfinite(c.result.p)


# -- 3. an observed difference of exactly 0 has no direction ---------------------------------------
NO_DIFF = "NO DIFFERENCE, NOT SIGNIFICANT"


@pytest.mark.parametrize("levels, expect", [
    ([[50.0, 60.0], [50.0, 60.0]], {"higher_for": 0.1}),  # `ragsweep-reproduce --only ragchecker_prompt --limit 2`: both questions tie
    ([[50.0, 60.0], [50.0, 60.0]], {"lower_for": 0.1}),
    ([[40.0] * 8, [40.0] * 8, [40.0] * 8], "increasing"),
    ([[40.0] * 8, [40.0] * 8, [40.0] * 8], "decreasing"),
    ([[40.0] * 5, [45.0] * 5, [40.0] * 5], "increasing"),  # +5 then -5: the steps cancel, no net direction
    ([[0.3] * 5, [0.1 + 0.2] * 5], "decreasing"),  # a difference of 5.6e-17 is rounding, not a direction
])
def test_a_difference_of_exactly_zero_is_neither_direction(levels, expect):
    # before: every tie read "OPPOSITE DIRECTION, NOT SIGNIFICANT" (net > 0 failed, so "opposite")
    from types import SimpleNamespace

    from ragsweep.analysis.report.directions import directions_markdown

    v = _direction(levels, expect)
    assert v.verdict == NO_DIFF and v.verdict in VERDICTS
    assert "no difference observed" in v.detail
    line = v.line()
    assert "OPPOSITE" not in line and "SAME DIRECTION" not in line and NO_DIFF in line
    assert "no difference observed" in line
    runs = SimpleNamespace(experiment="x", parent_id="p", parent_name="p", children=[])
    md = directions_markdown([v], runs, "test")
    assert f"**{NO_DIFF}**" in md and "0 opposite direction, not significant, 1 no difference, not significant" in md
    assert "- NO DIFFERENCE, NOT SIGNIFICANT:" in md  # the rules say what it means


def test_a_non_zero_difference_keeps_its_direction():
    one_down = _direction([[50.0] * 8, [50.0] * 7 + [49.0]], "increasing")  # -0.125: opposite, however small
    assert one_down.verdict == "OPPOSITE DIRECTION, NOT SIGNIFICANT" and one_down.n_needed is not None
    one_up = _direction([[50.0] * 8, [50.0] * 7 + [51.0]], "increasing")
    assert one_up.verdict == "SAME DIRECTION, NOT SIGNIFICANT"
    # higher for 0.1: above 0.0, equal to 0.2 - the smallest step is 0, not the paper's direction nor the opposite
    tie = _direction([[40.0] * 8, [45.0] * 8, [45.0] * 8], {"higher_for": 0.1})
    assert tie.verdict == NO_DIFF and "0.2" in tie.detail and tie.no_finite_n
    below = _direction([[40.0] * 5, [45.0] * 5, [45.5] * 5], {"higher_for": 0.1})
    assert below.verdict == "OPPOSITE DIRECTION, NOT SIGNIFICANT"


# -- a metric that does not exist for some systems (issue 50: RAGBench's case study) -------------
def _case_study(metric: str, rel_by_prompt: dict, failed: frozenset = frozenset(), n: int = 12):
    """A 2 retrievers x 3 prompts sweep; ``rel_by_prompt[prompt](retriever, i)``: question i's value
    (None: undefined, as TRACe is for the closed-book prompt); ``failed``: (retriever, prompt) whose
    every question failed."""
    import pandas as pd

    from ragsweep.analysis.report import check_direction
    from ragsweep.analysis.report.paired import adjust
    from ragsweep.analysis.report.directions import decide

    recs, rows = {}, []
    for r in ("tfidf", "dense"):
        for p, f in rel_by_prompt.items():
            rid = f"{r}-{p}"
            bad = (r, p) in failed
            recs[rid] = [{"query_id": f"q{i}", "scores": {metric: None if bad else f(r, i)},
                          **({"failure": {"stage": "generation", "reason": "HTTP 500"}} if bad else {})} for i in range(n)]
            rows.append({"run_id": rid, "run_name": rid, "retriever": r, "prompt": p})
    df = pd.DataFrame(rows)

    def direction(param, expect):
        v = check_direction(df, {"metric": metric, "param": param, "expect": expect}, recs)
        adjust(v.comparisons)
        return decide(v)

    return direction


def test_a_closed_book_system_leaves_a_retriever_level_mean_instead_of_voiding_it():
    # before: TRACe relevance is undefined for prompt=no_context, so every retriever level held a
    # system without values and the case study's two relevance directions were NO DATA
    rel = {"no_context": lambda r, i: None,
           "short": lambda r, i: (0.7 if r == "dense" else 0.5) + 0.01 * (i % 3),
           "long": lambda r, i: (0.72 if r == "dense" else 0.52) + 0.01 * (i % 2)}
    v = _case_study("trace/relevance", rel)("retriever", {"higher_for": "dense"})
    assert v.verdict == REPRODUCED and v.n == 12
    means = {x[0]: round(x[1], 3) for x in v.values}  # each retriever's mean over its two RAG prompts
    assert means == {r: round(np.mean([b + 0.01 * (i % 3) for i in range(12)] + [b + 0.02 + 0.01 * (i % 2) for i in range(12)]), 3)
                     for r, b in (("tfidf", 0.5), ("dense", 0.7))}


def test_a_prompt_level_where_the_metric_does_not_exist_is_left_out_and_said():
    util = {"no_context": lambda r, i: None, "short": lambda r, i: 0.1 + 0.01 * (i % 4),
            "long_cot": lambda r, i: 0.3 + 0.01 * (i % 3)}
    v = _case_study("trace/utilization", util)("prompt", {"higher_for": "long_cot"})
    assert v.verdict == REPRODUCED and [s["comparison"] for s in v.steps] == ["short -> long_cot"]
    assert "left out: no_context" in v.observed and "undefined for every question" in v.observed
    from ragsweep.analysis.report.directions import directions_markdown

    from types import SimpleNamespace

    runs = SimpleNamespace(experiment="x", parent_id="p", parent_name="p", children=[])
    row = next(ln for ln in directions_markdown([v], runs, "test").splitlines() if ln.startswith("| trace/utilization"))
    assert "left out: no_context, where the metric is undefined for every question" in row  # said on the page's row


def test_failed_work_is_never_taken_for_a_metric_that_does_not_exist():
    # the same shape, but the dense short-prompt system failed on every question: it is not "undefined
    # by design", so it keeps its level from counting those questions, and nothing is decided on it
    rel = {"short": lambda r, i: (0.7 if r == "dense" else 0.5) + 0.01 * (i % 3),
           "long": lambda r, i: (0.72 if r == "dense" else 0.52) + 0.01 * (i % 2)}
    v = _case_study("trace/relevance", rel, failed=frozenset({("dense", "short")}))("retriever", {"higher_for": "dense"})
    assert v.verdict != REPRODUCED and "undefined for dense" in v.detail
    util = {"no_context": lambda r, i: 0.2, "short": lambda r, i: 0.1, "long_cot": lambda r, i: 0.3}
    v = _case_study("trace/utilization", util, failed=frozenset({("tfidf", "no_context"), ("dense", "no_context")}))(
        "prompt", {"higher_for": "long_cot"})
    assert "left out" not in v.observed and "undefined for no_context" in v.detail


def test_a_figure_cell_pools_systems_as_a_level_does():
    # the figure's bar for a retriever level and the verdict's level value are one pooling: before,
    # the bar held no value wherever a closed-book system shared the level
    import pandas as pd

    from ragsweep.analysis.report.paired import cell_interval, level_values

    recs = {"closed": [{"query_id": f"q{i}", "scores": {"trace/relevance": None}} for i in range(8)],
            "short": [{"query_id": f"q{i}", "scores": {"trace/relevance": 0.5 + 0.01 * i}} for i in range(8)],
            "long": [{"query_id": f"q{i}", "scores": {"trace/relevance": 0.6}} for i in range(8)]}
    df = pd.DataFrame({"run_id": list(recs), "retriever": ["tfidf"] * 3})
    iv = cell_interval(df, "trace/relevance", recs)
    level = level_values(df, "retriever", "trace/relevance", recs)["tfidf"]
    assert iv.n == 8 and iv.mean == pytest.approx(np.mean(list(level.values())))
    assert iv.mean == pytest.approx(np.mean([(0.5 + 0.01 * i + 0.6) / 2 for i in range(8)]))
