"""A questions file (JSONL) read against a corpus: relevance as character spans, given directly or
as evidence quotes located in the documents' text. Shared by ``dataset=files``, ``dataset=jsonl`` and
the long-document built-ins (``dataset.queries``), and the format ``ragsweep-questions`` writes.

One question per line::

    {"query_id": "q1", "query": "...", "gt_answer": "...",                 # gt_answer optional
     "relevant_doc_ids": ["manual.pdf"],                                    # relevant as a whole
     "evidence": [{"doc_id": "manual.pdf", "quote": "...", "start": 10, "end": 80}, "..."],
     "spans": [{"doc_id": "manual.pdf", "start": 10, "end": 80}],          # spans, no quote
     "kind": "single", "synthetic": true, "provenance": {...}}             # a generated set

A quote becomes the span it occupies in its document's text (:func:`locate_quote`: exactly, then up
to whitespace, case and punctuation, then shared word 4-grams, then rapidfuzz's best partial
alignment with similarity >= ``match``). A quote that comes with its ``start``/``end`` keeps that
span when the text there still reads as the quote; where the document changed since, the quote is
located again (counted: ``queries_spans_relocated``). A relevant document with no quote or span is
relevant as a whole. A line with ``"synthetic": true`` is a generated question: the dataset's
``synthetic`` says how many and by what (the run is tagged, docs/questions.md).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ragsweep.corpus.dataset.doctable import LazyDocuments
from ragsweep.corpus.dataset.loaders import _require, _unique, read_jsonl
from ragsweep.corpus.dataset.locate import DocumentIndex, locate
from ragsweep.errors import DataError
from ragsweep.types import Document, Query, Span

#: the provenance fields a synthetic set's summary keeps (from its first line)
PROVENANCE = ("model", "prompt", "seed", "corpus_fingerprint", "dataset", "tool")


def locate_quote(quote: str, index: DocumentIndex, match: float) -> tuple[int, int, str] | None:
    """``(start, end, method)`` of ``quote`` in the document, or None: :func:`locate` first, then
    rapidfuzz's partial alignment (similarity >= ``match``, 0-1)."""
    found = locate(quote, index, threshold=match)
    if found is not None:
        return found
    from rapidfuzz import fuzz

    al = fuzz.partial_ratio_alignment(quote.strip(), index.text, score_cutoff=100 * match)
    if al is not None and al.dest_end > al.dest_start:
        return al.dest_start, al.dest_end, "rapidfuzz"
    return None


def still_reads(quote: str, text: str, start: int, end: int, match: float) -> bool:
    """Whether ``text[start:end]`` still is ``quote`` (exactly, or located inside it, or within
    ``match`` similarity): a stored span is kept, not located again."""
    if not (0 <= start < end <= len(text)):
        return False
    piece = text[start:end]
    if piece.strip() == quote.strip():
        return True
    found = locate(quote, DocumentIndex(piece), threshold=match)
    if found is not None and found[1] - found[0] >= 0.8 * len(piece.strip()):
        return True
    from rapidfuzz import fuzz

    return fuzz.ratio(piece.strip(), quote.strip()) >= 100 * match


def _texts(documents: Sequence[Document], doc_ids: set[str]) -> dict[str, str]:
    if not doc_ids:
        return {}
    if hasattr(documents, "documents_of"):
        return {d: doc.text for d, doc in documents.documents_of(doc_ids).items()}
    return {d.doc_id: d.text for d in documents if d.doc_id in doc_ids}


def _lengths(documents: Sequence[Document]) -> Mapping[str, int]:
    if isinstance(documents, LazyDocuments):
        if documents.blank_lengths:
            return collections.ChainMap(documents.lengths, documents.blank_lengths)
        return documents.lengths
    return {d.doc_id: len(d.text) for d in documents}


