"""Rerankers: re-score the first ``depth`` hits of a retriever and keep the best ``k``.

conf/reranker/<name>.yaml picks one (``reranker=none`` by default):

- ``none``: the retriever's ranking as it is (the pipeline asks the retriever for ``k`` hits).
- ``embedding``: cosine similarity of the query and each candidate chunk under a
  sentence-transformers bi-encoder; ``model: minilm`` is the bundled all-MiniLM-L6-v2 (offline).
  Embeddings go through the one embedding cache (:func:`ragsweep.corpus.embeddings.embed_texts`), so a
  chunk or question already embedded by the dense retriever costs nothing.
- ``cross_encoder``: a sentence-transformers ``CrossEncoder`` (default
  ``cross-encoder/ms-marco-MiniLM-L-6-v2``) from the Hugging Face hub (``$HF_ENDPOINT``, default
  https://huggingface.co) or a local path. Whether it can be loaded is checked when the config is
  validated, i.e. before any work: offline with the model in no local cache, the run (or the
  whole sweep) stops with a message naming the model and the hub. Each (query, chunk) score is
  cached under stage ``"rerank"``.

The pipeline asks the retriever for ``depth`` hits (at least ``k``), then ``rerank(queries,
hits, k, cache)``: new scores, ranked by score descending then the retriever's order, ranks
renumbered from 1. Candidates beyond ``depth`` are never seen by the reranker.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlparse

import numpy as np

from ragsweep.store.cache import Cache, class_key, fetch
from ragsweep.rag.retriever.base import SCORE_DECIMALS, build_config
from ragsweep.types import Hit, Query

DEFAULT_HUB = "https://huggingface.co"


def hub_url() -> str:
    return os.environ.get("HF_ENDPOINT") or DEFAULT_HUB


@dataclass
class RerankerConfig:
    #: hits of the retriever that are re-scored (the pipeline retrieves max(depth, k))
    depth: int = 50

    def __post_init__(self) -> None:
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 1:
            raise ValueError(f"reranker.depth ({self.depth}) must be an integer >= 1")


@dataclass
class NoRerankerConfig:
    pass


class Reranker:
    """Base class: subclasses implement ``_scores(query_text, chunk_texts, cache) -> array``."""

    name = "base"
    Config: type = RerankerConfig
    #: fields that do not change scores (kept out of cache keys)
    result_neutral_fields: tuple[str, ...] = ("depth", "device", "batch_size")

    def __init__(self, **kwargs: Any) -> None:
        self.config = build_config(self.Config, kwargs, "reranker")
        self.stats = {"queries": 0}

    @property
    def depth(self) -> int | None:
        """How many retriever hits to re-score (None: no reranking)."""
        return getattr(self.config, "depth", None)

    def cache_config(self) -> dict[str, Any]:
        cfg = {k: v for k, v in asdict(self.config).items() if k not in self.result_neutral_fields}
        return {"reranker": class_key(type(self)), **cfg}

    def rerank(self, queries: Sequence[Query], results: dict[str, list[Hit]], k: int, cache: Any = None) -> dict[str, list[Hit]]:
        out: dict[str, list[Hit]] = {}
        for q in queries:
            hits = results[q.query_id][: self.depth]
            if not hits:
                out[q.query_id] = []
                continue
            scores = np.asarray(self._scores(q.query, [h.chunk.search_text for h in hits], cache), dtype=np.float64)
            order = np.lexsort((np.arange(len(hits)), -np.round(scores, SCORE_DECIMALS)))[:k]
            out[q.query_id] = [Hit(chunk=hits[i].chunk, score=float(scores[i]), rank=r + 1) for r, i in enumerate(order)]
            self.stats["queries"] += 1
        return out

    def _scores(self, query: str, texts: list[str], cache: Any) -> np.ndarray:
        raise NotImplementedError


class NoReranker(Reranker):
    """``reranker=none``: the retriever's own top ``k``."""

    name = "none"
    Config = NoRerankerConfig

    def rerank(self, queries: Sequence[Query], results: dict[str, list[Hit]], k: int, cache: Any = None) -> dict[str, list[Hit]]:
        return {q.query_id: results[q.query_id][:k] for q in queries}


@dataclass
class EmbeddingRerankerConfig(RerankerConfig):
    model: str = "minilm"
    device: str = "auto"
    batch_size: int = 64
    max_seq_length: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model:
            raise ValueError("reranker.model must be 'minilm' or a sentence-transformers model name or path")


class EmbeddingReranker(Reranker):
    """Cosine similarity under a bi-encoder (the bundled MiniLM by default; offline)."""

    name = "embedding"
    Config = EmbeddingRerankerConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stats.update({"texts_encoded": 0})

    def _embed(self, texts: list[str], cache: Any) -> dict[str, np.ndarray]:
        from ragsweep.corpus.embeddings import embed_texts, load_sentence_transformer, model_key

        c = self.config

        def encode(todo: list[str]) -> np.ndarray:
            from ragsweep.rag.retriever.dense import resolve_device

            st = load_sentence_transformer(c.model, resolve_device(c.device, "reranker.device"), c.max_seq_length)
            return st.encode(todo, batch_size=c.batch_size, convert_to_numpy=True, show_progress_bar=False)

        vecs, encoded = embed_texts(texts, model_key(c.model, c.max_seq_length), encode, cache, "embedding (reranker)", c.batch_size)
        self.stats["texts_encoded"] += encoded
        return vecs

    def rerank(self, queries: Sequence[Query], results: dict[str, list[Hit]], k: int, cache: Any = None) -> dict[str, list[Hit]]:
        # every text of every query embedded in one batch (and one cache read), not query by query
        texts = [q.query for q in queries] + [h.chunk.search_text for q in queries for h in results[q.query_id][: self.depth]]
        self._vecs = self._embed(list(dict.fromkeys(texts)), cache)
        try:
            return super().rerank(queries, results, k, cache)
        finally:
            self._vecs = {}

    def _scores(self, query: str, texts: list[str], cache: Any) -> np.ndarray:
        unit = lambda v: v / (np.linalg.norm(v) or 1.0)  # noqa: E731
        qv = unit(self._vecs[query])
        return np.array([float(unit(self._vecs[t]) @ qv) for t in texts])


