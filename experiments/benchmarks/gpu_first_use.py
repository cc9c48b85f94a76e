"""The GPU path's first-use checks, prepared to run in one go on a GPU machine (and on a CPU one,
where it says what it cannot check), printing every figure with the machine it came from:

    python experiments/benchmarks/gpu_first_use.py --chunks 5000        # SciFact abstracts, or the built-in corpus

1. ``ragsweep-doctor --gpu``: the driver, each GPU (name, memory, compute capability), torch's
   CUDA, whether faiss can search on each GPU (its build, then a test search in a child process),
   vLLM's import;
2. the seconds that check costs: faiss's test search in a child process, the openai client's
   warm-up, the NVML inventory;
3. dense encoding (all-MiniLM-L6-v2, ``retriever.batch_size`` 64) of ``--chunks`` real texts on
   ``cuda`` (when torch sees a GPU) and on the CPU: chunks per second each (one warm-up batch first).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"


def texts(n: int) -> tuple[list[str], str]:
    for path in (SCIFACT, Path("/work/shared/data/scifact/corpus.jsonl")):
        if path.is_file():
            rows = [json.loads(line) for line in path.open()]
            return [f"{r.get('title', '')}. {r['text']}" for r in rows][:n], f"SciFact abstracts ({path})"
    from ragsweep.corpus.dataset import builtin  # noqa: F401 - the package that ships the built-in corpus

    corpus = next((Path(builtin.__file__).parent).rglob("corpus.jsonl"))
    rows = [json.loads(line) for line in corpus.open()]
    return [r["text"] for r in rows][:n], f"the built-in corpus ({corpus})"


def machine() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    cpu = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")
    from ragsweep.rag import gpus

    found, why = gpus.inventory()
    return f"CPU: {cpu}; GPUs: " + ("; ".join(g.line() for g in found) if found else f"none ({why})")


def encode_rate(docs: list[str], device: str, batch: int = 64) -> float:
    from ragsweep.corpus.embeddings import load_sentence_transformer

    model = load_sentence_transformer("minilm", device)
    model.encode(docs[:batch], batch_size=batch)  # warm-up: CUDA kernels, allocator
    t0 = time.perf_counter()
    model.encode(docs, batch_size=batch, convert_to_numpy=True, show_progress_bar=False)
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    return len(docs) / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chunks", type=int, default=5000)
    p.add_argument("--skip-doctor", action="store_true")
    args = p.parse_args()
    print(machine(), flush=True)
    if not args.skip_doctor:
        subprocess.run([sys.executable, "-m", "ragsweep.pipeline.doctor", "--gpu"])
    from ragsweep.rag.generator import transport
    from ragsweep.rag import gpus
    from ragsweep.rag.retriever import faiss_gpu

    t0 = time.perf_counter()
    gpus.inventory()
    print(f"NVML inventory: {time.perf_counter() - t0:.3f}s")
    t0 = time.perf_counter()
    import openai

    t1 = time.perf_counter()
    transport._openai()
    print(f"openai import: {t1 - t0:.3f}s; its warm-up (one completion on an in-memory transport): "
          f"{time.perf_counter() - t1:.3f}s")
    import faiss

    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        t0 = time.perf_counter()
        why = faiss_gpu.probe(0)
        print(f"faiss test search on GPU 0 in a child process: {time.perf_counter() - t0:.1f}s -> {why or 'ok'}")
    else:
        print("faiss test search: not run (this faiss has no GPU support or sees no GPU)")
    docs, where = texts(args.chunks)
    print(f"dense encoding, all-MiniLM-L6-v2, batch 64, {len(docs)} texts from {where}:")
    import torch

    for device in (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]:
        print(f"  {device}: {encode_rate(docs, device):.1f} chunks/s", flush=True)


if __name__ == "__main__":
    main()
