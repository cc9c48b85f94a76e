"""The typed records of one question: :class:`QuestionRecord`, :class:`Chunk`, :class:`Claim`,
:class:`Failure`. On disk they stay RAGChecker's JSON (``{"results": [record, ...]}``), read and
written here only: :meth:`QuestionRecord.from_json` / :meth:`QuestionRecord.to_json` (and
:func:`read_records` / :func:`write_records` for a file) are the one place that spells the keys.

Build one::

    from ragsweep.records import Chunk, Failure, QuestionRecord
    rec = QuestionRecord(query_id="q1", query="Who?", gt_answer="Ada", response="Ada Lovelace",
                         retrieved_context=[Chunk(doc_id="d1", text="Ada Lovelace wrote ...")])
    rec.failure = Failure(stage="generation", reason="HTTP 500")   # a failed question

Read one (a dict from a records file, a RAGChecker file, the pipeline)::

    rec = QuestionRecord.from_json(d)          # or: as_record(d), which also takes a record
    rec.response, rec.retrieved_context[0].text, rec.response_claims[0].text, rec.metrics["f1"]

Write the file::

    write_records("records.json", [rec, ...])  # {"results": [...]} in RAGChecker's schema
    recs = read_records("records.json")        # list[QuestionRecord]

Unknown keys: a key this module does not know (ragsweep's ``generation``, ``prompt``, ``trace``,
``scores`` ..., or a newer RAGChecker's) is kept, untouched, in ``extra`` and written back as it
was, so reading and writing a file never loses a field; its value is not checked. A known key of
the wrong type raises :class:`RecordError` naming the key. Renaming a field is one edit here (the
attribute and, if the file's key changes too, its entry in ``KEYS``) plus the schema test
(``tests/contract/test_records.py``); a type checker (``mypy``) then lists every user of the old name.

Dataclasses, not pydantic, measured (``python experiments/benchmarks/bench_records.py``, the shipped
RAGChecker fixture, 1,000 read + write round trips, median of 5, on a shared 2-core machine):
dataclasses 257 us per record, equivalent pydantic v2 models 101 us; importing this module 0.17 s,
pydantic 0.30 s. Pydantic is faster per record, but a run reads and writes its records once or
twice (1,000 questions: 0.26 s against 0.10 s, beside minutes of generation), so speed does not
decide; dataclasses do: a type checker reads them without a plugin (mypy needs pydantic's for its
models), the core takes no validation framework as an API, and the checks the records need (the
types of the known keys, errors that name the key and the record) are the few lines of
:meth:`QuestionRecord.from_json`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union

from ragsweep.errors import DataError

#: a claim as RAGChecker writes it: a sentence, or a [subject, predicate, object] triplet
ClaimJSON = Union[str, list]
#: an entailment label ("Entailment", "Neutral", "Contradiction") or None where the check failed
Label = Union[str, None]


class RecordError(DataError):
    """A record whose known key has the wrong type; the message names the key and the record."""


#: attribute -> the key in RAGChecker's JSON (the file's spelling; an attribute's name may differ)
KEYS: dict[str, str] = {
    "query_id": "query_id",
    "query": "query",
    "gt_answer": "gt_answer",
    "response": "response",
    "retrieved_context": "retrieved_context",
    "response_claims": "response_claims",
    "gt_answer_claims": "gt_answer_claims",
    "answer2response": "answer2response",
    "response2answer": "response2answer",
    "retrieved2response": "retrieved2response",
    "retrieved2answer": "retrieved2answer",
    "metrics": "metrics",
    "failure": "failure",
    "error": "error",
}


@dataclass
class Chunk:
    """One retrieved chunk (``retrieved_context[i]``): RAGChecker's ``doc_id`` and ``text``, plus
    ragsweep's ``chunk_id``, ``score`` and character offsets where the pipeline knows them."""

    doc_id: str
    text: str
    chunk_id: str | None = None
    score: float | None = None
    start: int | None = None
    end: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _OPTIONAL = ("chunk_id", "score", "start", "end")

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str, where: str = "chunk") -> "Chunk":
        if isinstance(d, str):  # a bare passage (some RAGChecker inputs)
            return cls(doc_id="", text=d, extra={"_bare": True})
        if not isinstance(d, Mapping):
            raise RecordError(f"{where}: a retrieved chunk must be an object with doc_id and text, got {type(d).__name__}")
        known = {"doc_id", "text", *cls._OPTIONAL}
        return cls(doc_id="" if d.get("doc_id") is None else str(d.get("doc_id")), text=str(d.get("text") or ""),
                   chunk_id=d.get("chunk_id"), score=d.get("score"), start=d.get("start"), end=d.get("end"),
                   extra={k: v for k, v in d.items() if k not in known})

    def to_json(self) -> dict[str, Any] | str:
        if self.extra.get("_bare"):
            return self.text
        out: dict[str, Any] = {"doc_id": self.doc_id, "text": self.text}
        out.update({k: getattr(self, k) for k in self._OPTIONAL if getattr(self, k) is not None})
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Claim:
    """One claim: a sentence, or RAGChecker's ``[subject, predicate, object]`` triplet."""

    text: str
    triplet: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, c: "ClaimJSON | tuple") -> "Claim":
        if isinstance(c, (list, tuple)):  # checked as its parts joined by spaces (empty parts left out)
            parts = tuple(str(x) for x in c)
            return cls(text=" ".join(p.strip() for p in parts if p.strip()), triplet=parts)
        return cls(text="" if c is None else str(c))

    def to_json(self) -> ClaimJSON:
        return list(self.triplet) if self.triplet is not None else self.text


