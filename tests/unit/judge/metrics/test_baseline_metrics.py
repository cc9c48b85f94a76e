"""Lexical baselines (``ragsweep.judge.metrics.baseline``): hand-computed cases and the NaN rules."""

from __future__ import annotations

import math

import pytest

from ragsweep.judge.metrics import registry
from ragsweep.judge.metrics.baseline import context_overlap, lcs_length, normalize_answer, rouge_l, token_f1


def _rec(response="Paris is in France and has museums.", gt="Paris, France", **kw):
    rec = {"query_id": "q", "query": "Where?", "gt_answer": gt, "response": response,
           "retrieved_context": [{"doc_id": "d", "text": "Paris is the capital of France."}]}
    rec.update(kw)
    return rec


def test_normalisation_is_squads():
    assert normalize_answer("The  Cat, sat on a MAT!") == "cat sat on mat"
    assert normalize_answer("An apple's core") == "apples core"


def test_token_f1_by_hand():
    assert token_f1("The cat sat on the mat.", "A cat sat on a mat") == 1.0
    # pred [paris, is, in, france], gt [paris, france]: P = 2/4, R = 2/2, F1 = 2/3
    assert token_f1("Paris is in France", "Paris, France") == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: pred [yes, yes], gt [yes]: P 1/2, R 1, F1 2/3
    assert token_f1("yes yes", "Yes.") == pytest.approx(2 / 3)
    assert token_f1("Rome", "Paris") == 0.0
    assert math.isnan(token_f1("", "Paris")) and math.isnan(token_f1("The.", "Paris"))


def test_rouge_l_by_hand():
    assert lcs_length("a b c d".split(), "a c d b".split()) == 3
    # pred [cat, was, found, under, bed], gt [cat, was, under, bed]: LCS 4, P 4/5, R 1 -> 8/9
    assert rouge_l("The cat was found under the bed", "The cat was under the bed") == pytest.approx(8 / 9)
    # order matters for ROUGE-L, not for token F1: LCS 1 of 3 -> 1/3
    assert rouge_l("bed under cat", "cat under bed") == pytest.approx(1 / 3)
    assert token_f1("bed under cat", "cat under bed") == 1.0
    assert rouge_l("Rome", "Paris") == 0.0 and math.isnan(rouge_l("Paris", "  "))


def test_context_overlap_by_hand():
    # content tokens of the response: paris, france, museums; the context has paris and france
    assert context_overlap("Paris is in France and has museums.", ["Paris is the capital of France."]) == pytest.approx(2 / 3)
    # with repetition: paris, paris, rome -> 2 of 3 found
    assert context_overlap("Paris Paris Rome", ["Paris.", "", "Lyon"]) == pytest.approx(2 / 3)
    assert math.isnan(context_overlap("Paris", [])) and math.isnan(context_overlap("it is", ["it is"]))


def test_registered_family_and_nan_rules():
    names = {m.name: m for m in registry.all_metrics("baseline")}
    assert set(names) == {"baseline/token_f1", "baseline/rouge_l", "baseline/context_overlap"}
    assert names["baseline/token_f1"].needs_gt and names["baseline/rouge_l"].needs_gt
    assert not names["baseline/context_overlap"].needs_gt
    f1, rl, co = (names[f"baseline/{n}"].per_question for n in ("token_f1", "rouge_l", "context_overlap"))
    rec = _rec()
    # response [paris, is, in, france, and, has, museums] vs gt [paris, france]: P 2/7, R 1
    assert f1(rec) == pytest.approx(2 * (2 / 7) / (2 / 7 + 1))
    assert rl(rec) == pytest.approx(2 * (2 / 7) / (2 / 7 + 1))
    assert co(rec) == pytest.approx(2 / 3)
    # no ground truth: the first two NaN, context overlap still defined
    for gt in (None, "", "   "):
        r = _rec(gt=gt)
        assert math.isnan(f1(r)) and math.isnan(rl(r)) and co(r) == pytest.approx(2 / 3)
    # failed records and empty responses: NaN everywhere
    for r in (_rec(error="timeout"), _rec(failure={"stage": "generation", "reason": "x"}), _rec(response="")):
        assert all(math.isnan(fn(r)) for fn in (f1, rl, co)), r
    assert not math.isnan(f1(_rec(error=None)))  # an empty error field is no failure
    assert math.isnan(co(_rec(retrieved_context=[])))
    from ragsweep.analysis.scoring import score_run  # the one aggregation path

    agg = score_run([rec, _rec(gt=None), _rec(error="x")], ["baseline"]).metrics
    assert agg["baseline/token_f1"] == pytest.approx(f1(rec)) and agg["baseline/context_overlap"] == pytest.approx(2 / 3)
