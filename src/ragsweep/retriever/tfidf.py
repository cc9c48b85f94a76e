"""TF-IDF with cosine similarity (scikit-learn ``TfidfVectorizer``, L2-normalised rows).

The fitted vectorizer and the chunk matrix are persisted under the cache's ``blobs/index/`` (by
config and chunks): the vectorizer pickled, the matrix by term (CSC: ``data``/``indices``/
``indptr`` as ``.npy`` files, which - unlike a zipped ``.npz`` - load memory-mapped). A query
reads only the columns of its own terms, so a warm search touches a tiny part of the index.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep.cache import Cache
from ragsweep.retriever.base import Retriever, RetrieverConfig, check_stopwords, rank_top_k
from ragsweep.types import Chunk

_QUERY_BATCH = 256
#: the on-disk index layout (a change of it is a new cache key)
FORMAT = "tfidf-csc-npy-v1"


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
            matrix = vec.fit_transform(ch.text for ch in chunks)  # one pass, no list of every text
        except ValueError:  # empty vocabulary: no chunk has a word token
            return None, None
        return vec, matrix.tocsr()

    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        if cache is None or not getattr(cache, "enabled", True):  # nothing persisted
            vec, matrix = self._fit(chunks)
            self._vectorizer, self._matrix = vec, (matrix.tocsc() if matrix is not None else None)
            return
        built: dict[str, Any] = {}

        def writer(tmp: Path) -> None:
            vec, matrix = self._fit(chunks)
            built["v"], built["m"] = vec, (matrix.tocsc() if matrix is not None else None)
            if vec is None:
                (tmp / "empty").write_text("no word token in any chunk\n")
                return
            with open(tmp / "vectorizer.pkl", "wb") as f:
                pickle.dump(vec, f, protocol=pickle.HIGHEST_PROTOCOL)
            m = built["m"]
            for name in ("data", "indices", "indptr"):
                np.save(tmp / f"{name}.npy", getattr(m, name))
            (tmp / "shape.json").write_text(json.dumps(list(m.shape)))

        key = Cache.key("index", FORMAT, self.cache_config(), self.fingerprint)
        path = cache.blob_dir("index", key, writer)
        if "v" in built:
            self._vectorizer, self._matrix = built["v"], built["m"]
        elif (path / "empty").exists():
            self._vectorizer, self._matrix = None, None
        else:
            with open(path / "vectorizer.pkl", "rb") as f:
                self._vectorizer = pickle.load(f)
            # memory-mapped CSC parts: a query reads the columns of its terms only
            self._matrix = _Columns(*(np.load(path / f"{n}.npy", mmap_mode="r") for n in ("data", "indices", "indptr")),
                                    shape=tuple(json.loads((path / "shape.json").read_text())))

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._vectorizer is None:
            return [rank_top_k(np.zeros(self._n), k) for _ in texts]
        m = self._matrix
        cols = m if isinstance(m, _Columns) else _Columns(m.data, m.indices, m.indptr, m.shape)
        out = []
        for b in range(0, len(texts), _QUERY_BATCH):
            q = self._vectorizer.transform(texts[b : b + _QUERY_BATCH]).tocsr()
            for r in range(q.shape[0]):
                lo, hi = q.indptr[r], q.indptr[r + 1]
                out.append(rank_top_k(cols.dot(q.indices[lo:hi], q.data[lo:hi]), k))
        return out


class _Columns:
    """A CSC matrix (chunks x terms) held as three arrays (memory-mapped or not)."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]):
        self.data, self.indices, self.indptr, self.shape = data, indices, indptr, shape

    def dot(self, terms: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``matrix @ q`` for a sparse query ``q`` (its term ids and weights), in float64."""
        scores = np.zeros(self.shape[0], dtype=np.float64)
        for t, w in sorted(zip(terms.tolist(), weights.tolist())):  # summed in term order, as scipy does
            lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
            np.add.at(scores, self.indices[lo:hi], w * np.asarray(self.data[lo:hi], dtype=np.float64))
        return scores
