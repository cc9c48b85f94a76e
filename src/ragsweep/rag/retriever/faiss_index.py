"""The FAISS index of the dense retriever: which kind, built from (memory-mapped) embeddings block
by block, and on which device (saying so when ``device`` asks for CUDA).

- ``flat``: ``IndexFlatIP``, exact inner product. Holds every vector in memory:
  ``rows x dim x 4`` bytes (1M chunks of all-MiniLM-L6-v2: 1.5 GB).
- ``hnsw``: ``IndexHNSWFlat`` (inner product), approximate; faster search over millions of
  chunks, about 1.2x the flat index's memory (M=32); its recall, latency and memory against ``flat``
  are measured by ``experiments/benchmarks/bench_ann_recall.py`` (``experiments/results/ann_recall.md``).
  It stays on the CPU.

:func:`check_fits` refuses, before any work starts, an index that cannot fit in memory.

faiss-cpu and faiss-gpu (or faiss-gpu-cu12) ship the same ``faiss`` package: with both installed
one overwrites the other's files (faiss issue 2892), and with faiss-cpu alone a ``device: cuda``
run searches on the CPU. Neither is an error (the exact index gives the same results on both), but
a GPU user must see it: :func:`on_device` logs the index type at WARNING, once per process,
whenever the device is CUDA, with the reason and the fix when it is not the GPU index. Before an
index moves to a GPU, :mod:`ragsweep.rag.retriever.faiss_gpu` checks that this faiss has code for
that GPU (a faiss GPU kernel without code for the device aborts the process, uncatchably).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from ragsweep.rag.retriever import faiss_gpu

log = logging.getLogger("ragsweep.rag.retriever.dense")

KINDS = ("flat", "hnsw")
ADD_BLOCK = 65536

_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        log.warning("%s", message)




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


def on_device(index: Any, kind: str, device: str) -> tuple[Any, Any]:
    """``index`` (built on the CPU) moved to the GPU when ``device`` is ``cuda[:N]``, the index is
    ``flat`` and faiss can; else left on the CPU. Which one it is is logged at WARNING, once, for any
    CUDA device. Returns ``(index, gpu_resources or None)``; keep the resources alive as long as the
    index."""
    import faiss

    if not device.startswith("cuda"):
        return index, None
    name = type(index).__name__
    if kind != "flat":
        _say_once(f"retriever.device={device}: the dense index is {name} on the CPU (retriever.index={kind} "
                  "is not moved to the GPU; retriever.index=flat is)")
        return index, None
    dists = faiss_gpu.installed()
    both = (f"; {' and '.join(f'{d} {v}' for d, v in dists.items())} are all installed and share the faiss/ "
            "package, so which one answers depends on the install order" if len(dists) > 1 else "")
    fix = f"for the GPU index: {faiss_gpu.fix()}"
    if not hasattr(faiss, "StandardGpuResources"):
        _say_once(f"retriever.device={device}: the dense index is {name} on the CPU (exact: same results, "
                  f"slower search), because this faiss ({faiss.__version__}) has no GPU support{both}; {fix}")
        return index, None
    gpu = int(device.split(":")[1]) if ":" in device else 0
    try:
        n = faiss.get_num_gpus()
        if gpu >= n:
            raise RuntimeError(f"faiss sees {n} GPU(s)")
        why = faiss_gpu.unusable(gpu)  # an abort() in faiss's CUDA check would kill this process
        if why:
            _say_once(f"retriever.device={device}: the dense index is {name} on the CPU (exact: same results, "
                      f"slower search), because {why}{both}; {fix}")
            return index, None
        res = faiss.StandardGpuResources()
        moved = faiss.index_cpu_to_gpu(res, gpu, index)
    except Exception as exc:  # noqa: BLE001 - keep the exact CPU index, and say so
        _say_once(f"retriever.device={device}: the dense index is {name} on the CPU (exact: same results, "
                  f"slower search), because the GPU index failed: {exc}{both}")
        return index, None
    _say_once(f"retriever.device={device}: the dense index is {type(moved).__name__} on GPU {gpu} "
              f"(faiss {faiss.__version__}){both}")
    return moved, res
