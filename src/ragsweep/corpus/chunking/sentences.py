"""``chunker=sentences``: whole sentences packed up to ``size`` tokens, ``overlap`` in sentences.

Sentences are found by the splitter TRACe's sentence keys use (:func:`ragsweep.corpus.text.sentence_spans`:
after ``. ! ? ;`` and whitespace, not after abbreviations, initials or "No. 14"; at blank lines and
list items). Consecutive sentences fill a chunk until the next one would pass ``size`` tokens; the
next chunk starts with the last ``overlap`` sentences of the previous one (fewer when they would
leave no room). A sentence over ``size`` tokens alone is cut at whitespace into chunks of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragsweep.corpus.chunking.base import Chunker, ChunkerConfig, Piece, _whole
from ragsweep.corpus.chunking.splitter import LEVELS, TokenCount, merge, split
from ragsweep.corpus.text import sentence_spans
from ragsweep.types import Document

WORD = LEVELS.index("word")


@dataclass
class SentencesConfig(ChunkerConfig):
    #: sentences repeated at the start of the next chunk (a whole number, not tokens)
    overlap: int = 1

    def check_overlap(self) -> None:
        if not _whole(self.overlap) or self.overlap < 0:
            raise ValueError(f"chunker.overlap ({self.overlap}) is a number of whole sentences for this chunker "
                             "(chunker=sentences, semantic): use 0, 1 or 2")


def pack_sentences(text: str, sents: list[tuple[int, int]], count: TokenCount, size: int, overlap: int) -> list[Piece]:
    """``sents`` (ordered character spans) packed into chunks of at most ``size`` tokens."""
    parts = [(a, b, count(a, b)) for a, b in sents]
    return merge(text, parts, size, overlap, lambda a, b: split(text, a, b, count, size, 0, WORD), overlap_parts=True)


class SentenceChunker(Chunker):
    """Whole sentences up to ``size`` tokens; ``overlap`` sentences shared by neighbours."""

    name = "sentences"
    Config = SentencesConfig

    def spans(self, doc: Document, count: TokenCount) -> list[Piece]:
        return pack_sentences(doc.text, sentence_spans(doc.text), count, self.config.size, self.config.overlap)
