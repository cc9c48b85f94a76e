"""Hybrid retrieval: BM25 and dense rankings of the same chunks, fused into one ranking.

- ``fusion: rrf`` (default): reciprocal rank fusion (Cormack, Clarke & Buettcher 2009),
  ``score(c) = sum over the two rankings of 1 / (rrf_k + rank(c))`` with ``rrf_k: 60`` (the
  paper's constant); a chunk missing from one ranking gets nothing from it.
- ``fusion: weighted``: each ranking's scores are min-max normalised per query over its
  candidates (all equal: 0), then ``score(c) = weight * dense(c) + (1 - weight) * bm25(c)``;
  ``weight: 1`` is dense alone, ``0`` BM25 alone. A chunk missing from one ranking gets 0 from it.
  ``weight`` is used only by this fusion.

Each side ranks ``candidates`` chunks per query (at least the ``k`` asked for). The two sides
are a :class:`~ragsweep.rag.retriever.bm25.BM25Retriever` and a
:class:`~ragsweep.rag.retriever.dense.DenseRetriever` built from the ``bm25`` and ``dense`` mappings
(their own fields; their ``top_k`` is unused), so each indexes and caches exactly as it does on
its own: a sweep that also runs ``retriever=bm25`` or ``retriever=dense`` on the same chunks
shares their indexes, embeddings and rankings. Fused scores are ranked like every retriever's
(score descending, then chunk order); chunks in neither candidate list score 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragsweep.rag.retriever.base import Retriever, RetrieverConfig, build_config, rank_top_k
from ragsweep.rag.retriever.bm25 import BM25Retriever
from ragsweep.rag.retriever.dense import DenseRetriever
from ragsweep.types import Chunk, Query

FUSIONS = ("rrf", "weighted")


@dataclass
class HybridConfig(RetrieverConfig):
    fusion: str = "rrf"
    rrf_k: int = 60
    weight: float = 0.5
    candidates: int = 100
    bm25: dict[str, Any] = field(default_factory=dict)
    dense: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fusion not in FUSIONS:
            raise ValueError(f"retriever.fusion ({self.fusion!r}) must be one of {', '.join(FUSIONS)}")
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or self.rrf_k < 0:
            raise ValueError(f"retriever.rrf_k ({self.rrf_k}) must be an integer >= 0 (the RRF paper's: 60)")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or not 0 <= self.weight <= 1:
            raise ValueError(f"retriever.weight ({self.weight}) must be between 0 (BM25 only) and 1 (dense only)")
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 1:
            raise ValueError(f"retriever.candidates ({self.candidates}) must be an integer >= 1")
        for side, cls in (("bm25", BM25Retriever), ("dense", DenseRetriever)):  # their fields, their checks
            build_config(cls.Config, dict(getattr(self, side)), f"retriever.{side}")


def _min_max(scores: np.ndarray) -> np.ndarray:
    low, high = float(scores.min()), float(scores.max())
    return (scores - low) / (high - low) if high > low else np.zeros_like(scores)


class HybridRetriever(Retriever):
    name = "hybrid"
    Config = HybridConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sides: dict[str, Retriever] = {
            "bm25": BM25Retriever(**self.config.bm25),
            "dense": DenseRetriever(**self.config.dense),
        }

    def cache_config(self) -> dict[str, Any]:
        """The fusion's fields plus each side's full identity (so its defaults are in the key)."""
        own = {k: v for k, v in super().cache_config().items() if k not in self.sides}
        return {**own, **{side: r.cache_config() for side, r in self.sides.items()}}

    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        self._position = {c.chunk_id: i for i, c in enumerate(chunks)}
        for side in self.sides.values():
            side.index(chunks, cache)

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        n = len(self.chunks)
        depth = min(max(k, self.config.candidates), n)
        queries = [Query(query_id=t, query=t) for t in texts]
        runs = {name: side.search(queries, depth, cache) for name, side in self.sides.items()}
        out = []
        for t in texts:
            fused = np.zeros(n, dtype=np.float64)
            for name, run in runs.items():
                hits = run[t]
                idx = np.array([self._position[h.chunk.chunk_id] for h in hits], dtype=np.int64)
                fused[idx] += self._side_scores(name, np.array([h.score for h in hits], dtype=np.float64))
            out.append(rank_top_k(fused, k))
        return out

    def _side_scores(self, side: str, scores: np.ndarray) -> np.ndarray:
        """One side's contribution to the fused score of its ranked candidates (best first)."""
        c = self.config
        if c.fusion == "rrf":
            return 1.0 / (c.rrf_k + np.arange(1, len(scores) + 1))
        return (c.weight if side == "dense" else 1.0 - c.weight) * _min_max(scores)