@dataclass
class CrossEncoderRerankerConfig(RerankerConfig):
    model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    device: str = "cpu"
    batch_size: int = 32
    max_length: int = 512

    def __post_init__(self) -> None:
        super().__post_init__()
        check_loadable(self.model)


def check_loadable(model: str, timeout_s: float = 3.0) -> None:
    """Fail fast (before any work) when ``model`` can be neither read locally nor fetched from the hub."""
    if not model:
        raise ValueError("reranker.model must be a CrossEncoder name on the hub or a local path")
    if Path(model).expanduser().exists():
        return
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(model, "config.json"), str):
            return  # downloaded before: loads offline
    except Exception:  # noqa: BLE001 - a malformed repo id: the hub answer below names it
        pass
    hub = hub_url()
    how = ("download it once where the hub is reachable (it is then cached), or set reranker.model to a local "
           "path, or use reranker=embedding (bundled MiniLM, offline)")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ValueError(f"reranker.model: CrossEncoder '{model}' is not in the local Hugging Face cache and "
                         f"HF_HUB_OFFLINE is set, so it cannot be fetched from the hub {hub}; {how}")
    parsed = urlparse(hub)
    try:
        socket.create_connection((parsed.hostname or "", parsed.port or (443 if parsed.scheme == "https" else 80)), timeout=timeout_s).close()
    except OSError as exc:
        raise ValueError(f"reranker.model: CrossEncoder '{model}' is not available offline and the hub {hub} "
                         f"cannot be reached ({exc}); {how}") from None


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder scores each (query, chunk) pair."""

    name = "cross_encoder"
    Config = CrossEncoderRerankerConfig

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._model: Any = None
        self.stats.update({"pairs_scored": 0})

    def load_model(self) -> Any:
        if self._model is None:
            from sentence_transformers import CrossEncoder

            c = self.config
            try:
                self._model = CrossEncoder(c.model, device=c.device, max_length=c.max_length)
            except Exception as exc:  # noqa: BLE001 - name the model and the hub, not a deep traceback
                from ragsweep.errors import ConfigError

                raise ConfigError(f"reranker.model: cannot load CrossEncoder '{c.model}' from the hub {hub_url()} "
                                  f"or a local path: {exc}") from None
        return self._model

    def _scores(self, query: str, texts: list[str], cache: Any) -> np.ndarray:
        base = self.cache_config()
        keys = {t: Cache.key("rerank", base, query, t) for t in dict.fromkeys(texts)}

        def compute(todo: list[str]) -> dict[str, float]:
            self.stats["pairs_scored"] += len(todo)
            scores = self.load_model().predict([(query, t) for t in todo], batch_size=self.config.batch_size, show_progress_bar=False)
            return {t: float(s) for t, s in zip(todo, np.asarray(scores).reshape(-1))}

        found = fetch(cache, "rerank", keys, compute)
        return np.array([found[t] for t in texts])


@dataclass
class TokenBudgetConfig(RerankerConfig):
    #: the most tokens (of ``tokenizer``: MiniLM's, as chunker.size) the kept chunks hold together
    tokens: int = 1500
    tokenizer: str = "minilm"

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or self.tokens < 1:
            raise ValueError(f"reranker.tokens ({self.tokens!r}) must be a whole number of tokens >= 1, e.g. 1500")


class TokenBudgetReranker(Reranker):
    """``reranker=token_budget``: no new scores; the retriever's best hits, in its order, while
    their texts hold at most ``tokens`` tokens together (the first hit always), then at most k.

    Systems whose chunks differ in length (chunking strategies, chunk sizes) then read the same
    number of retrieved tokens: the comparison at equal chunk budget."""

    name = "token_budget"
    Config = TokenBudgetConfig
    result_neutral_fields = ("depth",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tokens: dict[str, int] = {}
        self.stats.update({"hits_kept": 0, "tokens_kept": 0})

    def count(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text (memoised by text)."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._tokens]
        if todo:
            from ragsweep.corpus.chunker import _backend, tokenizer_parallelism

            with tokenizer_parallelism():
                encs = _backend(self.config.tokenizer).encode_batch(todo, add_special_tokens=False)
            self._tokens.update((t, len(e.ids)) for t, e in zip(todo, encs))
        return [self._tokens[t] for t in texts]

    def rerank(self, queries: Sequence[Query], results: dict[str, list[Hit]], k: int, cache: Any = None) -> dict[str, list[Hit]]:
        self.count([h.chunk.text for q in queries for h in results[q.query_id][: self.depth]])
        out: dict[str, list[Hit]] = {}
        for q in queries:
            kept, total = [], 0
            for h in results[q.query_id][: min(self.depth, k)]:
                n = self._tokens[h.chunk.text]
                if kept and total + n > self.config.tokens:
                    break
                kept.append(h)
                total += n
            out[q.query_id] = kept
            self.stats["queries"] += 1
            self.stats["hits_kept"] += len(kept)
            self.stats["tokens_kept"] += total
        return out
