"""``retriever.engine=ray``: the dense retriever's corpus blocks encoded on a Ray cluster.

The blocks :meth:`~ragsweep.corpus.embeddings.EmbeddingFile.build` would encode here (256 texts each,
only the ones missing from a partial file) go through Ray Data ``map_batches``, one block per
call, to a pool of actors that each load the sentence-transformers model once and encode the
block exactly as the local path does (:func:`~ragsweep.corpus.embeddings.encode_block`: sorted by
length, ``retriever.batch_size`` at a time). Blocks come back in order and the driver appends
them to the same embedding file, so kill-safety and resume are the local path's. Actors run on
CPU unless ``retriever.ray_num_gpus`` asks for a GPU share per actor.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np

from ragsweep.corpus import ray_data
from ragsweep.corpus.embeddings import encode_block

#: retriever fields that say where encoding runs, not what it computes (kept out of cache keys)
RAY_FIELDS = ("engine", "ray_address", "ray_num_gpus")
ENGINES = ray_data.ENGINES


def check_config(engine: str, ray_address: Any, ray_num_gpus: Any) -> None:
    """Validation of the Ray fields of the dense retriever's config; errors name the field."""
    if engine not in ENGINES:
        raise ValueError(f"retriever.engine ({engine!r}) must be one of {', '.join(ENGINES)}")
    if ray_address is not None and (not isinstance(ray_address, str) or not ray_address):
        raise ValueError(f"retriever.ray_address ({ray_address!r}) must be null (a local Ray instance), "
                         "'auto' or HOST:PORT of a running Ray head")
    if isinstance(ray_num_gpus, bool) or not isinstance(ray_num_gpus, (int, float)) or ray_num_gpus < 0:
        raise ValueError(f"retriever.ray_num_gpus ({ray_num_gpus!r}) must be a number >= 0 "
                         "(GPUs per encoding actor; 0 = CPU actors)")


def encode_blocks(config: dict[str, Any], blocks: Iterable[list[str]], retriever: type) -> Iterator[np.ndarray]:
    """Each block's raw float32 rows, in block order, encoded by Ray Data actors.

    ``config`` is the dense retriever's config (``engine``, ``ray_address``, ``ray_num_gpus``
    say where; the rest is given to each actor's own local-engine ``retriever`` class)."""
    import pyarrow as pa

    parts = list(blocks)
    if not parts:
        return
    ray = ray_data.session(config.get("ray_address"))
    gpus = float(config.get("ray_num_gpus") or 0)
    resources = ray.cluster_resources()
    if gpus:
        actors = max(1, int(resources.get("GPU", 0) / gpus))
    else:
        actors = max(1, int(resources.get("CPU", 1)))
    local = {k: v for k, v in config.items() if k not in RAY_FIELDS}
    extra = {"num_gpus": gpus} if gpus else {}
    ds = ray.data.from_arrow(pa.table({"texts": parts})).map_batches(
        _RayEncode, fn_constructor_kwargs={"config": local, "retriever": retriever}, batch_size=1, batch_format="pyarrow",
        concurrency=min(actors, len(parts)), **extra,
    )
    for out in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        dims, vecs = out.column("dim").to_pylist(), out.column("vectors").to_pylist()
        for dim, raw in zip(dims, vecs):
            yield np.frombuffer(raw, dtype=np.float32).reshape(-1, dim)


class _RayEncode:
    """The Ray Data actor of ``retriever.engine=ray``: one local dense retriever (one model) per
    actor; a batch of blocks (``texts``: list of strings) in, each block's rows out as bytes."""

    def __init__(self, config: dict[str, Any], retriever: type):
        self.retriever = retriever(**config)  # the DenseRetriever class (passed in: no import cycle)

    def encode(self, todo: list[str]) -> np.ndarray:
        return self.retriever.embed(todo, None, normalize=False, progress=False)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        rows = [encode_block(texts, self.encode) for texts in batch.column("texts").to_pylist()]
        return pa.table({"dim": [int(r.shape[1]) for r in rows],
                         "vectors": pa.array([np.ascontiguousarray(r).tobytes() for r in rows], type=pa.binary())})
