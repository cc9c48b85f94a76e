"""What every chunking strategy shares: its config's size and overlap, the batched tokenization,
the chunk cache and the chunk file.

A strategy is a :class:`Chunker` subclass that says where one document's chunks are
(:meth:`Chunker.spans`: character spans, measured with a :class:`~.splitter.TokenCount` of the
document); this base tokenizes the documents a batch at a time (one call of the Rust tokenizer,
as ``chunker=tokens`` does), builds the :class:`~ragsweep.types.Chunk` s
(``text == document.text[start:end]``, ids ``<doc_id>#<n>``), and, with a cache, streams them
batch by batch into the chunk file (:mod:`ragsweep.corpus.chunkstore`) keyed by the strategy, its
config and the corpus fingerprint, so each strategy and setting is chunked once per corpus.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

from ragsweep.corpus import chunkstore
from ragsweep.store.cache import Cache
from ragsweep.corpus.chunker import BATCH_DOCS, PROGRESS_MIN_DOCS, _backend, _document_batches, tokenizer_parallelism
from ragsweep.corpus.chunking.splitter import TokenCount
from ragsweep.corpus.dataset.fingerprint import corpus_fingerprint
from ragsweep.errors import build_config
from ragsweep.types import Chunk, Document

log = logging.getLogger(__name__)

#: one chunk of a document: (start, end) or (start, end, heading path)
Piece = tuple


def _whole(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, int)


@dataclass
class ChunkerConfig:
    """``size``: the most tokens a chunk holds (tokens of ``tokenizer``, MiniLM's by default: the
    same tokens as ``chunker=tokens``); ``overlap``: below 1 a fraction of ``size``, else tokens."""

    size: int = 300
    overlap: float = 0.2
    tokenizer: str = "minilm"

    def __post_init__(self) -> None:
        if not _whole(self.size) or self.size < 1:
            raise ValueError(f"chunker.size ({self.size}) must be a whole number >= 1: set chunker.size to e.g. 300")
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError("chunker.tokenizer must be 'minilm' or a HuggingFace tokenizer name or path")
        self.check_overlap()

    def check_overlap(self) -> None:
        if isinstance(self.overlap, bool) or not isinstance(self.overlap, (int, float)) or self.overlap < 0:
            raise ValueError(f"chunker.overlap ({self.overlap}) must be >= 0: a fraction of chunker.size below 1 "
                             "(0.2) or a number of tokens (60)")
        if self.overlap >= 1 and float(self.overlap) != int(self.overlap):
            raise ValueError(f"chunker.overlap ({self.overlap}) must be a fraction below 1 or a whole number of tokens: "
                             f"use e.g. {int(self.overlap)}")
        if self.overlap_tokens >= self.size:
            shown = f"{self.overlap} = {self.overlap_tokens} tokens" if self.overlap < 1 else f"{self.overlap_tokens}"
            raise ValueError(f"chunker.overlap ({shown}) must be smaller than chunker.size ({self.size}): "
                             "lower the overlap or raise the size")

    @property
    def overlap_tokens(self) -> int:
        return int(round(self.overlap * self.size)) if self.overlap < 1 else int(self.overlap)


class Chunker:
    """Base of the strategies: subclasses set ``name`` and ``Config`` and implement :meth:`spans`."""

    name = "base"
    Config: type = ChunkerConfig
    #: config fields that do not change the chunks (kept out of the cache key)
    result_neutral: tuple[str, ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        self.config = build_config(self.Config, kwargs, "chunker")
        self.stats: dict[str, int] = {}
        self.cache: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"

    @property
    def size(self) -> int:
        return self.config.size

    @property
    def keeps_headings(self) -> bool:
        """Whether chunks carry a heading path (the chunk file then keeps a ``heading`` column)."""
        return False

    def key_config(self) -> dict[str, Any]:
        """The strategy and the config fields that decide the chunks."""
        cfg = {k: v for k, v in asdict(self.config).items() if k not in self.result_neutral}
        return {"strategy": self.name, **cfg}

    def key_documents(self, documents: Sequence[Document]) -> list[Any]:
        """What else about the documents decides the chunks (beyond ids and texts, which the corpus
        fingerprint covers); the markdown strategy adds the parsed headings."""
        return []

    # -- what a strategy implements ---------------------------------------------------------
    def spans(self, doc: Document, count: TokenCount) -> list[Piece]:
        """The chunks of one document as ``(start, end)`` or ``(start, end, heading)``, in order."""
        raise NotImplementedError

    def spans_batch(self, docs: Sequence[Document], counts: Sequence[TokenCount]) -> list[list[Piece]]:
        """:meth:`spans` of a batch of documents (a strategy that encodes sentences batches them)."""
        return [self.spans(d, c) for d, c in zip(docs, counts)]

    # -- public -----------------------------------------------------------------------------
    def chunk(self, documents: Sequence[Document], cache: Any = None) -> Sequence[Chunk]:
        """Chunks of every document, in document order; cached by strategy, config and corpus.

        With a cache, the chunks go to an Arrow file under the cache dir batch by batch and come
        back as a memory-mapped :class:`~ragsweep.corpus.chunkstore.ChunkTable`; without one, as a list."""
        if not isinstance(documents, Sequence):
            documents = list(documents)
        self.cache = cache  # a strategy that encodes sentences keeps them in the embedding cache
        self.stats = {}
        if cache is None or not getattr(cache, "enabled", True):
            return [c for part in self._batches(documents) for c in part]
        key = Cache.key("chunks", chunkstore.FORMAT, self.key_config(), corpus_fingerprint(documents),
                        *self.key_documents(documents))
        table, hit = chunkstore.cached(cache, key, lambda: self._batches(documents), heading=self.keeps_headings)
        if hit:
            self.stats = {"documents": len(documents), "chunks": len(table)}
        return table

    def token_counts(self, texts: Sequence[str]) -> list[TokenCount]:
        """A token counter per text, from one batched call of the tokenizer."""
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        out = [TokenCount(())] * len(texts)
        if live:
            with tokenizer_parallelism():
                encs = _backend(self.config.tokenizer).encode_batch([texts[i] for i in live], add_special_tokens=False)
            for i, e in zip(live, encs):
                out[i] = TokenCount(e.offsets)
        return out

    def chunk_text(self, doc: Document) -> list[Chunk]:
        """The chunks of one document."""
        return self._chunks([doc], self.spans_batch([doc], self.token_counts([doc.text])))

    def iter_batches(self, documents: Sequence[Document], batch: int | None = None,
                     progress: Any = None) -> Iterator[list[Chunk]]:
        """The chunks of ``documents`` (every document in order), one list per batch of documents."""
        for docs in _document_batches(documents, batch or BATCH_DOCS):
            counts = self.token_counts([d.text for d in docs])
            yield self._chunks(docs, self.spans_batch(docs, counts))
            if progress is not None:
                progress.update(len(docs))

    # -- internals --------------------------------------------------------------------------
    @staticmethod
    def _chunks(docs: Sequence[Document], spans: Sequence[Sequence[Piece]]) -> list[Chunk]:
        out: list[Chunk] = []
        for d, ss in zip(docs, spans):
            for n, s in enumerate(ss):
                a, b = int(s[0]), int(s[1])
                out.append(Chunk(f"{d.doc_id}#{n}", d.doc_id, a, b, d.text[a:b], s[2] if len(s) > 2 else ""))
        return out

    def _batches(self, documents: Sequence[Document]) -> Iterator[list[Chunk]]:
        from tqdm.auto import tqdm

        if hasattr(documents, "iter_batches") or any(d.text and not d.text.isspace() for d in documents):
            _backend(self.config.tokenizer)  # load before the progress bar starts
        n_chunks = 0
        bar = tqdm(total=len(documents), desc=f"chunking ({self.name})", unit="doc",
                   disable=len(documents) <= PROGRESS_MIN_DOCS, smoothing=0.1)
        try:
            for part in self.iter_batches(documents, progress=bar):
                n_chunks += len(part)
                bar.set_postfix_str(f"{n_chunks:,} chunks", refresh=False)
                yield part
        finally:
            bar.close()
        self.stats.update({"documents": len(documents), "chunks": n_chunks})
