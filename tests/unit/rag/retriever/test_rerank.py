"""Rerankers: none passes through, embedding re-scores with the bundled MiniLM (offline, cached),
cross_encoder fails before any work when its model is out of reach, and scores through the cache."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.store.cache import Cache
from ragsweep.pipeline.config import validate
from ragsweep.errors import ConfigError
from ragsweep.rag.retriever.rerank import CrossEncoderReranker, EmbeddingReranker, NoReranker
from ragsweep.types import Chunk, Hit, Query

TEXTS = [
    "The stock market closed higher on Tuesday after strong earnings reports.",
    "Penguins are flightless birds that live almost exclusively in the Southern Hemisphere.",
    "A recipe for sourdough bread needs flour, water, salt and a starter.",
    "Emperor penguins breed during the Antarctic winter and huddle for warmth.",
]


def _hits(texts=TEXTS):
    return [Hit(Chunk(f"c{i}", f"d{i}", 0, len(t), t), score=1.0 - i / 10, rank=i + 1) for i, t in enumerate(texts)]


def _query(text="Where do penguins live and how do they keep warm?"):
    return Query("q1", text)


def test_none_keeps_the_retrievers_top_k():
    hits = _hits()
    out = NoReranker().rerank([_query()], {"q1": hits}, 2)
    assert out["q1"] == hits[:2]
    assert NoReranker().depth is None


def test_embedding_reranker_rescoring_moves_relevant_chunks_up_and_is_cached(tmp_path):
    cache = Cache(tmp_path / "cache")
    rr = EmbeddingReranker(depth=4, device="cpu")
    out = rr.rerank([_query()], {"q1": _hits()}, 2, cache=cache)
    ids = [h.chunk.chunk_id for h in out["q1"]]
    assert set(ids) == {"c1", "c3"}  # the two penguin chunks, from ranks 2 and 4
    assert [h.rank for h in out["q1"]] == [1, 2]
    assert out["q1"][0].score >= out["q1"][1].score
    assert rr.stats["texts_encoded"] == 5
    again = EmbeddingReranker(depth=4, device="cpu")
    out2 = again.rerank([_query()], {"q1": _hits()}, 2, cache=cache)
    assert again.stats["texts_encoded"] == 0  # every embedding from the cache
    assert [(h.chunk.chunk_id, round(h.score, 6)) for h in out2["q1"]] == [(h.chunk.chunk_id, round(h.score, 6)) for h in out["q1"]]


def test_depth_limits_what_is_rescored():
    rr = EmbeddingReranker(depth=1, device="cpu")
    out = rr.rerank([_query()], {"q1": _hits()}, 4)
    assert [h.chunk.chunk_id for h in out["q1"]] == ["c0"]  # only the first hit was a candidate


class _FakeCE:
    def __init__(self):
        self.pairs = 0

    def predict(self, pairs, batch_size=32, show_progress_bar=False):
        self.pairs += len(pairs)
        return np.array([float("penguin" in t.lower()) + len(t) / 1000 for _, t in pairs])


def test_cross_encoder_scores_pairs_once_through_the_cache(tmp_path):
    cache = Cache(tmp_path / "cache")
    model_dir = tmp_path / "model"  # a local path: no hub needed
    model_dir.mkdir()
    rr = CrossEncoderReranker(model=str(model_dir), depth=3)
    fake = _FakeCE()
    rr._model = fake
    out = rr.rerank([_query()], {"q1": _hits()}, 2, cache=cache)
    assert [h.chunk.chunk_id for h in out["q1"]] == ["c1", "c0"]  # c3 is beyond depth 3
    assert fake.pairs == 3
    rr2 = CrossEncoderReranker(model=str(model_dir), depth=3)
    rr2._model = fake
    rr2.rerank([_query()], {"q1": _hits()}, 2, cache=cache)
    assert fake.pairs == 3 and rr2.stats["pairs_scored"] == 0


def test_cross_encoder_offline_fails_before_any_work_naming_model_and_hub(compose_cfg, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as err:
        validate(compose_cfg("reranker=cross_encoder"))
    msg = str(err.value)
    assert "cross-encoder/ms-marco-MiniLM-L-6-v2" in msg and "https://huggingface.co" in msg and "reranker.model" in msg


def test_cross_encoder_unreachable_hub_is_named(compose_cfg, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    with pytest.raises(ConfigError, match=r"http://127.0.0.1:9.*cannot be reached"):
        validate(compose_cfg("reranker=cross_encoder", "reranker.model=nobody/no-such-model"))


@pytest.mark.parametrize("option", ["none", "embedding"])
def test_options_validate_and_are_swept_like_any_group(compose_cfg, option):
    cfg = compose_cfg(f"reranker={option}")
    out = validate(cfg)
    assert "reranker" in out
    from ragsweep.tracking import short_params

    assert short_params(cfg)["reranker"] == option


def test_bad_depth_is_named(compose_cfg):
    with pytest.raises(ConfigError, match="reranker.depth"):
        validate(compose_cfg("reranker=embedding", "reranker.depth=0"))
