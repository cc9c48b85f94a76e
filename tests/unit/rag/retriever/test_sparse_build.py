"""The lexical indexes built out of core (issue 29: peak memory at a million chunks): the CSC
matrix written a column range at a time from spilled batches is the in-memory one, value for value."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from ragsweep.rag.retriever import sparse_build
from ragsweep.rag.retriever.bm25 import BM25Retriever
from ragsweep.rag.retriever.sparse_build import SpillMatrix
from ragsweep.rag.retriever.tfidf import TfidfRetriever
from ragsweep.types import Chunk, Query

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def _chunks(n=700, seed=3):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = rng.choice(WORDS + [f"rare{i % 97}", f"w{i}"], size=int(rng.integers(0, 40)))
        out.append(Chunk(f"d{i}#0", f"d{i}", 0, 1, " ".join(words) + (" The and of" if i % 5 == 0 else "")))
    return out


@pytest.mark.parametrize("budget", [64, 10_000, None])
def test_spilled_batches_give_scipys_csc_matrix(tmp_path, budget):
    rng = np.random.default_rng(0)
    n_rows, n_cols = 500, 60
    dense = np.where(rng.random((n_rows, n_cols)) < 0.1, rng.random((n_rows, n_cols)), 0.0)
    dense[:, 7] = 0.0  # a column with no entry
    csr = sparse.csr_matrix(dense)
    spill = SpillMatrix(tmp_path / "spill")
    for lo in range(0, n_rows, 37):  # batches of whole rows, entries by row then column
        part = csr[lo : lo + 37].tocoo()
        order = np.lexsort((part.col, part.row))
        spill.add(part.row[order] + lo, part.col[order], part.data[order])
    files = {k: tmp_path / f"{k}.npy" for k in ("data", "indices", "indptr")}
    spill.write(files, n_cols, np.float64, transform=lambda r, c, v: (r, c, 2 * v), budget=budget)
    csc = (2 * csr).tocsc()
    csc.sort_indices()
    got = {k: np.load(p, mmap_mode="r") for k, p in files.items()}
    assert got["indices"].dtype == np.int32 and got["indptr"].dtype == np.int64
    np.testing.assert_array_equal(got["indptr"], csc.indptr)
    np.testing.assert_array_equal(got["indices"], csc.indices)
    np.testing.assert_array_equal(got["data"], csc.data)
    spill.close()
    assert not (tmp_path / "spill").exists()


def test_tfidf_out_of_core_is_scikit_learns_matrix_bit_for_bit(monkeypatch):
    monkeypatch.setattr(sparse_build, "BUDGET", 4096)  # many column ranges
    monkeypatch.setattr(sparse_build, "TEXT_BATCH", 50)  # many spilled batches
    chunks = _chunks()
    for kw in ({}, {"stopwords": None, "lowercase": False}, {"min_df": 3, "ngram_max": 2, "sublinear_tf": False}):
        r = TfidfRetriever(**kw)
        r.index(chunks)
        ref = r._vectorizer_for()
        m = ref.fit_transform(c.text for c in chunks).tocsc()
        assert r._matrix.shape == m.shape
        np.testing.assert_array_equal(r._matrix.indptr, m.indptr)
        np.testing.assert_array_equal(r._matrix.indices, m.indices)
        assert np.array_equal(r._matrix.data, m.data)  # not approximately: the same float64 values
        assert r._vectorizer.vocabulary_ == ref.vocabulary_ and np.array_equal(r._vectorizer.idf_, ref.idf_)
        queries = ["alpha beta rare3", "w17 kappa kappa", "nothing here"]
        assert (r._vectorizer.transform(queries) != ref.transform(queries)).nnz == 0


def test_bm25_out_of_core_ranks_as_rank_bm25_and_budget_does_not_matter(monkeypatch):
    chunks = _chunks()
    queries = ["alpha beta rare3", "w17 kappa kappa", "rho sigma tau"]
    big = BM25Retriever()
    big.index(chunks)
    monkeypatch.setattr(sparse_build, "BUDGET", 2048)
    monkeypatch.setattr(sparse_build, "TEXT_BATCH", 64)
    small = BM25Retriever()
    small.index(chunks)
    for k in ("data", "indices", "indptr"):
        assert np.array_equal(big._model.scores[k], small._model.scores[k])
    ref = BM25Retriever(backend="rank_bm25")
    ref.index(chunks)
    for q in queries:
        np.testing.assert_allclose(small.scores(q), ref.scores(q), rtol=1e-6, atol=1e-9)


def test_a_lexical_index_over_chunks_without_words_is_empty(tmp_path):
    from ragsweep.store.cache import Cache

    chunks = [Chunk("a#0", "a", 0, 3, "the"), Chunk("b#0", "b", 0, 3, "...")]
    for cls in (BM25Retriever, TfidfRetriever):
        r = cls()
        r.index(chunks, cache=Cache(tmp_path / cls.name))
        assert [h.score for h in r.search([Query("q", "the")], k=2)["q"]] == [0.0, 0.0]
        assert not list((tmp_path / cls.name).rglob(".spill"))


def test_an_index_over_a_chunk_file_reads_its_texts_batch_by_batch(tmp_path):
    from ragsweep.corpus import chunkstore

    chunks = _chunks(300)
    path = tmp_path / "chunks.arrow"
    chunkstore.write(path, (chunks[s : s + 70] for s in range(0, 300, 70)))
    table = chunkstore.ChunkTable(path, fingerprint="f")
    parts = list(table.iter_texts())
    assert [len(p) for p in parts] == [70, 70, 70, 70, 20]  # the stored record batches
    assert [t for p in parts for t in p] == [c.text for c in chunks]
    on_file, in_memory = TfidfRetriever(), TfidfRetriever()
    on_file.index(table)
    in_memory.index(chunks)
    assert np.array_equal(on_file._matrix.data, in_memory._matrix.data)
