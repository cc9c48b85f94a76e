"""Sentence embeddings through the cache (stage ``"embeddings"``, key = (model key, text)): the
raw vectors the offline checker, the RAGAS substitutes and the dense retriever share."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ragsweep.store.cache import Cache, fetch


def embed_cached(
    cache: Any,
    model_key: str,
    texts: Sequence[str],
    encode: Callable[[list[str]], Any],
    *,
    block: int | None = None,
    by_length: bool = False,
) -> tuple[dict[str, np.ndarray], int]:
    """Raw float32 vectors of the distinct ``texts`` and how many came from the cache.

    ``encode(texts) -> rows`` runs on the misses, ``block`` at a time (each block stored as it
    finishes); ``by_length``: misses sorted by length first (less padding per batch)."""
    unique = list(dict.fromkeys(texts))
    if by_length:
        unique = sorted(unique, key=len)
    keys = {t: Cache.key("embeddings", model_key, t) for t in unique}
    encoded = 0

    def compute(todo: list[str]) -> dict[str, np.ndarray]:
        nonlocal encoded
        encoded += len(todo)
        return dict(zip(todo, np.asarray(encode(todo), dtype=np.float32)))

    found = fetch(cache, "embeddings", keys, compute, block=block) if unique else {}
    vecs = {t: np.asarray(v, dtype=np.float32) for t, v in found.items()}
    return vecs, len(unique) - encoded
