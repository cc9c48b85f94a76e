"""The retriever protocol: ``index(chunks)`` then ``search(queries, k) -> {query_id: [Hit]}``.

BEIR-style: every retriever scores chunks for a query; this base class owns everything that is
the same for all of them:

- ``k`` handling: ``k`` defaults to ``top_k``; a ``k`` larger than the number of chunks is
  clamped with a warning that names both numbers.
- deterministic ranking: score descending, then chunk order (the order given to ``index``).
  Scores are compared after rounding to ``SCORE_DECIMALS`` decimals, so floating-point noise
  (float32 vs float64, summation order, two BM25 backends) cannot flip a tie.
- search caching: one Cache entry per query under stage ``"retrieval"``, keyed by (retriever
  config minus ``top_k`` and other result-neutral fields, chunks fingerprint, query text). A
  query is ranked once at ``max(k, CACHE_DEPTH)`` and later requests for a smaller ``k`` are
  slices of it; a request deeper than what was stored is recomputed and re-stored.

A subclass sets ``name`` and ``Config`` (a dataclass with ``top_k``) and implements
``_build(chunks, cache)`` and ``_search(texts, k, cache) -> list[(chunk_indices, scores)]``.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

import numpy as np

from ragsweep.store.cache import Cache, class_key, fetch
from ragsweep.errors import build_config  # noqa: F401 - re-exported: every component's Config is built with it
from ragsweep.types import Chunk, Hit, Query

SCORE_DECIMALS = 9
CACHE_DEPTH = 20


def check_stopwords(stopwords: str | None) -> None:
    """The stop-word list field of the lexical retrievers: English or none."""
    if stopwords not in (None, "english"):
        raise ValueError(f"retriever.stopwords ({stopwords!r}) must be 'english' or null")


def chunks_fingerprint(chunks: Sequence[Chunk]) -> str:
    """sha256 over every chunk's (chunk_id, doc_id, start, end, text[, heading]), in order."""
    h = hashlib.sha256()
    for c in chunks:
        row = [c.chunk_id, c.doc_id, c.start, c.end, c.text] + ([c.heading] if getattr(c, "heading", "") else [])
        h.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def rank_top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the ``k`` best entries: score descending, then index ascending."""
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    keyed = np.round(scores, SCORE_DECIMALS)
    keyed = np.where(np.isnan(keyed), -np.inf, keyed)
    if k < n:
        # everything strictly above the k-th best value, plus the ties at it in index order
        kth = np.partition(-keyed, k - 1)[k - 1]
        cand = np.flatnonzero(-keyed <= kth)
    else:
        cand = np.arange(n)
    order = np.lexsort((cand, -keyed[cand]))[:k]
    idx = cand[order]
    return idx.astype(np.int64), scores[idx]


@dataclass
class RetrieverConfig:
    top_k: int = 4

    def __post_init__(self) -> None:
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
            raise ValueError(f"retriever.top_k ({self.top_k}) must be >= 1: set retriever.top_k to a positive integer")


class Retriever:
    """Base class; see the module docstring for the protocol."""

    name: str = "base"
    Config: type = RetrieverConfig
    #: config fields that do not change results and so stay out of the retrieval cache key
    result_neutral_fields: tuple[str, ...] = ("top_k",)

    def __init__(self, **kwargs: Any) -> None:
        self.config = build_config(self.Config, kwargs, "retriever")
        self.chunks: Sequence[Chunk] = []
        self.fingerprint: str | None = None
        self.stats: dict[str, int] = {"queries_computed": 0, "queries_cached": 0}
        self.progress: Any = None

    # -- properties -------------------------------------------------------------------------
    @property
    def top_k(self) -> int:
        return self.config.top_k

    def cache_config(self) -> dict[str, Any]:
        """The config that identifies this retriever's results (name + result-relevant fields)."""
        cfg = {k: v for k, v in asdict(self.config).items() if k not in self.result_neutral_fields}
        return {"retriever": class_key(type(self)), **cfg}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config})"

    # -- protocol ---------------------------------------------------------------------------
    def index(self, chunks: Sequence[Chunk], cache: Any = None, progress: Any = None) -> None:
        """Index ``chunks``; their order is the tie-break order of every later search.

        ``progress``: a progress bar (``update(n)``) over the chunks that a retriever whose index
        takes a while (BM25, dense encoding) advances as it goes instead of showing its own."""
        self.progress = progress
        from ragsweep.corpus.chunkstore import ChunkTable

        known = getattr(chunks, "fingerprint", None)  # the chunker's (a ChunkTable): no re-hashing
        self.chunks = chunks if isinstance(chunks, ChunkTable) else list(chunks)  # memory-mapped stays so
        self.fingerprint = known or chunks_fingerprint(self.chunks)
        if self.chunks:
            self._build(self.chunks, cache)

    def search(self, queries: Sequence[Query], k: int | None = None, cache: Any = None) -> dict[str, list[Hit]]:
        """Top-``k`` hits (default ``top_k``) for every query, keyed by ``query_id``."""
        if self.fingerprint is None:
            raise RuntimeError(f"{type(self).__name__}.search called before index(chunks)")
        k = self.top_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"retriever.search k ({k}) must be >= 1")
        k = int(k)
        n = len(self.chunks)
        if k > n:
            msg = f"k={k} is larger than the number of chunks ({n}); returning {n} hits per query"
            warnings.warn(msg, stacklevel=2)
            k = n
        out: dict[str, list[Hit]] = {}
        if k == 0:  # empty index
            return {q.query_id: [] for q in queries}

        depth = min(max(k, CACHE_DEPTH), n)
        texts = list(dict.fromkeys(q.query for q in queries))
        base = self.cache_config()
        keys = {t: Cache.key("retrieval", base, self.fingerprint, t) for t in texts}
        computed = 0

        def compute(todo: list[str]) -> dict[str, dict[str, Any]]:
            nonlocal computed
            computed += len(todo)
            return {
                t: {"k": depth, "idx": [int(i) for i in idx], "scores": [float(s) for s in sc]}
                for t, (idx, sc) in zip(todo, self._search(todo, depth, cache))
            }

        # a stored ranking serves when it is at least k deep, or complete (ranked every chunk)
        ranked = fetch(cache, "retrieval", keys, compute, keep=lambda e: e["k"] >= k or len(e["idx"]) >= n)
        self.stats["queries_cached"] += len(texts) - computed
        self.stats["queries_computed"] += computed
        for q in queries:
            entry = ranked[q.query]
            out[q.query_id] = [
                Hit(chunk=self.chunks[i], score=s, rank=r + 1)
                for r, (i, s) in enumerate(zip(entry["idx"][:k], entry["scores"][:k]))
            ]
        return out

    # -- for subclasses ---------------------------------------------------------------------
    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        raise NotImplementedError

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each query text, chunk indices and scores of its ``k`` best chunks, best first.

        ``cache`` is the search's cache (or None), for retrievers that cache work of their own
        (the dense retriever's query embeddings)."""
        raise NotImplementedError
