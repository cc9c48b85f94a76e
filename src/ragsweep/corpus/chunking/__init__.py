"""Chunking strategies, one module each, all on one base (:mod:`.base`: batched tokenization, the
chunk cache, the chunk file) and one splitter (:mod:`.splitter`). ``chunker=tokens`` is
:class:`ragsweep.corpus.chunker.TokenChunker`; the others are here:

- ``recursive`` (:mod:`.recursive`): paragraph -> line -> sentence -> word separators;
- ``sentences`` (:mod:`.sentences`): whole sentences packed, overlap in sentences;
- ``markdown`` (:mod:`.markdown`): a chunk never crosses a heading, heading path optionally prepended;
- ``semantic`` (:mod:`.semantic`): breakpoints where adjacent sentences' MiniLM similarity drops.

Each takes ``size`` (tokens of the MiniLM tokenizer, as ``tokens``) and ``overlap``, so
``ragsweep -m chunker=tokens,recursive,markdown,semantic chunker.size=200,400`` is a sweep.
"""

from ragsweep.corpus.chunking.base import Chunker, ChunkerConfig
from ragsweep.corpus.chunking.markdown import MarkdownChunker
from ragsweep.corpus.chunking.recursive import RecursiveChunker
from ragsweep.corpus.chunking.semantic import SemanticChunker
from ragsweep.corpus.chunking.sentences import SentenceChunker

__all__ = ["Chunker", "ChunkerConfig", "MarkdownChunker", "RecursiveChunker", "SemanticChunker", "SentenceChunker"]
