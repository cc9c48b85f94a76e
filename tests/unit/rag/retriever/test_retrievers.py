from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from support.corpus import TEXTS
from ragsweep.store.cache import Cache
from ragsweep.rag.retriever.base import CACHE_DEPTH, rank_top_k
from ragsweep.rag.retriever.bm25 import BM25Retriever, tokenize
from ragsweep.rag.retriever.tfidf import TfidfRetriever
from ragsweep.types import Chunk, Query


QUERIES = [
    Query("q-mercury", "What is the boiling point of mercury?"),
    Query("q-bees", "How do bees tell each other where flowers are?"),
    Query("q-everest", "Which mountain is the highest above sea level?"),
]
PLANTED = {"q-mercury": "c#2", "q-bees": "c#7", "q-everest": "c#6"}


def make_chunks(texts: list[str], prefix: str = "c") -> list[Chunk]:
    return [Chunk(f"{prefix}#{i}", f"{prefix}-doc{i}", 0, len(t), t) for i, t in enumerate(texts)]


def synthetic_corpus(n_docs: int = 150, seed: int = 0) -> tuple[list[Chunk], list[Query]]:
    """Zipf-like word frequencies, so many terms are in over half the documents (negative idf)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    texts = [" ".join(rng.choices(vocab, weights, k=rng.randint(3, 40))) for _ in range(n_docs)]
    texts += [texts[5], texts[17]]  # exact duplicates: ties broken by chunk order
    queries = [Query(f"q{i}", " ".join(rng.choices(vocab, k=rng.randint(1, 6)))) for i in range(40)]
    return make_chunks(texts, "s"), queries


LEXICAL = [
    pytest.param(TfidfRetriever, {}, id="tfidf"),
    pytest.param(BM25Retriever, {"backend": "bm25s"}, id="bm25-bm25s"),
    pytest.param(BM25Retriever, {"backend": "rank_bm25"}, id="bm25-rank_bm25"),
]


@pytest.mark.parametrize("cls, kwargs", LEXICAL)
def test_planted_chunk_ranks_first(cls, kwargs):
    retriever = cls(**kwargs)
    retriever.index(make_chunks(TEXTS))
    results = retriever.search(QUERIES, k=3)
    for q in QUERIES:
        hits = results[q.query_id]
        assert [h.rank for h in hits] == [1, 2, 3]
        assert hits[0].chunk.chunk_id == PLANTED[q.query_id]
        assert hits[0].score > hits[1].score
        assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))


@pytest.mark.parametrize("cls, kwargs", LEXICAL)
def test_default_k_is_top_k(cls, kwargs):
    retriever = cls(top_k=2, **kwargs)
    assert retriever.top_k == 2
    retriever.index(make_chunks(TEXTS))
    assert all(len(h) == 2 for h in retriever.search(QUERIES).values())


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-7), ("float64", 1e-12)])
def test_bm25_backends_rank_identically(dtype, rtol):
    """bm25s scores as BM25Okapi to the stored precision (float32 by default) and ranks identically."""
    chunks, queries = synthetic_corpus()
    a, b = BM25Retriever(backend="bm25s", dtype=dtype), BM25Retriever(backend="rank_bm25")
    a.index(chunks)
    b.index(chunks)
    ra, rb = a.search(queries, k=len(chunks)), b.search(queries, k=len(chunks))
    for q in queries:
        assert [h.chunk.chunk_id for h in ra[q.query_id]] == [h.chunk.chunk_id for h in rb[q.query_id]]
        np.testing.assert_allclose(a.scores(q.query), b.scores(q.query), rtol=rtol, atol=1e-12)
    # the corpus exercises BM25Okapi's epsilon floor: some terms are in more than half the chunks
    df = Counter(t for c in chunks for t in set(tokenize(c.text)))
    assert any(n > len(chunks) / 2 for n in df.values())


def test_bm25_stopwords_and_case_are_shared_by_both_backends():
    chunks = make_chunks(["The THE the cat", "a dog", "the the dog dog"])
    for backend in ("bm25s", "rank_bm25"):
        r = BM25Retriever(backend=backend, stopwords=None)
        r.index(chunks)
        assert r.search([Query("q", "THE")], k=1)["q"][0].chunk.chunk_id == "c#0"
        r = BM25Retriever(backend=backend)  # english stop words: "the" scores nothing
        r.index(chunks)
        assert all(h.score == 0 for h in r.search([Query("q", "the")], k=3)["q"])


def test_ties_broken_by_chunk_order():
    chunks = make_chunks(["alpha beta", "gamma", "alpha beta", "delta", "alpha beta", "epsilon", "zeta"])
    for retriever in (TfidfRetriever(), BM25Retriever(backend="bm25s"), BM25Retriever(backend="rank_bm25")):
        retriever.index(chunks)
        hits = retriever.search([Query("q", "alpha")], k=5)["q"]
        assert [h.chunk.chunk_id for h in hits] == ["c#0", "c#2", "c#4", "c#1", "c#3"]
    idx, _ = rank_top_k(np.array([1.0, 3.0, 3.0 + 1e-13, 2.0, 3.0]), 2)
    assert idx.tolist() == [1, 2]


@pytest.mark.parametrize("cls, kwargs", LEXICAL)
def test_k_larger_than_chunks_is_clamped_with_warning(cls, kwargs):
    retriever = cls(**kwargs)
    retriever.index(make_chunks(TEXTS))
    with pytest.warns(UserWarning, match=r"k=50 .*\(8\)"):
        results = retriever.search(QUERIES, k=50)
    assert all(len(h) == 8 for h in results.values())


def test_top_k_validated():
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"retriever\.top_k"):
            BM25Retriever(top_k=bad)
    with pytest.raises(ValueError, match=r"retriever\.backend"):
        BM25Retriever(backend="lucene")
    with pytest.raises(ValueError, match=r"retriever\.topk.*retriever\.top_k"):
        TfidfRetriever(topk=3)
    r = TfidfRetriever()
    with pytest.raises(RuntimeError):
        r.search(QUERIES)
    r.index(make_chunks(TEXTS))
    with pytest.raises(ValueError):
        r.search(QUERIES, k=0)


@pytest.mark.parametrize("cls, kwargs", LEXICAL)
def test_second_search_is_a_cache_hit_and_sliced(cls, kwargs, tmp_path):
    chunks, queries = synthetic_corpus(60)
    cache = Cache(tmp_path)
    first = cls(**kwargs)
    first.index(chunks, cache=cache)
    r4 = first.search(queries, k=4, cache=cache)
    assert first.stats["queries_computed"] == len(queries)

    second = cls(**kwargs, top_k=2)  # top_k is not part of the key
    second.index(chunks, cache=cache)
    assert cache.stats["index/hits"] == 1  # persisted index reused
    again = second.search(queries, k=4, cache=cache)
    assert second.stats == {"queries_computed": 0, "queries_cached": len(queries)}
    assert again == r4
    r2 = second.search(queries, k=2, cache=cache)  # sliced from the stored ranking
    assert second.stats["queries_computed"] == 0
    assert {q: h[:2] for q, h in r4.items()} == r2

    deep = CACHE_DEPTH + 5  # deeper than stored: recomputed, and equal to a fresh search
    rdeep = second.search(queries, k=deep, cache=cache)
    assert second.stats["queries_computed"] == len(queries)
    fresh = cls(**kwargs)
    fresh.index(chunks)
    assert rdeep == fresh.search(queries, k=deep)

    other = cls(**kwargs)  # different chunks: a different key
    other.index(chunks[:-1], cache=cache)
    other.search(queries[:3], k=4, cache=cache)
    assert other.stats["queries_computed"] == 3


def test_empty_vocabulary_and_empty_query():
    chunks = make_chunks(["the of and", "a an"])
    for retriever in (TfidfRetriever(), BM25Retriever(backend="bm25s"), BM25Retriever(backend="rank_bm25")):
        retriever.index(chunks)
        hits = retriever.search([Query("q", "the cat")], k=2)["q"]
        assert [h.chunk.chunk_id for h in hits] == ["c#0", "c#1"] and all(h.score == 0 for h in hits)
    r = BM25Retriever()
    r.index(make_chunks(TEXTS))
    assert [h.chunk.chunk_id for h in r.search([Query("q", "?!")], k=2)["q"]] == ["c#0", "c#1"]


@pytest.mark.slow
def test_dense_ranks_planted_first_and_caches_embeddings(tmp_path):
    from ragsweep.rag.retriever.dense import DenseRetriever

    cache = Cache(tmp_path)
    retriever = DenseRetriever(device="cpu")
    chunks = make_chunks(TEXTS)
    retriever.index(chunks, cache=cache)
    results = retriever.search(QUERIES, k=3, cache=cache)
    for q in QUERIES:
        hits = results[q.query_id]
        assert hits[0].chunk.chunk_id == PLANTED[q.query_id]
        assert -1.0001 <= hits[-1].score <= hits[0].score <= 1.0001  # cosine
    assert retriever.stats["texts_encoded"] == len(TEXTS) + len(QUERIES)

    again = DenseRetriever(device="cpu")  # all embeddings cached: the model is never loaded
    again.index(chunks, cache=cache)
    assert again.search(QUERIES, k=3, cache=cache) == results
    assert again.stats["texts_encoded"] == 0 and again._model is None
    # a new chunk list: only its new texts are encoded; queries' embeddings are reused
    more = DenseRetriever(device="cpu")
    more.index(make_chunks(TEXTS + ["Bees make honey from nectar."]), cache=cache)
    more.search(QUERIES, k=3, cache=cache)
    assert more.stats["texts_encoded"] == 1
