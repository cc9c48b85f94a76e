"""The hybrid retriever's fusion arithmetic (its protocol is checked by test_retriever_contract)."""

from __future__ import annotations

import pytest

from ragsweep.store.cache import Cache
from ragsweep.types import Chunk, Query

pytestmark = pytest.mark.slow  # loads MiniLM

TEXTS = ["bees dance to show flowers", "mercury boils at 356.7 degrees", "honey bees live in a hive",
         "mountains are high", "the ocean is deep", "flowers bloom in spring"]
CHUNKS = [Chunk(f"c{i}", f"d{i}", 0, len(t), t) for i, t in enumerate(TEXTS)]
QUERY = [Query("q", "how do bees find flowers")]


def hybrid(**kw):
    from ragsweep.rag.retriever.hybrid import HybridRetriever

    r = HybridRetriever(dense={"device": "cpu"}, **kw)
    r.index(CHUNKS)
    return r


def side_runs(r):
    n = len(CHUNKS)
    return {name: side.search(QUERY, n)["q"] for name, side in r.sides.items()}


def test_rrf_is_the_sum_of_reciprocal_ranks():
    r = hybrid(rrf_k=60)
    expected: dict[str, float] = {}
    for hits in side_runs(r).values():
        for h in hits:
            expected[h.chunk.chunk_id] = expected.get(h.chunk.chunk_id, 0.0) + 1 / (60 + h.rank)
    fused = r.search(QUERY, k=len(CHUNKS))["q"]
    assert {h.chunk.chunk_id: h.score for h in fused} == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weight, side", [(0.0, "bm25"), (1.0, "dense")])
def test_weighted_fusion_at_either_end_is_that_side(weight, side):
    r = hybrid(fusion="weighted", weight=weight)
    fused = r.search(QUERY, k=3)["q"]
    assert [h.chunk.chunk_id for h in fused] == [h.chunk.chunk_id for h in side_runs(r)[side][:3]]
    assert fused[0].score == pytest.approx(1.0)  # min-max normalised: the best is 1


def test_weighted_scores_are_min_max_normalised_per_side():
    r = hybrid(fusion="weighted", weight=0.25)
    expected: dict[str, float] = {}
    for name, hits in side_runs(r).items():
        scores = [h.score for h in hits]
        low, high = min(scores), max(scores)
        w = 0.25 if name == "dense" else 0.75
        for h in hits:
            expected[h.chunk.chunk_id] = expected.get(h.chunk.chunk_id, 0.0) + w * (h.score - low) / (high - low)
    fused = r.search(QUERY, k=len(CHUNKS))["q"]
    assert {h.chunk.chunk_id: h.score for h in fused} == pytest.approx(expected, abs=1e-9)


def test_sides_share_their_cache_with_plain_runs(tmp_path):
    from ragsweep.rag.retriever.bm25 import BM25Retriever

    cache = Cache(tmp_path)
    plain = BM25Retriever()
    plain.index(CHUNKS, cache=cache)
    plain.search(QUERY, k=4, cache=cache)
    r = hybrid()
    r.index(CHUNKS, cache=cache)
    r.search(QUERY, k=4, cache=cache)
    assert r.sides["bm25"].stats["queries_computed"] == 0  # the plain BM25 run's ranking was reused
    other = hybrid(fusion="weighted")  # another fusion: another key, same sides
    other.index(CHUNKS, cache=cache)
    before = cache.stats["embeddings/misses"]
    other.search(QUERY, k=4, cache=cache)
    assert other.stats["queries_computed"] == 1 and cache.stats["embeddings/misses"] == before


def test_bad_fields_named():
    from ragsweep.rag.retriever.hybrid import HybridRetriever

    for kw, msg in [({"fusion": "max"}, r"retriever\.fusion"), ({"weight": 1.5}, r"retriever\.weight"),
                    ({"bm25": {"k2": 1}}, r"retriever\.bm25\.k2: unknown field"), ({"rrf_k": -1}, r"retriever\.rrf_k")]:
        with pytest.raises(ValueError, match=msg):
            HybridRetriever(**kw)