@dataclass(frozen=True)
class Failure:
    """Why a question was not scored: the ``stage`` (generation, judge, ...) and the ``reason``."""

    stage: str
    reason: str

    @classmethod
    def from_json(cls, d: Any) -> "Failure | None":
        if isinstance(d, Mapping) and d.get("reason"):
            return cls(stage=str(d.get("stage") or "unknown"), reason=str(d["reason"]))
        return None

    def to_json(self) -> dict[str, str]:
        return {"stage": self.stage, "reason": self.reason}


def _claims(v: Any, key: str, where: str) -> list[Claim] | None:
    if v is None:
        return None
    if not isinstance(v, list):
        raise RecordError(f"{where}: {key} must be a list of claims or null, got {type(v).__name__}")
    return [Claim.from_json(c) for c in v]


def _labels(v: Any, key: str, where: str, depth: int) -> Any:
    if v is None:
        return None
    if not isinstance(v, list) or (depth == 2 and not all(isinstance(row, list) or row is None for row in v)):
        raise RecordError(f"{where}: {key} must be a {'list of lists' if depth == 2 else 'list'} of labels or null")
    return [list(row) if isinstance(row, list) else row for row in v] if depth == 2 else list(v)


def _number(v: Any) -> float:
    """A metric value: null (RAGChecker writes NaN as null) reads as NaN."""
    return math.nan if v is None else float(v)


@dataclass
class QuestionRecord:
    """One question through a RAG system and its judge, in RAGChecker's schema (the matrices'
    orientation: :mod:`ragsweep.judge.ragchecker_metrics`). Fields the run has not reached
    yet are None (claims, matrices) or empty (metrics); ``extra`` keeps every other key."""

    query_id: str
    query: str
    gt_answer: str | None = None
    response: str = ""
    retrieved_context: list[Chunk] = field(default_factory=list)
    response_claims: list[Claim] | None = None
    gt_answer_claims: list[Claim] | None = None
    answer2response: list[Label] | None = None
    response2answer: list[Label] | None = None
    retrieved2response: list[list[Label]] | None = None
    retrieved2answer: list[list[Label]] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    failure: Failure | None = None
    error: str | None = None  # the generation's error message (RAGChecker has none; ragsweep's)
    extra: dict[str, Any] = field(default_factory=dict)

    # -- the one reader ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "record") -> "QuestionRecord":
        """A record from its JSON object (keys :data:`KEYS`; others kept in ``extra``)."""
        if not isinstance(d, Mapping):
            raise RecordError(f"{where}: a record must be a JSON object, got {type(d).__name__}")
        k = KEYS
        if k["query"] not in d:
            raise RecordError(f"{where}: missing {k['query']!r} (every record needs the question)")
        ctx = d.get(k["retrieved_context"]) or []
        if not isinstance(ctx, list):
            raise RecordError(f"{where}: {k['retrieved_context']} must be a list of chunks, got {type(ctx).__name__}")
        metrics = d.get(k["metrics"]) or {}
        if not isinstance(metrics, Mapping):
            raise RecordError(f"{where}: {k['metrics']} must be an object of numbers, got {type(metrics).__name__}")
        try:
            values = {str(n): _number(v) for n, v in metrics.items()}
        except (TypeError, ValueError):
            raise RecordError(f"{where}: {k['metrics']} must hold numbers or null") from None
        gt = d.get(k["gt_answer"])
        return cls(
            query_id=str(d.get(k["query_id"], "")),
            query=str(d[k["query"]]),
            gt_answer=None if gt is None else str(gt),
            response=str(d.get(k["response"]) or ""),
            retrieved_context=[Chunk.from_json(c, f"{where}.{k['retrieved_context']}[{i}]") for i, c in enumerate(ctx)],
            response_claims=_claims(d.get(k["response_claims"]), k["response_claims"], where),
            gt_answer_claims=_claims(d.get(k["gt_answer_claims"]), k["gt_answer_claims"], where),
            answer2response=_labels(d.get(k["answer2response"]), k["answer2response"], where, 1),
            response2answer=_labels(d.get(k["response2answer"]), k["response2answer"], where, 1),
            retrieved2response=_labels(d.get(k["retrieved2response"]), k["retrieved2response"], where, 2),
            retrieved2answer=_labels(d.get(k["retrieved2answer"]), k["retrieved2answer"], where, 2),
            metrics=values,
            failure=Failure.from_json(d.get(k["failure"])),
            error=None if d.get(k["error"]) is None else str(d[k["error"]]),
            extra={key: v for key, v in d.items() if key not in _KNOWN},
        )

    # -- the one writer ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The record's JSON object: RAGChecker's keys, ragsweep's where set, ``extra`` as read.
        Fields the run has not reached (None claims / matrices, no failure) are left out, as in
        RAGChecker's input files; NaN metrics are written as null (strict JSON)."""
        k = KEYS
        out: dict[str, Any] = {k["query_id"]: self.query_id, k["query"]: self.query, k["gt_answer"]: self.gt_answer,
                               k["response"]: self.response,
                               k["retrieved_context"]: [c.to_json() for c in self.retrieved_context]}
        for name in ("response_claims", "gt_answer_claims"):
            claims = getattr(self, name)
            if claims is not None:
                out[k[name]] = [c.to_json() for c in claims]
        for name in ("answer2response", "response2answer", "retrieved2response", "retrieved2answer"):
            if getattr(self, name) is not None:
                out[k[name]] = getattr(self, name)
        if self.metrics:
            out[k["metrics"]] = {n: (v if math.isfinite(v) else None) for n, v in self.metrics.items()}
        if self.failure is not None:
            out[k["failure"]] = self.failure.to_json()
        if self.error is not None:
            out[k["error"]] = self.error
        out.update(self.extra)
        return out

    # -- reading --------------------------------------------------------------------------------
    @property
    def has_gt(self) -> bool:
        """A ground-truth answer that is not blank."""
        return bool(self.gt_answer and self.gt_answer.strip())

    @property
    def failed(self) -> Failure | None:
        """The failure of this question (``failure``, or a generation ``error``), None if none."""
        if self.failure is not None:
            return self.failure
        return Failure("generation", self.error) if self.error else None


