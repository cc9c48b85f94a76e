"""Chunking A/B in one process: the per-document chunker before issue 29 (loaded from git) vs the
batched one vs the tokenizer's own batched call, interleaved so a shared machine's load hits all
three alike.

    nice -n 10 python experiments/benchmarks/bench_chunking_ab.py CORPUS.jsonl N REPEATS [OLD_CHUNKER.py]

OLD_CHUNKER.py: ``git show e90586e:src/ragsweep/chunker.py > old_chunker.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import time

import numpy as np

from ragsweep.corpus.chunker import TokenChunker, _backend, load_tokenizer


def main() -> None:
    path, n, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from common import first_documents  # this script's folder is on sys.path

    docs = first_documents(path, n)
    texts = [d.text for d in docs]
    load_tokenizer("minilm")
    tok = _backend("minilm")
    new = TokenChunker()
    old = None
    if len(sys.argv) > 4:
        spec = importlib.util.spec_from_file_location("old_chunker", sys.argv[4])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["old_chunker"] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        old = mod.TokenChunker()
        assert old._chunk_all(docs[:500]) == new._chunk_all(docs[:500])
    times: dict[str, list[float]] = {"tokenizer batch (limit)": [], "batched chunker (new)": [], "per-document chunker (old)": []}
    for _ in range(reps):
        t = time.perf_counter()
        for s in range(0, n, 2048):
            tok.encode_batch(texts[s : s + 2048], add_special_tokens=False)
        times["tokenizer batch (limit)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        new._chunk_all(docs)
        times["batched chunker (new)"].append(time.perf_counter() - t)
        if old is not None:
            t = time.perf_counter()
            old._chunk_all(docs)
            times["per-document chunker (old)"].append(time.perf_counter() - t)
    limit = np.median(times["tokenizer batch (limit)"])
    for name, ts in times.items():
        if ts:
            med = float(np.median(ts))
            print(f"{name:<28} median {med:6.1f} s over {len(ts)} runs ({n / med:,.0f} doc/s), {med / limit:.2f}x the tokenizer's time; runs: "
                  + ", ".join(f"{x:.1f}" for x in ts))


if __name__ == "__main__":
    main()
