"""Money in one job (issue 39): which questions a budget is expected to cover, answers whose judging
it stopped, how such a run ends, and what a command may spend kept out of a sweep's signature."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragsweep.judge import ledger
from ragsweep.pipeline import spend
from ragsweep.pipeline.sweep_spend import spending
from ragsweep.rag.generator.budget import Budget, combine
from ragsweep.types import Query


def _job(limit: float | None, spent: float = 0.0) -> SimpleNamespace:
    budget = None
    if limit is not None:
        b = Budget(limit)
        b.settle(0.0, spent)
        budget = combine(b)
    return SimpleNamespace(budget=budget)


DATASET = SimpleNamespace(queries=[Query(f"q{i}", f"question {i}?") for i in range(5)])
COST = {"question 0?": 1.0, "question 1?": 1.0, "question 2?": 0.0, "question 3?": 1.0, "question 4?": 0.0}


def test_the_plan_covers_questions_in_order_while_the_budget_lasts_and_free_ones_always():
    assert spend.plan(_job(None), DATASET, COST) is None  # no budget: everything
    assert spend.plan(_job(10.0), DATASET, COST) == [True] * 5
    # 2.5 left: q0, q1 fit; q3 would not; q2 and q4 are cached work, free
    assert spend.plan(_job(3.0, spent=0.5), DATASET, COST) == [True, True, True, False, True]
    # the largest call's worst case is kept free: only q0 fits
    assert spend.plan(_job(3.0, spent=0.5), DATASET, COST, reserve=1.0) == [True, False, True, False, True]


def test_the_plan_stops_at_the_first_question_that_does_not_fit():
    cost = {"question 0?": 2.0, "question 1?": 0.5, "question 2?": 0.5, "question 3?": 0.5, "question 4?": 0.5}
    assert spend.plan(_job(1.0), DATASET, cost) == [False] * 5  # not the small ones after it: one clean stop


def test_answers_whose_judging_the_budget_stopped_are_not_attempted_not_failed():
    recs = [
        {"query_id": "a", "query": "cut?", "response": "x", "response_claims": None},
        {"query_id": "b", "query": "kept?", "response": "y", "response_claims": None},  # a real judge failure
        {"query_id": "c", "query": "cut?", "failure": {"stage": "generation", "reason": "HTTP 500"}, "error": "e"},
    ]
    assert spend.mark_cut(recs, {"cut?"}) == 1
    assert ledger.not_attempted(recs[0]) and ledger.judge_failure(recs[0]) is None
    assert ledger.judge_failure(recs[1]) == "claim extraction failed (response)"
    assert recs[2]["failure"]["stage"] == "generation"
    counts = ledger.counts(recs)
    assert counts == {"attempted": 2, "answered": 1, "failed_generation": 1, "failed_judge": 1, "not_attempted": 1}
    assert ledger.failed_share(recs) == 1.0  # 2 failures of the 2 attempted: the cut one is not among them


def test_a_run_the_budget_stopped_ends_killed_with_the_reason():
    job = _job(1.0, spent=0.9)
    assert spend.outcome(job, [{"query_id": "a"}]) == ("FINISHED", {})
    status, tags = spend.outcome(job, [{"failure": {"stage": "budget", "reason": "r"}}, {}])
    assert status == "KILLED" and tags["ragsweep.status"] == "budget reached"
    assert tags["ragsweep.budget"].startswith("budget_usd=1 set ($0.9000 spent): 1 question(s) not attempted")


def test_not_attempted_questions_are_never_scored():
    from ragsweep.analysis.scoring import score_run

    recs = [{"query_id": "a", "query": "q", "gt_answer": "g", "response": "g", "retrieved_context": [],
             "metrics": {}},
            {"query_id": "b", "query": "q", "gt_answer": "g", "response": "", "retrieved_context": [], "metrics": {},
             "failure": {"stage": "budget", "reason": "budget reached before its generation"}}]
    scores = score_run(recs, {"baseline"})
    assert scores.metrics["baseline/token_f1/n"] == 1 and scores.metrics["ledger/not_attempted"] == 1
    assert scores.ledger["baseline/token_f1"]["not_attempted"] == 1 and scores.ledger["baseline/token_f1"]["attempted"] == 1
    assert scores.artifact()["not_attempted"] == [{"query_id": "b", "reason": "budget reached before its generation"}]


@pytest.mark.parametrize("override, spends", [
    ("sweep.budget_usd=5", True), ("budget_usd=2", True), ("+sweep.dry_run=true", True),
    ("estimate.claims_per_answer=3", True), ("retriever.top_k=1,2", False), ("generator.price_per_1k_tokens=1", False),
])
def test_what_a_command_may_spend_is_not_in_the_sweeps_signature(override, spends):
    assert spending(override) is spends
