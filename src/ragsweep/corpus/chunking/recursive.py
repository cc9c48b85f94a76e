"""``chunker=recursive``: cut at the strongest separator that makes a chunk fit.

A document of at most ``size`` tokens is one chunk. A longer one is cut at blank lines
(paragraphs) and the paragraphs merged greedily up to ``size`` tokens; a paragraph over ``size``
is cut at line breaks, a line at sentences, a sentence at whitespace, a word at token boundaries
(:func:`ragsweep.corpus.chunking.splitter.split`). ``overlap`` tokens of whole pieces (fraction of
``size`` below 1, as ``chunker=tokens``) start the next chunk of the same merge.
"""

from __future__ import annotations

from ragsweep.corpus.chunking.base import Chunker, ChunkerConfig, Piece
from ragsweep.corpus.chunking.splitter import TokenCount, split
from ragsweep.types import Document


class RecursiveChunker(Chunker):
    """Paragraph -> line -> sentence -> word -> token separators, ``size`` tokens at most."""

    name = "recursive"
    Config = ChunkerConfig

    def spans(self, doc: Document, count: TokenCount) -> list[Piece]:
        if not doc.text or doc.text.isspace():
            return []
        return split(doc.text, 0, len(doc.text), count, self.config.size, self.config.overlap_tokens)
