"""``chunker=markdown``: a chunk never crosses a heading; inside a section, ``chunker=recursive``.

The sections come from the document's parsed headings (:attr:`Document.headings`, which
``dataset=files`` fills for Markdown, HTML and Word files) and, for a document without them, from
the ATX (``# Title``) and setext (``Title`` over ``===``) headings of its text, found by
markdown-it-py's CommonMark parser (so a ``#`` line inside a fenced code block is no heading). A
section runs from the start of its heading's line to the start of the next heading's line; the
text before the first heading is a section of its own. Each section is split as
``chunker=recursive`` splits a document (``size`` and ``overlap`` in tokens); no chunk spans two
sections. A document with no heading is split exactly as ``chunker=recursive`` splits it.

``prepend_headings: true`` gives each chunk its heading path ("Install > Linux": the titles of
the enclosing headings, outermost first) in :attr:`Chunk.heading`: retrievers index it on the line
before the chunk's text (:attr:`Chunk.search_text`), while ``text``, ``start`` and ``end`` stay the
document's characters, so span relevance, TRACe and ``retriever=oracle`` read the document as it
is and the prompt shows the document's text.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ragsweep.corpus.chunking.base import Chunker, ChunkerConfig, Piece
from ragsweep.corpus.chunking.splitter import TokenCount, split
from ragsweep.types import Document, Heading

#: a line that may start or underline a heading: only such texts are parsed
_MAYBE_HEADING = re.compile(r"(?m)^ {0,3}(?:#{1,6}(?:[ \t]|$)|(?:=+|-+)[ \t]*$)")
SEPARATOR = " > "


@dataclass
class MarkdownConfig(ChunkerConfig):
    #: put each chunk's heading path on the line before its text for retrieval (not in its offsets)
    prepend_headings: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.prepend_headings, bool):
            raise ValueError(f"chunker.prepend_headings ({self.prepend_headings!r}) must be true or false")


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def text_headings(text: str) -> list[Heading]:
    """The ATX and setext headings of a Markdown text (``text[start:end]`` is the title)."""
    if not _MAYBE_HEADING.search(text):
        return []
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    tokens = _parser().parse(text)
    out = []
    for i, tok in enumerate(tokens):
        if tok.type != "heading_open" or not tok.map:
            continue
        first, last = tok.map  # the heading's lines [first, last)
        inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
        if tok.markup.startswith("#"):  # ATX: the title on its line, after the #s
            line = line_starts[first]
            end_line = line_starts[first + 1] - 1 if first + 1 < len(line_starts) else len(text)
        else:  # setext: the title lines, then the underline
            line = line_starts[first]
            end_line = line_starts[last - 1] - 1
        seg = text[line:end_line]
        at = seg.find(inline) if inline else -1
        start, end = (line + at, line + at + len(inline)) if at >= 0 else (line, line)
        out.append(Heading(start, end, int(tok.tag[1]), inline.strip()))
    return out


def sections(text: str, headings: Sequence[Heading]) -> list[tuple[int, int, str]]:
    """``(start, end, heading path)`` of every section: from a heading's line to the next's."""
    heads = sorted(headings, key=lambda h: h.start)
    out: list[tuple[int, int, str]] = []
    starts = [text.rfind("\n", 0, h.start) + 1 for h in heads]
    if not heads or starts[0] > 0:
        out.append((0, starts[0] if heads else len(text), ""))
    path: list[tuple[int, str]] = []
    for i, h in enumerate(heads):
        while path and path[-1][0] >= h.level:
            path.pop()
        path.append((h.level, h.title or text[h.start:h.end].strip()))
        end = starts[i + 1] if i + 1 < len(heads) else len(text)
        if end > starts[i]:
            out.append((starts[i], end, SEPARATOR.join(t for _, t in path if t)))
    return out


class MarkdownChunker(Chunker):
    """Sections at headings, ``chunker=recursive`` inside each; heading paths kept on request."""

    name = "markdown"
    Config = MarkdownConfig

    @property
    def keeps_headings(self) -> bool:
        return bool(self.config.prepend_headings)

    def key_documents(self, documents: Sequence[Document]) -> list[Any]:
        """The parsed headings decide the sections: their digest joins the cache key (a corpus
        read lazily from JSONL has none, and is not read for it)."""
        if hasattr(documents, "iter_batches"):
            return []
        h = hashlib.sha256()
        found = False
        for d in documents:
            if d.headings:
                found = True
                h.update(repr((d.doc_id, [(x.start, x.end, x.level, x.title) for x in d.headings])).encode("utf-8"))
        return [h.hexdigest()] if found else []

    def spans(self, doc: Document, count: TokenCount) -> list[Piece]:
        text = doc.text
        if not text or text.isspace():
            return []
        heads = doc.headings or text_headings(text)
        size, overlap = self.config.size, self.config.overlap_tokens
        keep = self.config.prepend_headings
        out: list[Piece] = []
        for a, b, path in sections(text, heads):
            out.extend((s, e, path) if keep and path else (s, e) for s, e in split(text, a, b, count, size, overlap))
        return out
