"""The typed records (issue #26 item 1): RAGChecker's JSON read and written in one place,
unchanged by a round trip (the shipped RAGChecker fixture files), unknown keys kept on purpose,
known keys of the wrong type named. Renaming a record field is one edit in ragsweep/records.py
plus this test."""

from __future__ import annotations

import json
import math
import re
from dataclasses import fields

import pytest

from support import FIXTURES as SUPPORT_FIXTURES, ROOT
from ragsweep.records import (
    KEYS,
    Chunk,
    Claim,
    Failure,
    QuestionRecord,
    RecordError,
    as_record,
    read_records,
    response_of,
    write_records,
)

FIXTURES = SUPPORT_FIXTURES / "ragchecker"


@pytest.mark.parametrize("name", ["examples_checking_inputs.json", "examples_checking_outputs.json"])
def test_the_shipped_ragchecker_files_round_trip_unchanged(tmp_path, name):
    original = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    recs = read_records(FIXTURES / name)
    assert len(recs) == len(original["results"]) and all(isinstance(r, QuestionRecord) for r in recs)
    out = write_records(tmp_path / name, recs)
    assert json.loads(out.read_text(encoding="utf-8"))["results"] == original["results"]
    first, raw = recs[0], original["results"][0]
    assert first.response == raw["response"] and first.query_id == raw["query_id"]
    assert first.retrieved_context[0] == Chunk(doc_id=raw["retrieved_context"][0]["doc_id"],
                                               text=raw["retrieved_context"][0]["text"])
    if "response_claims" in raw:
        assert [c.to_json() for c in first.response_claims] == raw["response_claims"]
        assert first.answer2response == raw["answer2response"]


def test_unknown_keys_are_kept_as_they_were_and_not_checked():
    d = {"query_id": 6401197308716204890, "query": "q?", "gt_answer": None, "response": "a",
         "retrieved_context": [{"doc_id": "d", "text": "t", "title": "T", "score": 0.5}],
         "generation": {"latency_s": 1.5}, "scores": {"f1": None}, "a_newer_ragchecker_key": [1, 2]}
    rec = QuestionRecord.from_json(d)
    assert rec.query_id == "6401197308716204890"  # ids are text, every digit
    assert rec.extra == {"generation": {"latency_s": 1.5}, "scores": {"f1": None}, "a_newer_ragchecker_key": [1, 2]}
    assert rec.retrieved_context[0].extra == {"title": "T"} and rec.retrieved_context[0].score == 0.5
    back = rec.to_json()
    assert back == {**d, "query_id": "6401197308716204890"}


def test_known_keys_of_the_wrong_type_are_named():
    base = {"query_id": "1", "query": "q", "response": "r", "retrieved_context": []}
    with pytest.raises(RecordError, match="retrieved_context must be a list"):
        QuestionRecord.from_json({**base, "retrieved_context": "one passage"}, "records.json: results[3]")
    with pytest.raises(RecordError, match=r"results\[3\]: response_claims must be a list"):
        QuestionRecord.from_json({**base, "response_claims": "a claim"}, "records.json: results[3]")
    with pytest.raises(RecordError, match="metrics must hold numbers"):
        QuestionRecord.from_json({**base, "metrics": {"f1": "high"}})
    with pytest.raises(RecordError, match="missing 'query'"):
        QuestionRecord.from_json({"query_id": "1"})


def test_claims_failures_and_nan_metrics():
    assert Claim.from_json(["Paris", "capital of", "France"]).text == "Paris capital of France"
    assert Claim.from_json(["Paris", "capital of", "France"]).to_json() == ["Paris", "capital of", "France"]
    rec = QuestionRecord(query_id="q", query="?", metrics={"f1": math.nan, "precision": 0.5},
                         error="HTTP 500")
    assert rec.failed == Failure("generation", "HTTP 500") and not rec.has_gt
    assert rec.to_json()["metrics"] == {"f1": None, "precision": 0.5}  # strict JSON
    assert math.isnan(QuestionRecord.from_json(rec.to_json()).metrics["f1"])
    assert as_record(rec) is rec and response_of(rec.to_json()) == "" == response_of(rec)


def test_every_field_has_its_one_key():
    """A renamed attribute without its KEYS entry (or a new field without one) fails here."""
    assert set(KEYS) == {f.name for f in fields(QuestionRecord)} - {"extra"}


def test_only_records_py_spells_the_response_key():
    """The issue's check: grep -rn '\\["response"\\]\\|\\.get("response")' src/ finds only the one reader/writer."""
    pattern = re.compile(r'\["response"\]|\.get\("response"')
    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src").rglob("*.py") if pattern.search(p.read_text(encoding="utf-8")))
    assert users == ["src/ragsweep/records.py"], users
