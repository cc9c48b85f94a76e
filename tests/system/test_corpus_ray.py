"""``chunker.engine=ray`` and ``retriever.engine=ray`` on a real local Ray cluster (head + worker,
127.0.0.1): the chunks of a 2,000-document corpus are identical to the local engine's, and so is
the chunk file; the embedding file of 300 of its chunks is byte for byte the local one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from support import SRC
from support.ray_cluster import local_cluster

PY = sys.executable

CHILD = r"""
import sys
from pathlib import Path
from ragsweep.store.cache import Cache
from ragsweep.corpus.chunker import TokenChunker
from ragsweep.corpus.dataset import ClapNQ
from ragsweep.types import Document

docs = list(ClapNQ().load().documents)
words = " ".join(d.text for d in docs).split()
docs += [Document(f"g{i}", " ".join(words[(i * 37) % 5000 : (i * 37) % 5000 + 60 + i % 250])) for i in range(2000 - len(docs))]
assert len(docs) == 2000
local = TokenChunker(size=128, overlap=0.2).chunk(docs, cache=Cache(Path(sys.argv[2]) / "local"))
remote = TokenChunker(size=128, overlap=0.2, engine="ray", ray_address=sys.argv[1]).chunk(docs, cache=Cache(Path(sys.argv[2]) / "ray"))
import ray
nodes = len([n for n in ray.nodes() if n["Alive"]])
print("nodes", nodes, "chunks", len(local), len(remote), "same", local == remote, flush=True)
a = (Path(sys.argv[2]) / "local").rglob("chunks.arrow")
b = (Path(sys.argv[2]) / "ray").rglob("chunks.arrow")
import pyarrow as pa
ta = pa.ipc.open_file(pa.memory_map(str(next(a)))).read_all()
tb = pa.ipc.open_file(pa.memory_map(str(next(b)))).read_all()
print("tables equal", ta.equals(tb), flush=True)

# retriever.engine=ray: the first 300 chunks (2 blocks, the last partial) encoded by Ray actors
import numpy as np
from ragsweep.rag.retriever.dense import DenseRetriever
texts = [c.text for c in local[:300]]
mine = np.array(DenseRetriever(device="cpu").embed_corpus(texts, Cache(Path(sys.argv[2]) / "local")))
theirs = np.array(DenseRetriever(device="cpu", engine="ray", ray_address=sys.argv[1]).embed_corpus(texts, Cache(Path(sys.argv[2]) / "ray")))
files = [next((Path(sys.argv[2]) / k).rglob("vectors.f32")).read_bytes() for k in ("local", "ray")]
print("embeddings", mine.shape, theirs.shape, "max abs diff", float(np.abs(mine - theirs).max()),
      "files identical", files[0] == files[1], flush=True)
"""


@pytest.mark.slow
def test_ray_engine_on_a_local_cluster_writes_the_same_chunks(tmp_path):
    src = str(SRC)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
           "HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    (tmp_path / "home").mkdir()
    with local_cluster(tmp_path, env, prefix="rg-rayc-") as address:
        script = tmp_path / "child.py"
        script.write_text(CHILD)
        proc = subprocess.run([PY, str(script), address, str(tmp_path)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=400)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert "nodes 2 chunks" in proc.stdout and "same True" in proc.stdout, proc.stdout
        assert "tables equal True" in proc.stdout, proc.stdout
        assert "embeddings (300, 384) (300, 384)" in proc.stdout, proc.stdout
        assert "files identical True" in proc.stdout, proc.stdout
