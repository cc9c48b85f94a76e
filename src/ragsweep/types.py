"""Data contracts shared by every stage.

Relevance is kept as character spans into documents (not chunk ids), so it survives any
re-chunking: a chunk is relevant when it overlaps a span of its document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


@dataclass(frozen=True)
class Heading:
    """A heading of a parsed file: ``text[start:end]`` is its title, ``level`` 1 the top."""

    start: int
    end: int
    level: int
    title: str


@dataclass(frozen=True)
class Document:
    """A document. A parsed file (``dataset=files``) also keeps where its pages start (``pages``:
    the character offset of each page, PDF) and its headings, so a chunk can be placed as
    "manual.pdf p. 12, § Installation"; both are empty for plain-text corpora."""

    doc_id: str
    text: str
    title: str | None = None
    pages: tuple[int, ...] = ()
    headings: tuple[Heading, ...] = ()


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of document ``doc_id`` that answer a query."""

    doc_id: str
    start: int
    end: int


@dataclass(frozen=True)
class Query:
    query_id: str
    query: str
    gt_answer: str | None = None
    relevant: tuple[Span, ...] = ()


@dataclass(frozen=True)
class Chunk:
    """A window of a document; ``text == document.text[start:end]`` always holds.

    ``heading`` is the heading path the chunk sits under ("Install > Linux"), set only by a
    chunker asked to put it in front of the chunk for retrieval (``chunker=markdown
    prepend_headings=true``): retrievers index :attr:`search_text`, while ``text``, ``start`` and
    ``end`` stay the document's own characters (span relevance, TRACe, the prompt)."""

    chunk_id: str
    doc_id: str
    start: int
    end: int
    text: str
    heading: str = ""

    @property
    def search_text(self) -> str:
        """What a retriever indexes: the heading path on its own line, then the text."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with its score and 1-based rank."""

    chunk: Chunk
    score: float
    rank: int


@dataclass
class Dataset:
    """``documents`` is a list, or (a JSONL/BEIR corpus file with a document table) a
    :class:`ragsweep.corpus.dataset.doctable.LazyDocuments`: ``len`` and its ``titles``/``lengths``/
    ``doc_ids()`` need no parse; iterating it streams the file, indexing it parses it (once)."""

    name: str
    documents: Sequence[Document]
    queries: list[Query]
    has_relevance: bool = False
    has_answers: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    #: JSON artifacts the loader made, logged to the run under these names (``dataset=files``: its parse ledger)
    artifacts: dict[str, object] = field(default_factory=dict)
    #: a generated question set (``ragsweep-questions``): its file, how many questions, the model,
    #: prompt, seed and corpus fingerprint they came from; empty for people's questions
    synthetic: dict[str, object] = field(default_factory=dict)

    @property
    def doc_index(self) -> dict[str, Document]:
        """Every document by id (a lazy corpus streams its file for it)."""
        return {d.doc_id: d for d in self.documents}


def overlaps(chunk: Chunk, span: Span) -> bool:
    """True when the chunk shares at least one character with the span."""
    return chunk.doc_id == span.doc_id and chunk.start < span.end and span.start < chunk.end


def is_relevant(chunk: Chunk, spans: tuple[Span, ...] | list[Span]) -> bool:
    return any(overlaps(chunk, s) for s in spans)
