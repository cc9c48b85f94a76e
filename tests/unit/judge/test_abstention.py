"""A question the documents do not answer (a generated ``unanswerable`` one): its ground truth marks
abstention, and the response is scored on whether it abstains; the metrics that need a
ground-truth point are not applicable (NaN), never 0."""

from __future__ import annotations

import math

import pytest

from ragsweep.judge import ragchecker_metrics as rcm
from ragsweep.judge.abstention import abstains
from ragsweep.judge.metrics.registry import find
from ragsweep.records import ABSTENTION, is_abstention


@pytest.mark.parametrize("text", [
    "I don't know.", "I do not know the answer to that.", "The context does not mention when it was built.",
    "This is not stated in the provided documents.", "The question cannot be answered from the context.",
    "There is no information about that in the text.", "Unknown.", "", "Not enough information to say.",
    "I can’t answer this based on the context.",
])
def test_abstentions_are_recognised(text):
    assert abstains(text)


@pytest.mark.parametrize("text", [
    "It was completed in 1889.", "Paris.", "The tower is 330 metres tall and was built by Gustave Eiffel's company.",
    # an answer that hedges only at the end is an answer
    "The checkpoint runs when the WAL file reaches 1000 pages; the documentation is long and many other details "
    "about locking, readers and writers follow in later sections, which the question does not mention.",
])
def test_answers_are_not_abstentions(text):
    assert not abstains(text)


def _record(response, gt=ABSTENTION):
    # what the judge leaves on a record with no ground-truth claims to check (has_gt is False)
    return {"query_id": "u1", "query": "Who painted the tower in 2030?", "gt_answer": gt, "response": response,
            "retrieved_context": [{"doc_id": "d", "text": "The tower was painted in 1889."}],
            "response_claims": ["claim"], "gt_answer_claims": None,
            "answer2response": None, "response2answer": None,
            "retrieved2response": [["Neutral"]], "retrieved2answer": None}


def test_an_unanswerable_question_scores_the_abstention_and_leaves_the_gt_metrics_out():
    assert is_abstention(ABSTENTION) and not rcm.has_gt({"gt_answer": ABSTENTION})
    right = rcm.compute_example_metrics(_record("I don't know; the documents do not say."))
    wrong = rcm.compute_example_metrics(_record("It was painted by Picasso."))
    assert right["precision"] == right["recall"] == right["f1"] == 100.0
    assert wrong["precision"] == wrong["recall"] == wrong["f1"] == 0.0
    for name in ("claim_recall", "context_precision", "context_utilization", "hallucination", "self_knowledge",
                 "noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant"):
        assert math.isnan(right[name]) and math.isnan(wrong[name]), name
    assert right["faithfulness"] == 0.0  # needs no ground truth: computed as for any question


def test_the_baselines_score_the_abstention():
    f1, rouge = find("baseline/token_f1").per_question, find("baseline/rouge_l").per_question
    assert f1(_record("I don't know.")) == rouge(_record("I don't know.")) == 1.0
    assert f1(_record("Picasso painted it.")) == rouge(_record("Picasso painted it.")) == 0.0
    # an ordinary ground truth is scored as before
    assert f1(_record("It was painted in 1889.", gt="It was painted in 1889.")) == 1.0


def test_an_abstention_without_claims_is_no_judge_failure():
    from ragsweep.judge.ledger import judge_failure

    assert judge_failure(_record("I don't know.")) is None
    broken = {**_record("Paris."), "gt_answer": "Paris is the capital."}  # a real answer whose claims are missing
    assert judge_failure(broken) == "claim extraction failed (ground truth)"
