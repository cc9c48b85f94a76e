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
bm25s index (its CSC score matrix: one column per word, one row per chunk) is built here in numpy
with BM25Okapi's own idf, out of core (:mod:`ragsweep.rag.retriever.sparse_build`): chunks are
tokenised a batch at a time, words factorised to ids per batch, and each batch's (chunk, word, tf)
entries spilled to disk; the scores are computed once every document frequency and length is
known and written a range of words at a time (1.55M chunks: a few hundred MB in memory instead
of 10 GB). The matrix is stored in ``retriever.dtype`` (float32 by default: the
SciFact rankings are identical, see experiments/results/bm25_float32_scifact.md) and a query's
words are summed in float64. Rankings are identical to rank_bm25's (ties: chunk order, see the
base class).

Indexes are persisted in the cache's blob directory (stage ``"index"``): bm25s in its own format
(``save``), loaded with ``mmap=True`` so a query reads only the columns of its own words;
rank_bm25 pickled.
"""

from __future__ import annotations

import itertools
import logging
import math
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragsweep.rag.retriever import sparse_build
from ragsweep.rag.retriever.base import Retriever, RetrieverConfig, check_stopwords, rank_top_k
from ragsweep.rag.retriever.sparse_build import SpillMatrix
from ragsweep.types import Chunk

_WORD = re.compile(r"\w+", re.UNICODE)
BACKENDS = ("bm25s", "rank_bm25")
EPSILON = 0.25  # rank_bm25.BM25Okapi's default floor factor for negative idf
#: the on-disk index layout (a change of it is a new cache key)
FORMAT = "bm25s-csc-v2"
PROGRESS_MIN = 2000


def _import_bm25s():  # noqa: ANN202
    import sys

    # bm25s imports numba when it is installed (ppi-python brings it) for its numba backend, which
    # ragsweep never uses (backend="numpy" below): hidden during the import, ~0.3 s of a BM25 run
    hide = "bm25s" not in sys.modules and "numba" not in sys.modules
    if hide:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` raises ImportError
    try:
        import bm25s
    finally:
        if hide and sys.modules.get("numba", False) is None:
            del sys.modules["numba"]

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG on import: keep logs clean
    return bm25s


def _stopword_set(stopwords: str | None) -> frozenset[str]:
    check_stopwords(stopwords)
    if stopwords is None:
        return frozenset()
    from ragsweep.rag.retriever.stopwords import ENGLISH_STOP_WORDS  # scikit-learn's, without its import

    return ENGLISH_STOP_WORDS


def tokenize(text: str, lowercase: bool = True, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Word tokens shared by both backends (and the query side)."""
    if lowercase:
        text = text.lower()
    toks = _WORD.findall(text)
    if stopwords:
        toks = [t for t in toks if t.lower() not in stopwords]
    return toks


