"""The summary ragsweep-questions prints: what the evidence line says when no answerable question survived."""

from __future__ import annotations

from pathlib import Path

from ragsweep.pipeline.questions.generate import REASONS
from ragsweep.pipeline.questions.output import report


def _counts(kept: dict[str, int], no_evidence: int) -> dict[str, int]:
    total = sum(kept.values()) + no_evidence
    c = {"candidates": total, "kept": sum(kept.values()), "surplus": 0, "dropped": no_evidence}
    left = total
    for r in REASONS:
        c[f"dropped_{r}"] = no_evidence if r == "no_evidence" else 0
        left -= c[f"dropped_{r}"]
        c[f"after_{r}"] = left
    c.update({f"kept_{k}": v for k, v in kept.items()})
    return c


def _report(kept: dict[str, int], spans: int) -> str:
    return report("files", _counts(kept, 7), 6, 0, 60.0, Path("q.jsonl"), spans, {"model": "m"}, [], "", "")


def test_a_set_of_unanswerable_questions_only_says_it_measures_abstention():
    text = _report({"unanswerable": 2}, 0)
    assert "no answerable question was kept, so the set measures abstention only" in text
    assert "every one of the 0" not in text
    assert "2 unanswerable ones have none" in text


def test_answerable_questions_are_counted_with_their_spans():
    text = _report({"single": 3, "unanswerable": 1}, 4)
    assert "every one of the 3 answerable questions has located spans (4 in all)" in text
    assert "abstention only" not in text
