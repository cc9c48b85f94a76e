"""Results as DataFrames (issue 38): a run's metrics with intervals, its questions with failures
marked, and the report's paired comparison of two runs from Python."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ragsweep.analysis.report.frame import ReportError
from ragsweep.analysis.results import compare, interval_frame, question_frame


def _rec(qid, value, failure=None, **extra):
    r = {"query_id": qid, "query": f"question {qid}", "gt_answer": "gt", "response": f"answer {qid}",
         "scores": {"m/x": value, "m/y": 1.0}}
    if failure:
        r["failure"] = {"stage": "generation", "reason": failure}
        r["scores"] = {"m/x": None, "m/y": None}
    r.update(extra)
    return r


def test_interval_frame_keeps_the_metrics_logged_with_an_interval():
    df = interval_frame({"m/x": 0.5, "m/x/ci_low": 0.25, "m/x/ci_high": 0.75, "m/x/n": 8, "time/load_s": 3.0})
    assert list(df.index) == ["m/x"]
    assert df.loc["m/x"].to_dict() == {"mean": 0.5, "ci_low": 0.25, "ci_high": 0.75, "n": 8}


def test_question_frame_marks_failures_and_leaves_their_metrics_undefined():
    df = question_frame([_rec("q1", 0.5), _rec("q2", 0.0, failure="timeout")])
    assert list(df.columns[:6]) == ["query_id", "question", "gt_answer", "response", "failed", "failure"]
    assert df["failed"].tolist() == [False, True]
    assert df["failure"].isna().tolist() == [True, False] and df.loc[1, "failure"] == "generation: timeout"
    assert df.loc[0, "m/x"] == 0.5 and math.isnan(df.loc[1, "m/x"])


def test_compare_pairs_by_question_and_skips_failed_ones():
    a = SimpleNamespace(name="a", records=[_rec(f"q{i}", 0.2) for i in range(10)])
    b = SimpleNamespace(name="b", records=[_rec(f"q{i}", 0.7) for i in range(9)] + [_rec("q9", 0, failure="x")])
    df = compare(a, b, ["m/x", "m/y"])
    row = df.loc["m/x"]
    assert (row["a"], row["b"], row["n"]) == ("a", "b", 9)  # q9 failed in b: in neither
    assert row["diff"] == pytest.approx(0.5) and row["ci_low"] == pytest.approx(0.5) and row["ci_high"] == pytest.approx(0.5)
    assert row["p"] < 0.01 and row["p_holm"] >= row["p"]
    assert df.loc["m/y", "diff"] == 0.0
    with pytest.raises(ReportError, match="metric 'm/zzz': not in the records of a"):
        compare(a, b, ["m/zzz"])