def okapi_idf_array(df: np.ndarray, n_docs: int, epsilon: float = EPSILON) -> np.ndarray:
    """:func:`okapi_idf` over a vector of document frequencies (one per vocabulary word)."""
    df = np.asarray(df, dtype=np.float64)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    if idf.size:
        idf = np.where(idf < 0, epsilon * float(math.fsum(idf.tolist())) / idf.size, idf)
    return idf


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
    dtype: str = "float32"  # the stored score matrix (bm25s); sums are float64 either way

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"retriever.dtype ({self.dtype!r}) must be float32 or float64")
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
    def _build(self, chunks: Sequence[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        persisted = cache is not None and getattr(cache, "enabled", True)
        if self.config.backend == "rank_bm25":
            if not persisted:
                self._model = self._build_rank_bm25([self._tok(c.search_text) for c in chunks])
                return

            def writer(tmp: Path) -> None:
                self._save(self._build_rank_bm25([self._tok(c.search_text) for c in chunks]), tmp)
        else:
            if not persisted:
                self._model = sparse_build.in_scratch(lambda d: self._write_bm25s(chunks, d),
                                                      lambda d: self._load(d, mmap=False))
                return

            def writer(tmp: Path) -> None:
                self._write_bm25s(chunks, tmp)
        key = cache.key("index", FORMAT, self.cache_config(), self.fingerprint)
        self._model = self._load(cache.blob_dir("index", key, writer))

    def _build_rank_bm25(self, corpus: list[list[str]]) -> Any:
        from rank_bm25 import BM25Okapi

        if not any(corpus):  # rank_bm25 divides by the vocabulary size
            return None
        return BM25Okapi(corpus, k1=self.config.k1, b=self.config.b, epsilon=EPSILON)

    def _token_ids(self, texts: list[str], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """Vocabulary ids of every kept token of ``texts`` (new words added to ``vocab``) and the
        index of the text each belongs to. Words are factorised once per batch (pandas, C), so
        the per-token work stays out of Python."""
        import pandas as pd

        if self._stop_set is None:
            self._stop_set = _stopword_set(self.config.stopwords)
        stop = self._stop_set
        low = self.config.lowercase
        toks = [_WORD.findall(t.lower() if low else t) for t in texts]
        lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
        if not lens.sum():
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        codes, uniques = pd.factorize(np.fromiter(itertools.chain.from_iterable(toks), dtype=object, count=int(lens.sum())))
        gid = np.fromiter(
            (-1 if (stop and u.lower() in stop) else vocab.setdefault(u, len(vocab)) for u in uniques),
            dtype=np.int64, count=len(uniques),
        )
        ids = gid[codes]
        owner = np.repeat(np.arange(len(texts), dtype=np.int64), lens)
        keep = ids >= 0
        return ids[keep], owner[keep]

    def _write_bm25s(self, chunks: Sequence[Chunk], out: Path) -> None:
        """The bm25s eager index (CSC score matrix, one column per word) written to ``out`` in
        bm25s's own format, out of core (:mod:`~ragsweep.rag.retriever.sparse_build`): chunks are
        tokenised a batch at a time and their (chunk, word, tf) entries spilled to disk; the
        scores, with BM25Okapi's idf, are computed once every document frequency and length is
        known, and written a range of words at a time."""
        from tqdm.auto import tqdm

        bm25s = _import_bm25s()
        vocab: dict[str, int] = {}
        df = np.zeros(0, dtype=np.int64)
        lens: list[np.ndarray] = []
        n = len(chunks)
        own = self.progress is None
        bar = tqdm(total=n, desc="bm25 index", unit="chunk", disable=n < PROGRESS_MIN, smoothing=0.1) if own \
            else self.progress
        spill = SpillMatrix(sparse_build.scratch(out))
        try:
            row = 0
            for texts in sparse_build.text_batches(chunks):
                ids, owner = self._token_ids(texts, vocab)
                lens.append(np.bincount(owner, minlength=len(texts)).astype(np.int32))
                if ids.size:
                    width = np.int64(len(vocab) + 1)
                    keys, counts = np.unique(owner * width + ids, return_counts=True)  # by chunk, then word
                    words = (keys % width).astype(np.int32)
                    spill.add((keys // width + row).astype(np.int32), words, counts.astype(np.float32))
                    df = sparse_build.grow(df, words, len(vocab))
                row += len(texts)
                bar.update(len(texts))
            if not vocab or not spill.nnz:
                (out / "empty").write_text("no tokens in any chunk\n")
                return
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(f"writing {spill.nnz:,} scores")
            df = np.pad(df, (0, len(vocab) - len(df)))
            dl = np.concatenate(lens).astype(np.float64)
            idf = okapi_idf_array(df, n)
            k1, b, dtype = self.config.k1, self.config.b, self.config.dtype
            norm = (k1 * (1 - b + b * dl / dl.mean())).astype(np.float64)

            def scores(rows: np.ndarray, words: np.ndarray, tf: np.ndarray) -> tuple[np.ndarray, ...]:
                return rows, words, (idf[words] * (tf * (k1 + 1)) / (tf + norm[rows])).astype(dtype)

            # bm25s's own params and vocabulary files (its save()), then its three score arrays
            model = bm25s.BM25(k1=k1, b=b, method="atire", idf_method="lucene", dtype=dtype, int_dtype="int32",
                               backend="numpy")
            model.scores = {"data": np.zeros(0, dtype=dtype), "indices": np.zeros(0, dtype=np.int32),
                            "indptr": np.zeros(1, dtype=np.int64), "num_docs": n}
            model.vocab_dict = vocab
            model.nonoccurrence_array = None  # ATIRE has none (set by bm25s's own index())
            model.save(str(out), show_progress=False)
            files = {"data": out / "data.csc.index.npy", "indices": out / "indices.csc.index.npy",
                     "indptr": out / "indptr.csc.index.npy"}
            spill.write(files, len(vocab), dtype, scores)
        finally:
            spill.close()
            if own:
                bar.close()

    def _save(self, model: Any, path: Path) -> None:
        if model is None:
            (path / "empty").write_text("no tokens in any chunk\n")
        else:
            with open(path / "rank_bm25.pkl", "wb") as f:
                pickle.dump(model, f, protocol=pickle.HIGHEST_PROTOCOL)

    def _load(self, path: Path, mmap: bool = True) -> Any:
        if (path / "empty").exists():
            return None
        if self.config.backend == "bm25s":
            bm25s = _import_bm25s()

            # memory-mapped: a query reads only the columns of its own words
            return bm25s.BM25.load(str(path), mmap=mmap, load_corpus=False, show_progress=False)
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
        sc = self._model.scores
        return self._model._compute_relevance_from_scores(  # summed in float64 from the stored values
            sc["data"], sc["indptr"], sc["indices"], sc["num_docs"], np.asarray(ids, dtype=np.int64), np.float64)

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        return [rank_top_k(self.scores(t), k) for t in texts]