class _Row:
    """One line, checked: its relevant documents, quotes and spans."""

    def __init__(self, obj: dict[str, Any], where: str):
        self.obj, self.where = obj, where
        self.qid = str(_require(obj, "query_id", where))
        self.query = str(_require(obj, "query", where))
        rel, evidence, spans = obj.get("relevant_doc_ids") or [], obj.get("evidence") or [], obj.get("spans") or []
        for name, value in (("relevant_doc_ids", rel), ("evidence", evidence), ("spans", spans)):
            if not isinstance(value, list):
                raise DataError(f"{where}: '{name}' must be a list")
        self.rel = [str(r) for r in rel]
        self.quotes = [self._quote(e) for e in evidence]
        self.spans = [self._span(s, i) for i, s in enumerate(spans)]

    def _quote(self, e: Any) -> tuple[str, str, int | None, int | None]:
        if isinstance(e, str):
            doc, quote, start, end = "", e, None, None
        elif isinstance(e, dict) and isinstance(e.get("quote"), str):
            doc, quote = str(e.get("doc_id") or ""), e["quote"]
            start, end = e.get("start"), e.get("end")
            if (start is None) != (end is None) or start is not None and not (_is_int(start) and _is_int(end)):
                raise DataError(f"{self.where}: an evidence item's 'start' and 'end' are two whole numbers (or both left out)")
        else:
            raise DataError(f"{self.where}: each evidence item is a quote string or {{\"doc_id\", \"quote\"}}")
        if not doc and len(self.rel) != 1:
            raise DataError(f"{self.where}: an evidence quote without doc_id needs exactly one relevant_doc_ids entry "
                            "(or give the quote's doc_id)")
        return doc or self.rel[0], quote, start, end

    def _span(self, s: Any, i: int) -> Span:
        if not (isinstance(s, dict) and s.get("doc_id") is not None and _is_int(s.get("start")) and _is_int(s.get("end"))):
            raise DataError(f"{self.where}: spans[{i}] must be {{\"doc_id\", \"start\", \"end\"}} with whole-number offsets")
        return Span(str(s["doc_id"]), int(s["start"]), int(s["end"]))

    def doc_ids(self) -> set[str]:
        return set(self.rel) | {q[0] for q in self.quotes} | {s.doc_id for s in self.spans}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def read_queries(path: str | Path, documents: Sequence[Document], match: float = 0.8,
                 why_missing: Callable[[str], str] = lambda doc_id: "") -> tuple[list[Query], dict[str, Any]]:
    """The questions of ``path`` with their spans into ``documents``, and what the dataset keeps of
    the file: ``stats`` (``queries_synthetic``, ``queries_spans_relocated``, ``queries_kind_<k>``; those
    that are not 0)
    and ``synthetic`` (empty for people's questions). ``why_missing(doc_id)`` adds to the error of
    a relevant document that is not in the corpus (the files loader names its parse ledger row)."""
    qpath = Path(path).expanduser()
    rows: list[_Row] = []
    seen: dict[str, int] = {}
    for n, obj in read_jsonl(qpath):
        row = _Row(obj, f"{qpath}:{n}")
        _unique(seen, row.qid, "query_id", qpath, n)
        rows.append(row)
    lengths = _lengths(documents)
    for row in rows:
        for d in sorted(row.doc_ids()):
            if d not in lengths:
                raise DataError(f"{row.where}: relevant document '{d}' is not in the corpus{why_missing(d)}; "
                                "relevant_doc_ids, evidence[].doc_id and spans[].doc_id name documents of the dataset")
    texts = _texts(documents, {q[0] for r in rows for q in r.quotes})
    index = {d: DocumentIndex(t) for d, t in texts.items()}
    queries, missed, relocated = [], [], 0
    for row in rows:
        spans: list[Span] = []
        for s in row.spans:
            if not 0 <= s.start < s.end <= lengths[s.doc_id]:
                raise DataError(f"{row.where}: span {s.start}-{s.end} lies outside '{s.doc_id}' ({lengths[s.doc_id]} "
                                "characters); the corpus changed since the spans were made: give evidence quotes instead")
            spans.append(s)
        for doc, quote, start, end in row.quotes:
            if start is not None and still_reads(quote, texts[doc], start, end, match):
                spans.append(Span(doc, start, end))
                continue
            found = locate_quote(quote, index[doc], match)
            if found is None:
                missed.append(f"{row.where}: {quote[:60]!r}")
                continue
            relocated += start is not None
            spans.append(Span(doc, found[0], found[1]))
        placed = {s.doc_id for s in spans}
        spans += [Span(d, 0, lengths[d]) for d in row.rel if d not in placed]
        queries.append(Query(row.qid, row.query, row.obj.get("gt_answer"), tuple(spans)))
    if missed:
        raise DataError(f"{qpath}: {len(missed)} evidence quote(s) not found in their document's text "
                        f"(first: {missed[0]}); copy the quote from the document's text, or lower dataset.match "
                        f"(now {match})")
    return queries, _summary(rows, relocated, qpath)


def _summary(rows: list[_Row], relocated: int, qpath: Path) -> dict[str, Any]:
    synthetic = [r.obj for r in rows if r.obj.get("synthetic") is True]
    stats: dict[str, int] = {"queries_synthetic": len(synthetic), "queries_spans_relocated": relocated}
    for kind, n in sorted(collections.Counter(str(r.obj["kind"]) for r in rows if r.obj.get("kind")).items()):
        stats[f"queries_kind_{kind}"] = n
    info: dict[str, Any] = {}
    if synthetic:
        prov = synthetic[0].get("provenance") if isinstance(synthetic[0].get("provenance"), dict) else {}
        info = {"file": str(qpath), "questions": len(synthetic), "of": len(rows),
                **{k: prov[k] for k in PROVENANCE if k in prov}}
    return {"stats": {k: v for k, v in stats.items() if v}, "synthetic": info}


__all__ = ["PROVENANCE", "locate_quote", "read_queries", "still_reads"]
