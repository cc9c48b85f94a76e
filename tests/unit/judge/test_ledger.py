"""The failure ledger's budget category: not attempted is neither scored nor a failure (issue 39)."""

from __future__ import annotations

from ragsweep.judge import ledger

BUDGET = {"stage": "budget", "reason": "budget reached before its generation"}


def test_a_question_the_budget_kept_is_not_attempted_and_voids_only_answer_metrics():
    rec = {"query_id": "q", "failure": BUDGET}
    assert ledger.not_attempted(rec) == "budget reached before its generation"
    assert ledger.generation_failure(rec) is None and ledger.judge_failure(rec) is None
    assert ledger.excluded(rec, "ragchecker") and ledger.excluded(rec, "baseline")
    assert not ledger.excluded(rec, "retrieval")  # retrieval cost nothing and was done
    assert ledger.failures([rec]) == [] and ledger.skipped([rec]) == [{"query_id": "q", "reason": BUDGET["reason"]}]


def test_the_per_metric_ledger_counts_not_attempted_apart():
    recs = [{"query_id": "a"}, {"query_id": "b", "failure": BUDGET}, {"query_id": "c", "error": "HTTP 500"}]
    row = ledger.ledger(recs, {"m": [1.0, float("nan"), float("nan")]}, {"m": "ragchecker"})["m"]
    assert row == {"attempted": 2, "scored": 1, "failed_generation": 1, "failed_judge": 0, "undefined": 0,
                   "not_attempted": 1}
    retrieval = ledger.ledger(recs, {"r": [1.0, 0.5, 1.0]}, {"r": "retrieval"})["r"]
    assert retrieval["scored"] == 3 and retrieval["not_attempted"] == 0
    assert "not_attempted" not in ledger.counts([{"query_id": "a"}])  # only where a budget stopped something
