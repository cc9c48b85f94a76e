"""TF-IDF with cosine similarity (scikit-learn ``TfidfVectorizer``, L2-normalised rows).

The fitted vectorizer and the chunk matrix are persisted under the cache's ``blobs/index/`` (by
config and chunks): the vectorizer pickled, the matrix by term (CSC: ``data``/``indices``/
``indptr`` as ``.npy`` files, which - unlike a zipped ``.npz`` - load memory-mapped). A query
reads only the columns of its own terms, so a warm search touches a tiny part of the index.

The matrix is built out of core (:mod:`ragsweep.rag.retriever.sparse_build`: counts spilled batch by
batch, weights written a range of terms at a time), and is ``TfidfVectorizer.fit_transform``'s
matrix bit for bit, with the vectorizer's own vocabulary and idf: a million chunks in about 1 GB
instead of 8. Without a cache it is built in a scratch directory and read back into memory.
"""

from __future__ import annotations

import itertools
import json
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ragsweep.store.cache import Cache
from ragsweep.rag.retriever import sparse_build
from ragsweep.rag.retriever.base import Retriever, RetrieverConfig, check_stopwords, rank_top_k
from ragsweep.rag.retriever.sparse_build import SpillMatrix
from ragsweep.types import Chunk

_QUERY_BATCH = 256
PROGRESS_MIN = 2000
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

    def _vectorizer_for(self) -> Any:
        from sklearn.feature_extraction.text import TfidfVectorizer

        c = self.config
        return TfidfVectorizer(sublinear_tf=c.sublinear_tf, stop_words=c.stopwords, lowercase=c.lowercase,
                               ngram_range=(1, c.ngram_max), min_df=c.min_df, dtype=np.float64)

    def _write(self, chunks: Sequence[Chunk], out: Path) -> None:
        """The fitted vectorizer and the chunk matrix (CSC ``.npy`` parts) written to ``out``, out
        of core (:mod:`~ragsweep.rag.retriever.sparse_build`): the same matrix, value for value, as
        ``TfidfVectorizer.fit_transform`` over every chunk, without holding it.

        Pass 1 counts each batch's terms (the vectorizer's own analyzer) with the ids scikit-learn
        gives them while counting (first occurrence), spilling (chunk, term, count) entries;
        then, with every document frequency known, the vocabulary is cut at ``min_df`` and sorted
        as scikit-learn sorts it, and each batch's rows go through the fitted ``TfidfTransformer``
        (sublinear tf, idf, L2 norm summed in scikit-learn's entry order) before being written a
        range of terms at a time."""
        import pandas as pd
        from scipy import sparse
        from sklearn.feature_extraction.text import TfidfTransformer
        from tqdm.auto import tqdm

        vec = self._vectorizer_for()
        analyze, stop = _words(vec)
        vocab: dict[str, int] = {}
        df = np.zeros(0, dtype=np.int64)
        n = len(chunks)
        own = self.progress is None
        bar = tqdm(total=n, desc="tfidf index", unit="chunk", disable=n < PROGRESS_MIN, smoothing=0.1) if own \
            else self.progress
        spill = SpillMatrix(sparse_build.scratch(out))
        try:
            row = 0
            for texts in sparse_build.text_batches(chunks):
                toks = [analyze(t) for t in texts]
                lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
                if lens.sum():
                    codes, uniques = pd.factorize(np.fromiter(itertools.chain.from_iterable(toks), dtype=object,
                                                              count=int(lens.sum())))
                    gid = np.fromiter((-1 if u in stop else vocab.setdefault(u, len(vocab)) for u in uniques),
                                      dtype=np.int64, count=len(uniques))  # first-seen order, as scikit-learn's
                    width = np.int64(len(vocab) + 1)
                    ids, owner = gid[codes], np.repeat(np.arange(len(texts), dtype=np.int64), lens)
                    keep = ids >= 0
                    keys, counts = np.unique(owner[keep] * width + ids[keep], return_counts=True)  # by chunk, then id
                    terms = (keys % width).astype(np.int32)
                    spill.add((keys // width + row).astype(np.int32), terms, counts.astype(np.float64))
                    df = sparse_build.grow(df, terms, len(vocab))
                row += len(texts)
                bar.update(len(texts))
            df = np.pad(df, (0, len(vocab) - len(df)))
            kept = df >= self.config.min_df  # max_df is 1.0: no upper cut
            if not kept.any():  # no term (or none in min_df chunks): nothing can match
                (out / "empty").write_text("no word token in any chunk\n")
                return
            if hasattr(bar, "set_postfix_str"):
                bar.set_postfix_str(f"writing {spill.nnz:,} weights")
            words = [w for w, i in vocab.items() if kept[i]]
            order = sorted(range(len(words)), key=words.__getitem__)  # scikit-learn's sorted vocabulary
            new_id = np.full(len(vocab), -1, dtype=np.int64)
            new_id[np.flatnonzero(kept)[order]] = np.arange(len(order))
            vec.vocabulary_ = {words[j]: i for i, j in enumerate(order)}
            vec.fixed_vocabulary_ = False
            tf = TfidfTransformer(norm=vec.norm, use_idf=vec.use_idf, smooth_idf=vec.smooth_idf,
                                  sublinear_tf=vec.sublinear_tf)
            # fitted on an empty row of the right width (its fitted attributes: n_features_in_, ...),
            # then given the idf its fit computes, from the kept terms' document frequencies
            tf.fit(sparse.csr_array((np.ones(0), np.zeros(0, np.int32), np.zeros(2, np.int64)), shape=(1, len(order))))
            kdf = np.zeros(len(order), dtype=np.float64)
            kdf[new_id[kept]] = df[kept]
            idf = np.full_like(kdf, n + int(tf.smooth_idf))
            idf /= kdf + float(tf.smooth_idf)
            np.log(idf, out=idf)
            idf += 1.0
            tf.idf_ = idf
            vec._tfidf = tf

            def weights(rows: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
                keep = kept[terms]
                rows, cols, counts = rows[keep], new_id[terms[keep]], counts[keep]
                first = int(rows[0]) if len(rows) else 0
                r = rows - first
                indptr = np.concatenate(([0], np.cumsum(np.bincount(r, minlength=int(r[-1]) + 1 if len(r) else 0))))
                x = sparse.csr_array((counts, cols.astype(np.int32), indptr), shape=(len(indptr) - 1, len(order)))
                x.has_sorted_indices = False  # scikit-learn's entry order: by first-occurrence id
                x = tf.transform(x, copy=False)
                return rows, cols, x.data

            spill.write({"data": out / "data.npy", "indices": out / "indices.npy", "indptr": out / "indptr.npy"},
                        len(order), np.float64, weights)
            with open(out / "vectorizer.pkl", "wb") as f:
                pickle.dump(vec, f, protocol=pickle.HIGHEST_PROTOCOL)
            (out / "shape.json").write_text(json.dumps([n, len(order)]))
        finally:
            spill.close()
            if own:
                bar.close()

    def _build(self, chunks: Sequence[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        if cache is None or not getattr(cache, "enabled", True):
            sparse_build.in_scratch(lambda d: self._write(chunks, d), lambda d: self._open(d, mmap=None))
            return
        key = Cache.key("index", FORMAT, self.cache_config(), self.fingerprint)
        self._open(cache.blob_dir("index", key, lambda tmp: self._write(chunks, tmp)), mmap="r")

    def _open(self, path: Path, mmap: str | None) -> None:
        if (path / "empty").exists():
            self._vectorizer, self._matrix = None, None
            return
        with open(path / "vectorizer.pkl", "rb") as f:
            self._vectorizer = pickle.load(f)
        # memory-mapped CSC parts: a query reads the columns of its terms only
        self._matrix = _Columns(*(np.load(path / f"{n}.npy", mmap_mode=mmap) for n in ("data", "indices", "indptr")),
                                shape=tuple(json.loads((path / "shape.json").read_text())))

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        if self._vectorizer is None:
            return [rank_top_k(np.zeros(self._n), k) for _ in texts]
        cols = self._matrix
        out = []
        for b in range(0, len(texts), _QUERY_BATCH):
            q = self._vectorizer.transform(texts[b : b + _QUERY_BATCH]).tocsr()
            for r in range(q.shape[0]):
                lo, hi = q.indptr[r], q.indptr[r + 1]
                out.append(rank_top_k(cols.dot(q.indices[lo:hi], q.data[lo:hi]), k))
        return out


def _words(vec: Any) -> tuple[Any, frozenset[str]]:
    """The vectorizer's analyzer and the stop words left for the caller to drop. For single words,
    scikit-learn's analyzer is decode -> preprocess -> tokenize -> drop stop words token by token;
    the caller drops them once per distinct word instead (the same words, in the same order;
    150k chunks, 4 interleaved runs each: the whole build 15.6 -> 14.9 s, 5%). N-grams are built
    from the kept words, so there the analyzer stays whole."""
    if vec.ngram_range != (1, 1) or vec.analyzer != "word":
        return vec.build_analyzer(), frozenset()
    decode, pre, tok = vec.decode, vec.build_preprocessor(), vec.build_tokenizer()
    return (lambda text: tok(pre(decode(text)))), frozenset(vec.get_stop_words() or ())


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
