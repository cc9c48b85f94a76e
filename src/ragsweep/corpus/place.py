"""Where a chunk of a parsed file is, as a person reads it: ``manual.pdf p. 12, § Installation ›
Linux`` (the file, the page its start falls on, the path of headings above it)."""

from __future__ import annotations

from bisect import bisect_right
from typing import Callable, Iterable, Sequence

from ragsweep.types import Document

SEP = " › "


def page_of(doc: Document, pos: int) -> int | None:
    """The 1-based page that character ``pos`` is on (None: the document has no pages)."""
    if not doc.pages:
        return None
    return max(1, bisect_right(doc.pages, pos))


def heading_path(doc: Document, pos: int) -> list[str]:
    """The titles of the headings that ``pos`` falls under, outermost first."""
    stack: list = []
    for h in doc.headings:
        if h.start > pos:
            break
        while stack and stack[-1].level >= h.level:
            stack.pop()
        stack.append(h)
    return [h.title for h in stack]


def place(doc: Document, pos: int) -> str:
    """``"file p. N, § Heading › Sub"`` for character ``pos`` of ``doc`` (parts it lacks left out)."""
    out = doc.doc_id
    page = page_of(doc, pos)
    if page is not None:
        out += f" p. {page}"
    path = heading_path(doc, pos)
    if path:
        out += ", § " + SEP.join(path)
    return out


def placer(documents: Sequence[Document], doc_ids: Iterable[str]) -> Callable[[str, int], str | None]:
    """``where(doc_id, start)`` for chunks of ``doc_ids``: their place in a parsed file, None for a
    document without pages or headings (a corpus of plain texts). A parsed-files corpus that is
    not in memory (``documents_of``) reads only those documents."""
    wanted = set(doc_ids)
    if hasattr(documents, "documents_of"):
        docs = documents.documents_of(wanted)
    elif hasattr(documents, "doc_ids"):  # a lazy JSONL/BEIR corpus: plain texts, no layout to show
        docs = {}
    else:
        docs = {d.doc_id: d for d in documents if d.doc_id in wanted}
    laid = {i: d for i, d in docs.items() if d.pages or d.headings}

    def where(doc_id: str, start: int) -> str | None:
        doc = laid.get(doc_id)
        return place(doc, start) if doc is not None else None

    return where
