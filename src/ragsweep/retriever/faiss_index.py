"""The FAISS index of the dense retriever, built from (memory-mapped) embeddings block by block.

- ``flat``: ``IndexFlatIP``, exact inner product. Holds every vector in memory:
  ``rows x dim x 4`` bytes (1M chunks of all-MiniLM-L6-v2: 1.5 GB).
- ``hnsw``: ``IndexHNSWFlat`` (inner product), approximate; faster search over millions of
  chunks, about 1.5x the flat index's memory; its recall against ``flat`` is measured by
  ``experiments/bench_corpus_scale.py``.

:func:`check_fits` refuses, before any work starts, an index that cannot fit in memory.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

KINDS = ("flat", "hnsw")
ADD_BLOCK = 65536


def make(kind: str, dim: int, hnsw_m: int = 32) -> Any:
    import faiss

    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 80
        return index
    return faiss.IndexFlatIP(dim)


def add(index: Any, rows: np.ndarray, normalize: bool = True) -> None:
    """Add ``rows`` (e.g. a memmap) a block at a time, normalised when asked: never a full copy."""
    for s in range(0, rows.shape[0], ADD_BLOCK):
        block = np.asarray(rows[s : s + ADD_BLOCK], dtype=np.float32)
        if normalize:
            norms = np.linalg.norm(block, axis=1, keepdims=True)
            block = block / np.where(norms == 0, 1.0, norms)
        index.add(np.ascontiguousarray(block, dtype=np.float32))


def set_search_params(index: Any, kind: str, ef_search: int) -> None:
    if kind == "hnsw":
        index.hnsw.efSearch = ef_search


def index_bytes(kind: str, rows: int, dim: int, hnsw_m: int = 32) -> int:
    """Memory the index will hold (vectors, plus HNSW's links)."""
    vectors = rows * dim * 4
    return vectors + (rows * hnsw_m * 2 * 4 if kind == "hnsw" else 0)


def available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def check_fits(kind: str, rows: int, dim: int, hnsw_m: int = 32, available: int | None = None) -> None:
    """Raise before any work when the index cannot fit in the memory available now."""
    need = index_bytes(kind, rows, dim, hnsw_m)
    have = available_bytes() if available is None else available
    if have is not None and need > have:
        raise MemoryError(
            f"retriever.index={kind}: {rows:,} chunks x {dim} dimensions need {need / 2**30:.1f} GB of memory "
            f"for the FAISS index, {have / 2**30:.1f} GB are available: use fewer or larger chunks "
            "(chunker.size), a smaller embedding model, or a machine with more memory"
        )
