"""One contract, run over every retriever the config group offers (conf/retriever/*.yaml).

A new retriever is picked up here by its YAML alone: it is built with Hydra's ``instantiate``,
validated against its ``Config`` schema, and must behave like every other retriever (BEIR
style: ranked hits per query from the one base protocol, ``Retriever.search``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from support import CONF as SUPPORT_CONF
from ragsweep.store.cache import Cache
from ragsweep.rag.retriever.base import Retriever
from ragsweep.types import Chunk, Hit, Query
from support.corpus import TEXTS as UNIT_TEXTS

CONF = SUPPORT_CONF / "retriever"
# the oracle reads the questions' relevance labels, not their text (a bound, not a ranker of text):
# its own contract is in tests/system/test_retrieval_only.py
YAMLS = sorted(p for p in CONF.glob("*.yaml") if p.stem != "oracle")
# models that load for seconds: run with the slow tests
SLOW = {"dense", "hybrid"}

TEXTS = [*UNIT_TEXTS, UNIT_TEXTS[0]]  # the unit tests' corpus and a duplicate of its first text
CHUNKS = [Chunk(f"c#{i}", f"doc{i}", 0, len(t), t) for i, t in enumerate(TEXTS)]
QUERIES = [
    Query("q-mercury", "What is the boiling point of mercury?"),
    Query("q-bees", "How do bees tell each other where flowers are?"),
    Query("q-everest", "Which mountain is the highest above sea level?"),
    Query("q-same-text", "What is the boiling point of mercury?"),  # same text, another id
    Query("q-nothing", "zzzz qqqq"),  # no word of it is in any chunk
]
PLANTED = {"q-mercury": "c#2", "q-bees": "c#7", "q-everest": "c#6"}


def _params() -> list:
    out = []
    for path in YAMLS:
        marks = [pytest.mark.slow] if path.stem in SLOW else []
        out.append(pytest.param(path, id=path.stem, marks=marks))
    return out


def build(path: Path, **overrides) -> Retriever:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    cfg = OmegaConf.merge(OmegaConf.load(path), overrides)
    return instantiate(cfg, _convert_="all")


def ranking(results: dict[str, list[Hit]]) -> dict[str, list[tuple[str, float]]]:
    return {q: [(h.chunk.chunk_id, round(h.score, 6)) for h in hits] for q, hits in results.items()}


def misses(cache: Cache) -> int:
    return sum(v for k, v in cache.stats.items() if k.endswith("/misses"))


@pytest.fixture(params=_params())
def yaml_path(request) -> Path:
    return request.param


def test_yaml_builds_a_retriever_its_schema_validates(yaml_path):
    from omegaconf import OmegaConf

    from ragsweep.pipeline.config import check_node

    retriever = build(yaml_path)
    assert isinstance(retriever, Retriever)
    assert retriever.name == yaml_path.stem  # the option name is the retriever's name
    data = {k: v for k, v in OmegaConf.to_container(OmegaConf.load(yaml_path)).items() if k != "_target_"}
    assert check_node("retriever", type(retriever).Config, data) == retriever.config
    assert retriever.top_k == data["top_k"]


def test_ranked_hits_per_query(yaml_path):
    retriever = build(yaml_path)
    retriever.index(CHUNKS)
    for k in (1, 3, len(CHUNKS)):
        results = retriever.search(QUERIES, k=k)
        assert list(results) == [q.query_id for q in QUERIES]
        for qid, hits in results.items():
            assert len(hits) == k  # k hits whenever there are k chunks, even with no matching word
            assert [h.rank for h in hits] == list(range(1, k + 1))
            assert all(isinstance(h, Hit) and h.chunk in CHUNKS for h in hits)
            assert len({h.chunk.chunk_id for h in hits}) == k  # no chunk twice
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
            assert all(isinstance(s, float) and s == s for s in scores)  # finite floats, no NaN
        assert results["q-same-text"] == results["q-mercury"]
    top = retriever.search(QUERIES, k=1)
    for qid, chunk_id in PLANTED.items():
        assert top[qid][0].chunk.chunk_id == chunk_id
    assert len(retriever.search(QUERIES)["q-bees"]) == retriever.top_k  # default k


def test_deterministic_and_independent_of_the_query_batch(yaml_path):
    first = build(yaml_path)
    first.index(CHUNKS)
    again = build(yaml_path)
    again.index(CHUNKS)
    full = ranking(first.search(QUERIES, k=5))
    assert ranking(again.search(QUERIES, k=5)) == full
    one_by_one = {}
    for q in reversed(QUERIES):
        one_by_one.update(ranking(again.search([q], k=5)))
    assert one_by_one == full


def test_ties_broken_by_chunk_order(yaml_path):
    retriever = build(yaml_path)
    retriever.index(CHUNKS)
    hits = retriever.search([Query("q", "Eiffel Tower Paris lattice")], k=2)["q"]
    assert [h.chunk.chunk_id for h in hits] == ["c#0", "c#8"]  # identical texts: index order


def test_cached_second_run_rebuilds_nothing_and_slices_smaller_k(yaml_path, tmp_path):
    cache = Cache(tmp_path)
    first = build(yaml_path)
    first.index(CHUNKS, cache=cache)
    deep = first.search(QUERIES, k=5, cache=cache)
    assert first.stats["queries_computed"] == len({q.query for q in QUERIES})

    before = misses(cache)
    second = build(yaml_path, top_k=2)  # top_k is not part of any key
    second.index(CHUNKS, cache=cache)  # the index (or its embeddings) comes from the cache
    assert second.search(QUERIES, k=5, cache=cache) == deep
    shallow = second.search(QUERIES, k=2, cache=cache)  # a slice of the stored ranking
    assert shallow == {q: hits[:2] for q, hits in deep.items()}
    assert second.stats["queries_computed"] == 0
    assert misses(cache) == before  # nothing recomputed at any stage

    fresh = build(yaml_path)  # and the cached answer is the uncached one
    fresh.index(CHUNKS)
    assert ranking(fresh.search(QUERIES, k=2)) == ranking(shallow)


def test_k_validated_and_clamped(yaml_path):
    retriever = build(yaml_path)
    with pytest.raises(RuntimeError):
        retriever.search(QUERIES)  # before index
    retriever.index(CHUNKS)
    with pytest.raises(ValueError):
        retriever.search(QUERIES, k=0)
    with pytest.warns(UserWarning, match=rf"k=50 .*\({len(CHUNKS)}\)"):
        results = retriever.search(QUERIES, k=50)
    assert all(len(h) == len(CHUNKS) for h in results.values())
    with pytest.raises(Exception, match=r"retriever\.top_k"):  # Hydra wraps the ValueError
        build(yaml_path, top_k=0)


def test_empty_index_answers_empty_lists(yaml_path):
    retriever = build(yaml_path)
    retriever.index([])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert retriever.search(QUERIES[:2], k=3) == {"q-mercury": [], "q-bees": []}
