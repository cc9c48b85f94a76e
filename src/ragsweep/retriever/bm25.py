"""BM25 (Okapi) with two interchangeable backends that rank identically.

- ``backend: rank_bm25`` - ``rank_bm25.BM25Okapi`` (pure Python; the reference).
- ``backend: bm25s`` (default) - ``bm25s`` sparse eager index (fast), made to score exactly like
  BM25Okapi.

Both use one tokenizer (:func:`tokenize`: lower-cased ``\\w+`` word tokens, English stop words
removed unless ``stopwords: null``). BM25Okapi scores a term ``t`` of a document as
``idf(t) * tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl))`` with
``idf(t) = ln((N-df+0.5)/(df+0.5))`` and, for terms in more than half the documents (negative
idf), the floor ``epsilon * mean(idf over the vocabulary)`` (epsilon = 0.25). No bm25s variant
has that idf: ``robertson`` clamps negative idf to 0, ``lucene`` uses ``ln(1 + ...)``. So the
bm25s index is built with the ATIRE term-frequency part (which is BM25Okapi's) and the Lucene
idf (always positive), and each vocabulary column of its score matrix is then rescaled by
``okapi_idf / lucene_idf``. Scores agree with rank_bm25 to floating-point precision (float64)
and rankings are identical (ties: chunk order, see the base class).

Indexes are persisted in the cache's blob directory (stage ``"index"``): bm25s with its own
``save``/``load``, rank_bm25 pickled.
"""

from __future__ import annotations

import math
import pickle
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep.retriever.base import Retriever, RetrieverConfig, check_stopwords, rank_top_k
from ragsweep.types import Chunk

_WORD = re.compile(r"\w+", re.UNICODE)
BACKENDS = ("bm25s", "rank_bm25")
EPSILON = 0.25  # rank_bm25.BM25Okapi's default floor factor for negative idf


def _import_bm25s():  # noqa: ANN202
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import: keep logs clean
    return bm25s


def _stopword_set(stopwords: str | None) -> frozenset[str]:
    check_stopwords(stopwords)
    if stopwords is None:
        return frozenset()
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # slow import: only when used

    return frozenset(ENGLISH_STOP_WORDS)


def tokenize(text: str, lowercase: bool = True, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Word tokens shared by both backends (and the query side)."""
    if lowercase:
        text = text.lower()
    toks = _WORD.findall(text)
    if stopwords:
        toks = [t for t in toks if t.lower() not in stopwords]
    return toks


def okapi_idf(doc_freqs: dict[str, int], n_docs: int, epsilon: float = EPSILON) -> dict[str, float]:
    """BM25Okapi's idf, computed exactly as ``rank_bm25.BM25Okapi._calc_idf`` does."""
    idf: dict[str, float] = {}
    idf_sum = 0.0
    negative = []
    for word, freq in doc_freqs.items():
        v = math.log(n_docs - freq + 0.5) - math.log(freq + 0.5)
        idf[word] = v
        idf_sum += v
        if v < 0:
            negative.append(word)
    eps = epsilon * (idf_sum / len(idf)) if idf else 0.0
    for word in negative:
        idf[word] = eps
    return idf


@dataclass
class BM25Config(RetrieverConfig):
    backend: str = "bm25s"
    k1: float = 1.5
    b: float = 0.75
    lowercase: bool = True
    stopwords: str | None = "english"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.backend not in BACKENDS:
            raise ValueError(f"retriever.backend ({self.backend!r}) must be one of {', '.join(BACKENDS)}")
        if self.k1 < 0:
            raise ValueError(f"retriever.k1 ({self.k1}) must be >= 0 (typical 1.2-2.0)")
        if not 0 <= self.b <= 1:
            raise ValueError(f"retriever.b ({self.b}) must be between 0 and 1 (typical 0.75)")
        check_stopwords(self.stopwords)  # validation stays fast: no sklearn import here


class BM25Retriever(Retriever):
    name = "bm25"
    Config = BM25Config

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stop_set: frozenset[str] | None = None
        self._model: Any = None
        self._n = 0

    def _tok(self, text: str) -> list[str]:
        if self._stop_set is None:
            self._stop_set = _stopword_set(self.config.stopwords)
        return tokenize(text, self.config.lowercase, self._stop_set)

    # -- index ------------------------------------------------------------------------------
    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        corpus: list[list[str]] | None = None

        def tokens() -> list[list[str]]:
            nonlocal corpus
            if corpus is None:
                corpus = [self._tok(c.text) for c in chunks]
            return corpus

        build = self._build_bm25s if self.config.backend == "bm25s" else self._build_rank_bm25
        if cache is None:
            self._model = build(tokens())
            return
        built: dict[str, Any] = {}

        def writer(tmp: Path) -> None:
            model = build(tokens())
            built["model"] = model
            self._save(model, tmp)

        key = cache.key("index", self.cache_config(), self.fingerprint)
        path = cache.blob_dir("index", key, writer)
        self._model = built["model"] if "model" in built else self._load(path)

    def _build_rank_bm25(self, corpus: list[list[str]]) -> Any:
        from rank_bm25 import BM25Okapi

        if not any(corpus):  # rank_bm25 divides by the vocabulary size
            return None
        return BM25Okapi(corpus, k1=self.config.k1, b=self.config.b, epsilon=EPSILON)

    def _build_bm25s(self, corpus: list[list[str]]) -> Any:
        bm25s = _import_bm25s()

        if not any(corpus):
            return None
        model = bm25s.BM25(
            k1=self.config.k1, b=self.config.b, method="atire", idf_method="lucene", dtype="float64", backend="numpy"
        )
        model.index(corpus, create_empty_token=False, show_progress=False)
        # rescale each vocabulary column from Lucene's idf to BM25Okapi's idf
        df: Counter[str] = Counter()
        for doc in corpus:
            df.update(set(doc))
        n = len(corpus)
        target = okapi_idf(dict(df), n)
        ratio = np.zeros(len(model.vocab_dict), dtype=np.float64)
        for token, j in model.vocab_dict.items():
            f = df[token]
            ratio[j] = target[token] / math.log(1 + (n - f + 0.5) / (f + 0.5))
        data, indptr = model.scores["data"], model.scores["indptr"]
        counts = np.diff(indptr)
        model.scores["data"] = (data * np.repeat(ratio[: len(counts)], counts)).astype(np.float64)
        return model

    def _save(self, model: Any, path: Path) -> None:
        if model is None:
            (path / "empty").write_text("no tokens in any chunk\n")
        elif self.config.backend == "bm25s":
            model.save(str(path))
        else:
            with open(path / "rank_bm25.pkl", "wb") as f:
                pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)

    def _load(self, path: Path) -> Any:
        if (path / "empty").exists():
            return None
        if self.config.backend == "bm25s":
            bm25s = _import_bm25s()

            return bm25s.BM25.load(str(path))
        with open(path / "rank_bm25.pkl", "rb") as f:
            return pickle.load(f)

    # -- search -----------------------------------------------------------------------------
    def scores(self, text: str) -> np.ndarray:
        """BM25Okapi score of every chunk for one query text."""
        toks = self._tok(text)
        if self._model is None or not toks:
            return np.zeros(self._n)
        if self.config.backend == "rank_bm25":
            return np.asarray(self._model.get_scores(toks), dtype=np.float64)
        ids = self._model.get_tokens_ids(toks)
        if not ids:
            return np.zeros(self._n)
        return np.asarray(self._model.get_scores_from_ids(ids), dtype=np.float64)

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        return [rank_top_k(self.scores(t), k) for t in texts]