_KNOWN = frozenset(KEYS.values())


def as_record(rec: "QuestionRecord | Mapping[str, Any]") -> QuestionRecord:
    """``rec`` as a :class:`QuestionRecord` (a record as is; a JSON object read)."""
    return rec if isinstance(rec, QuestionRecord) else QuestionRecord.from_json(rec)


def response_of(rec: "QuestionRecord | Mapping[str, Any]") -> str:
    """The response of a record or of its JSON object ("" when none), without building the record:
    for the hot loops of modules that still pass JSON objects."""
    if isinstance(rec, QuestionRecord):
        return rec.response
    return str(rec.get(KEYS["response"]) or "")


#: the ground-truth answer of a question the documents do not answer (``ragsweep-questions``' kind
#: ``unanswerable``): the right response abstains, and it is scored on that alone (judge.abstention)
ABSTENTION = "[unanswerable] The documents do not answer this question."


def is_abstention(gt_answer: Any) -> bool:
    """Whether a ground-truth answer marks a question the documents do not answer."""
    return isinstance(gt_answer, str) and gt_answer.lstrip().lower().startswith("[unanswerable]")


def set_response(d: dict[str, Any], text: str) -> None:
    """Set the response of a record's JSON object (the pipeline fills it in after generation)."""
    d[KEYS["response"]] = text


def drop_response(d: dict[str, Any]) -> None:
    """Remove the response from a record's JSON object (a retrieval-only run has none to keep)."""
    d.pop(KEYS["response"], None)


def failure_of(rec: "QuestionRecord | Mapping[str, Any]") -> Failure | None:
    """The failure of a record or of its JSON object (``failure``, or a generation ``error``),
    without building the record."""
    if isinstance(rec, QuestionRecord):
        return rec.failed
    f = Failure.from_json(rec.get(KEYS["failure"]))
    if f is not None:
        return f
    err = rec.get(KEYS["error"])
    return Failure("generation", str(err)) if err else None


def read_records(path: str | Path) -> list[QuestionRecord]:
    """The records of a file in RAGChecker's schema (``{"results": [...]}``, or a bare list)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RecordError(f"{path}: cannot read a records file: {exc}") from None
    results = data.get("results") if isinstance(data, Mapping) else data
    if not isinstance(results, list):
        raise RecordError(f"{path}: expected {{\"results\": [...]}} (RAGChecker's schema) or a list of records")
    return [QuestionRecord.from_json(r, f"{path}: results[{i}]") for i, r in enumerate(results)]


def write_records(path: str | Path, records: Iterable["QuestionRecord | Mapping[str, Any]"],
                  extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``{"results": [...], **extra}`` (RAGChecker's schema) as strict, indented JSON."""
    doc = _strict({"results": [as_record(r).to_json() for r in records], **(extra or {})})
    path = Path(path)
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    return path


def _strict(o: Any) -> Any:
    """NaN / infinity -> null anywhere (``extra`` included): strict JSON for any reader."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, Mapping):
        return {str(k): _strict(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_strict(v) for v in o]
    return o


def to_json_list(records: Sequence["QuestionRecord | Mapping[str, Any]"]) -> list[dict[str, Any]]:
    return [as_record(r).to_json() for r in records]


__all__ = ["KEYS", "Chunk", "Claim", "ClaimJSON", "Failure", "Label", "QuestionRecord", "RecordError", "as_record", "failure_of",
           "read_records", "response_of", "set_response", "to_json_list", "write_records"]
