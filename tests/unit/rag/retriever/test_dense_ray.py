"""``retriever.engine`` / ``ray_address`` / ``ray_num_gpus``: validated with the field named, kept
out of every cache key, and the local block encoding the Ray actors share."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.corpus.embeddings import encode_block
from ragsweep.rag.retriever.dense import DenseRetriever
from ragsweep.rag.retriever.hybrid import HybridRetriever


@pytest.mark.parametrize("field, value", [("engine", "spark"), ("ray_address", ""), ("ray_address", 6379),
                                          ("ray_num_gpus", -1), ("ray_num_gpus", True)])
def test_bad_ray_fields_name_the_field(field, value):
    with pytest.raises(ValueError, match=rf"retriever\.{field} "):
        DenseRetriever(**{field: value})
    with pytest.raises(ValueError, match=rf"retriever\.{field} "):
        HybridRetriever(dense={field: value})


def test_ray_fields_are_result_neutral():
    local = DenseRetriever().cache_config()
    remote = DenseRetriever(engine="ray", ray_address="127.0.0.1:6379", ray_num_gpus=0.5).cache_config()
    assert local == remote and "engine" not in local
    assert HybridRetriever(dense={"engine": "ray"}).cache_config() == HybridRetriever().cache_config()


def test_encode_block_encodes_sorted_by_length_and_puts_rows_back():
    seen = []

    def encode(todo):
        seen.append(list(todo))
        return np.array([[len(t), i] for i, t in enumerate(todo)], dtype=np.float32)

    rows = encode_block(["ccc", "a", "bb"], encode)
    assert seen == [["a", "bb", "ccc"]]
    assert rows[:, 0].tolist() == [3, 1, 2]


def test_encode_blocks_gets_only_the_blocks_missing_from_a_partial_file(tmp_path):
    from ragsweep.corpus.embeddings import EmbeddingFile

    texts = [f"text {i} " + "x" * (i % 7) for i in range(10)]
    fake = lambda todo: np.array([[len(t), 1.0] for t in todo], dtype=np.float32)  # noqa: E731
    store = EmbeddingFile(tmp_path, "k")
    sent = []

    def first_block_then_kill(blocks):
        for b in blocks:
            sent.append(b)
            yield encode_block(b, fake)
            raise KeyboardInterrupt  # killed after the first block was written

    with pytest.raises(KeyboardInterrupt):
        store.build(texts, fake, block=4, encode_blocks=first_block_then_kill)
    assert store.rows_done() == (4, 2) and sent == [texts[:4]]

    def remote(blocks):
        for b in blocks:
            sent.append(b)
            yield encode_block(b, fake)

    rows = np.array(store.build(texts, fake, block=4, encode_blocks=remote))
    assert sent[1:] == [texts[4:8], texts[8:]]  # only the missing blocks went out
    assert rows[:, 0].tolist() == [len(t) for t in texts]
