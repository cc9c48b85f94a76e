"""Every evidence quote of a draft located in its sample's documents and kept as a character span:
in the passage shown to the model first (where it should be), then anywhere in that passage's
document; exactly, then up to whitespace, case and punctuation, then by shared word 4-grams, then by
rapidfuzz's best partial alignment (:func:`ragsweep.corpus.dataset.queries.locate_quote`, the files
loader's own locating). A quote stores the document's own characters (``text[start:end]``), so a
reader of the set later finds it exactly where it was."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from ragsweep.corpus.dataset.locate import DocumentIndex
from ragsweep.corpus.dataset.queries import locate_quote
from ragsweep.corpus.sampling import Sample, Window


@dataclass(frozen=True)
class Evidence:
    doc_id: str
    start: int
    end: int
    quote: str  # the document's text there
    method: str  # how it was located: exact, whitespace, words, fuzzy, rapidfuzz (+ "/document" outside the passage)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ground(quotes: list[str], sample: Sample, documents: Mapping[str, DocumentIndex], match: float,
           min_words: int) -> tuple[list[Evidence], dict[str, int]]:
    """The located evidence of ``quotes`` (duplicates and overlaps merged away) and counts:
    ``quotes``, ``located``, ``short`` (fewer than ``min_words`` words: no evidence), ``not_found``."""
    found: list[Evidence] = []
    counts = {"quotes": len(quotes), "located": 0, "short": 0, "not_found": 0}
    for quote in quotes:
        if len(quote.split()) < min_words:
            counts["short"] += 1
            continue
        ev = _one(quote, sample.windows, documents, match)
        if ev is None:
            counts["not_found"] += 1
            continue
        counts["located"] += 1
        if not any(e.doc_id == ev.doc_id and e.start < ev.end and ev.start < e.end for e in found):
            found.append(ev)
    return sorted(found, key=lambda e: (e.doc_id, e.start)), counts


def _one(quote: str, windows: tuple[Window, ...], documents: Mapping[str, DocumentIndex], match: float) -> Evidence | None:
    for w in windows:
        hit = locate_quote(quote, DocumentIndex(w.text), match)
        if hit is not None:
            s, e = w.start + hit[0], w.start + hit[1]
            return Evidence(w.doc_id, s, e, documents[w.doc_id].text[s:e], hit[2])
    for doc_id in dict.fromkeys(w.doc_id for w in windows):
        hit = locate_quote(quote, documents[doc_id], match)
        if hit is not None:
            return Evidence(doc_id, hit[0], hit[1], documents[doc_id].text[hit[0]:hit[1]], f"{hit[2]}/document")
    return None


def both_sides(evidence: list[Evidence], sample: Sample) -> bool:
    """Whether each passage of a two-passage sample has evidence: a span inside it, or, when the
    two passages come from two documents, anywhere in its document."""
    two_docs = len({w.doc_id for w in sample.windows}) > 1
    for w in sample.windows:
        if not any(e.doc_id == w.doc_id and (two_docs or (e.start < w.end and w.start < e.end)) for e in evidence):
            return False
    return True


__all__ = ["Evidence", "both_sides", "ground"]
