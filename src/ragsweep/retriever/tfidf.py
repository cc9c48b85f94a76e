"""TF-IDF with cosine similarity (scikit-learn ``TfidfVectorizer``, L2-normalised rows).

The fitted vectorizer and the chunk matrix are cached (stage ``"index"``) by config and chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ragsweep.cache import Cache, fetch_one
from ragsweep.retriever.base import Retriever, RetrieverConfig, check_stopwords, rank_top_k
from ragsweep.types import Chunk

_QUERY_BATCH = 256


@dataclass
class TfidfConfig(RetrieverConfig):
    sublinear_tf: bool = True
    stopwords: str | None = "english"
    lowercase: bool = True
    ngram_max: int = 1
    min_df: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_stopwords(self.stopwords)
        if self.ngram_max < 1:
            raise ValueError(f"retriever.ngram_max ({self.ngram_max}) must be >= 1 (1 = single words)")
        if self.min_df < 1:
            raise ValueError(f"retriever.min_df ({self.min_df}) must be >= 1 (a count of chunks)")


class TfidfRetriever(Retriever):
    name = "tfidf"
    Config = TfidfConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._vectorizer: Any = None
        self._matrix: Any = None
        self._n = 0

    def _fit(self, chunks: list[Chunk]) -> tuple[Any, Any]:
        from sklearn.feature_extraction.text import TfidfVectorizer

        c = self.config
        vec = TfidfVectorizer(
            sublinear_tf=c.sublinear_tf,
            stop_words=c.stopwords,
            lowercase=c.lowercase,
            ngram_range=(1, c.ngram_max),
            min_df=c.min_df,
            dtype=np.float64,
        )
        try:
            matrix = vec.fit_transform([ch.text for ch in chunks])
        except ValueError:  # empty vocabulary: no chunk has a word token
            return None, None
        return vec, matrix.tocsr()

    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        key = Cache.key("index", self.cache_config(), self.fingerprint)
        self._vectorizer, self._matrix = fetch_one(cache, "index", key, lambda: self._fit(chunks))

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._vectorizer is None:
            return [rank_top_k(np.zeros(self._n), k) for _ in texts]
        out = []
        for b in range(0, len(texts), _QUERY_BATCH):
            q = self._vectorizer.transform(texts[b : b + _QUERY_BATCH])
            sims = (q @ self._matrix.T).toarray()
            out.extend(rank_top_k(row, k) for row in sims)
        return out
