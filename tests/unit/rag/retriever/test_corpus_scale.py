"""Large corpora (issue 29): fast chunking identical to the reference, columnar chunk files,
memory-mapped indexes, remembered corpus fingerprints, the cache's value-size guard."""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest

from ragsweep.corpus import chunkstore
from ragsweep.store.cache import MAX_VALUE_BYTES, Cache
from ragsweep.corpus.chunker import TokenChunker
from ragsweep.corpus.dataset import ClapNQ, RagbenchPaperQA
from ragsweep.types import Chunk, Document, Query

CONFIGS = [dict(size=300, overlap=0.2), dict(size=64, overlap=16), dict(size=7, overlap=3)]


def reference(chunker: TokenChunker, docs: list[Document]) -> list[Chunk]:
    """The chunks as the per-document path computes them (the code before the batched path)."""
    out: list[Chunk] = []
    for d in docs:
        out.extend(chunker.chunk_text(d))
    return out


@pytest.fixture(scope="module")
def shipped_documents() -> list[Document]:
    docs = list(ClapNQ().load().documents) + list(RagbenchPaperQA().load().documents)
    # odd text the shipped sets lack: accents, CJK, emoji, ligatures, empty and blank documents
    docs += [Document("u1", "Naïve café — 日本語のテキスト 🎉🚀 ﬁ İstanbul ß ǅ Ⅻ. " * 40), Document("u2", ""),
             Document("u3", " \n\t "), Document("u4", "x")]
    return docs


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['size']}-{c['overlap']}")
def test_batched_chunks_identical_to_the_reference_on_shipped_datasets(shipped_documents, cfg):
    chunker = TokenChunker(**cfg)
    fast = chunker.chunk(shipped_documents)
    assert fast == reference(chunker, shipped_documents)
    assert len(fast) > len(shipped_documents) // 2


def test_windows_of_offsets_that_go_backwards():
    """Offsets that are not monotone (possible with some tokenizers) take the min/max path."""
    chunker = TokenChunker(size=3, overlap=1)
    offsets = [[(5, 9), (0, 4), (10, 12), (12, 12), (13, 20), (11, 14), (21, 22)], [], [(0, 0)], [(1, 2), (3, 4)]]
    flat = np.array([o for doc in offsets for o in doc], dtype=np.int64).reshape(-1, 2)
    owner, start, end = chunker.windows_of(flat, np.array([len(d) for d in offsets]))
    expected = []
    for t, doc in enumerate(offsets):
        kept = [(a, b) for a, b in doc if b > a]
        for i, j in chunker.windows(kept):
            expected.append((t, min(a for a, _ in kept[i:j]), max(b for _, b in kept[i:j])))
    assert list(zip(owner.tolist(), start.tolist(), end.tolist())) == expected


def test_chunks_stored_as_an_arrow_file_and_read_back(tmp_path):
    cache = Cache(tmp_path)
    docs = [Document(f"d{i}", f"Document {i} talks about topic {i % 7} in some detail. " * 30) for i in range(50)]
    chunker = TokenChunker(size=40, overlap=8)
    first = chunker.chunk(docs, cache=cache)
    assert cache.stats["chunks/misses"] == 1
    files = list((tmp_path / "blobs" / "chunks").rglob(chunkstore.FILE))
    assert len(files) == 1
    # the SQLite cache holds only the small record naming the file
    (size,) = sqlite3.connect(tmp_path / "cache.db").execute("SELECT length(value) FROM kv WHERE stage='chunks'").fetchone()
    assert size < 1000
    table = chunkstore.open_table(files[0])
    assert table.num_rows == len(first) and table.column("text")[3].as_py() == first[3].text
    second = TokenChunker(size=40, overlap=8).chunk(docs, cache=cache)
    assert cache.stats["chunks/hits"] == 1 and second == first


def test_cache_refuses_a_value_over_64_mb(tmp_path):
    cache = Cache(tmp_path)
    with pytest.raises(ValueError, match=r"cache stage 'big'.*larger than the 64 MB.*blobs/"):
        cache.put("big", "k", b"x" * (MAX_VALUE_BYTES + 1))
    assert cache.get("big", "k", default=None) is None
    cache.put("small", "k", b"x" * 1000)  # an ordinary value still goes in


def test_corpus_fingerprint_remembered_by_file_stat(tmp_path, monkeypatch):
    from ragsweep.corpus.dataset import JsonlDataset
    from ragsweep.corpus.dataset import fingerprint as fp

    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo.json"))
    corpus, queries = tmp_path / "c.jsonl", tmp_path / "q.jsonl"
    corpus.write_text('{"doc_id": "a", "text": "alpha beta"}\n{"doc_id": "b", "text": "gamma"}\n')
    queries.write_text('{"query_id": "q", "query": "alpha"}\n')
    os.utime(corpus, ns=(10**18, 10**18))  # not just written (a just-written file is always hashed)
    first = JsonlDataset(corpus=str(corpus), queries=str(queries)).load()
    assert first.documents.fingerprint == fp.hash_documents(first.documents)

    def no_hashing(docs):  # a warm load must not hash the corpus again
        raise AssertionError("the corpus was hashed again")

    monkeypatch.setattr(fp, "hash_documents", no_hashing)
    again = JsonlDataset(corpus=str(corpus), queries=str(queries)).load()
    assert again.documents.fingerprint == first.documents.fingerprint
    monkeypatch.undo()
    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo.json"))
    corpus.write_text('{"doc_id": "a", "text": "alpha beta"}\n{"doc_id": "b", "text": "delta"}\n')
    os.utime(corpus, ns=(10**18 + 1, 10**18 + 1))  # same size, a later mtime
    changed = JsonlDataset(corpus=str(corpus), queries=str(queries)).load()
    assert changed.documents.fingerprint != first.documents.fingerprint
    assert changed.documents.fingerprint == fp.hash_documents(changed.documents)
    # a file rewritten just now (same size): hashed, never a remembered entry
    corpus.write_text('{"doc_id": "a", "text": "alpha beta"}\n{"doc_id": "b", "text": "omega"}\n')
    racy = JsonlDataset(corpus=str(corpus), queries=str(queries)).load()
    assert racy.documents.fingerprint == fp.hash_documents(racy.documents) != changed.documents.fingerprint


def test_bm25s_index_reloads_memory_mapped_with_the_same_ranking(tmp_path):
    from ragsweep.rag.retriever.bm25 import BM25Retriever

    chunks = [Chunk(f"c#{i}", f"d{i}", 0, 10, f"word{i % 13} shared common{i % 5} text number {i}") for i in range(300)]
    queries = [Query("q1", "word3 common2"), Query("q2", "shared number 17")]
    built = BM25Retriever(backend="bm25s")
    built.index(chunks, cache=Cache(tmp_path))
    loaded = BM25Retriever(backend="bm25s")
    loaded.index(chunks, cache=Cache(tmp_path))  # a second process: the index comes from disk
    assert isinstance(loaded._model.scores["data"], np.memmap)
    assert loaded._model.scores["data"].dtype == np.float32
    for q in queries:
        np.testing.assert_array_equal(built.scores(q.query), loaded.scores(q.query))
    assert built.search(queries, k=10) == loaded.search(queries, k=10)


def test_tfidf_index_reloads_memory_mapped_with_the_same_scores(tmp_path):
    from ragsweep.rag.retriever.tfidf import TfidfRetriever

    chunks = [Chunk(f"c#{i}", f"d{i}", 0, 10, f"word{i % 13} shared common{i % 5} text number {i}") for i in range(300)]
    queries = [Query("q1", "word3 common2"), Query("q2", "shared number 17"), Query("q3", "nothing matches")]
    plain = TfidfRetriever()
    plain.index(chunks)  # no cache: in memory
    TfidfRetriever().index(chunks, cache=Cache(tmp_path))
    loaded = TfidfRetriever()
    loaded.index(chunks, cache=Cache(tmp_path))
    assert isinstance(loaded._matrix.data, np.memmap)
    assert not list(sqlite3.connect(tmp_path / "cache.db").execute("SELECT key FROM kv WHERE stage='index'"))
    ref = plain._vectorizer_for()  # scikit-learn's own fit over every chunk: the reference
    matrix = ref.fit_transform(c.text for c in chunks)
    sims = (ref.transform([q.query for q in queries]) @ matrix.T).toarray()
    got = loaded.search(queries, k=300)
    for q, row in zip(queries, sims):
        hits = got[q.query_id]
        np.testing.assert_allclose([h.score for h in hits], np.sort(row)[::-1], rtol=1e-12, atol=1e-15)
    assert got == plain.search(queries, k=300)


_KILL_CHILD = r"""
import sys, time
import numpy as np
from ragsweep.store.cache import Cache
from ragsweep.rag.retriever.dense import DenseRetriever
from ragsweep.types import Chunk

class Fake:
    def get_embedding_dimension(self):
        return 8
    def encode(self, texts, **kw):
        time.sleep(float(sys.argv[3]))
        print("encoded", len(texts), flush=True)
        return np.stack([fake_vec(t) for t in texts])

def fake_vec(t):
    rng = np.random.default_rng(sum(map(ord, t)) * 7919 + len(t))
    return rng.standard_normal(8).astype(np.float32)

n = int(sys.argv[2])
chunks = [Chunk(f"c#{i}", f"d{i}", 0, 5, f"text {i} " + "x" * (i % 37)) for i in range(n)]
r = DenseRetriever(batch_size=16)
r._model = Fake()
r._device = "cpu"
r.fingerprint = "fp"
emb = r.embed_corpus([c.text for c in chunks], Cache(sys.argv[1]))
print("done", emb.shape[0], flush=True)
"""


def test_kill_during_dense_encoding_loses_at_most_one_block(tmp_path):
    """A real SIGKILL of a child process mid-encoding: the rows on disk are at most 256 behind the
    rows it had encoded, and the next run resumes after them with the same final embeddings."""
    import signal
    import subprocess
    import sys
    import time

    from ragsweep.corpus.embeddings import CORPUS_BLOCK

    script = tmp_path / "child.py"
    script.write_text(_KILL_CHILD)
    n = 2000
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(n), "0.02"],
                            stdout=subprocess.PIPE, text=True)
    encoded = 0
    try:
        for line in proc.stdout:  # kill once 3 blocks and a bit are encoded
            encoded += int(line.split()[1])
            if encoded >= 3 * CORPUS_BLOCK + 48:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    part = next((tmp_path / "cache" / "blobs" / "embeddings").glob("*.partial"))
    on_disk = (part / "vectors.f32").stat().st_size // (4 * 8)
    assert on_disk % CORPUS_BLOCK == 0 and on_disk >= 3 * CORPUS_BLOCK
    assert encoded - on_disk <= CORPUS_BLOCK
    # the next run encodes only what is missing, and ends with the rows a clean run gives
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "cache"), str(n), "0"],
                         capture_output=True, text=True, timeout=120, check=True).stdout.split("\n")
    resumed = sum(int(line.split()[1]) for line in out if line.startswith("encoded"))
    assert resumed == n - on_disk
    clean = subprocess.run([sys.executable, str(script), str(tmp_path / "clean"), str(n), "0"],
                           capture_output=True, text=True, timeout=120, check=True)
    assert "done 2000" in clean.stdout
    a = next(p for p in (tmp_path / "cache" / "blobs" / "embeddings").iterdir() if not p.name.endswith(".partial"))
    b = next(p for p in (tmp_path / "clean" / "blobs" / "embeddings").iterdir() if not p.name.endswith(".partial"))
    assert (a / "vectors.f32").read_bytes() == (b / "vectors.f32").read_bytes()


def test_flat_index_larger_than_memory_is_refused_before_work():
    from ragsweep.rag.retriever import faiss_index

    with pytest.raises(MemoryError, match=r"retriever.index=flat: 10,000,000 chunks x 384 dimensions need 14.3 GB"):
        faiss_index.check_fits("flat", 10_000_000, 384, available=8 * 2**30)
    faiss_index.check_fits("flat", 100_000, 384, available=8 * 2**30)


def test_index_over_cached_chunks_does_not_hash_every_chunk(tmp_path, monkeypatch):
    from ragsweep.rag.retriever import base
    from ragsweep.rag.retriever.bm25 import BM25Retriever

    cache = Cache(tmp_path)
    docs = [Document(f"d{i}", f"Document {i} is about bees and topic {i % 7}.") for i in range(30)]
    fresh = TokenChunker(size=8, overlap=2).chunk(docs, cache=cache)
    warm = TokenChunker(size=8, overlap=2).chunk(docs, cache=cache)
    assert fresh.fingerprint == warm.fingerprint is not None

    def no_hashing(chunks):
        raise AssertionError("every chunk was hashed again")

    monkeypatch.setattr(base, "chunks_fingerprint", no_hashing)
    r = BM25Retriever()
    r.index(warm, cache=cache)
    assert r.fingerprint == warm.fingerprint
    assert r.search([Query("q", "bees topic 3")], k=2, cache=cache)["q"][0].chunk.doc_id == "d3"


def test_hnsw_index_finds_what_the_flat_index_finds():
    from ragsweep.rag.retriever import faiss_index
    from ragsweep.rag.retriever.dense import DenseConfig

    rng = np.random.default_rng(0)
    rows = rng.standard_normal((3000, 32)).astype(np.float32)
    queries = rows[:50] + 0.1 * rng.standard_normal((50, 32)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    found = {}
    for kind in ("flat", "hnsw"):
        index = faiss_index.make(kind, 32)
        faiss_index.add(index, rows)
        faiss_index.set_search_params(index, kind, 128)
        found[kind] = index.search(queries, 10)[1]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(found["flat"], found["hnsw"])])
    assert recall >= 0.95
    assert (found["hnsw"][:, 0] == np.arange(50)).mean() >= 0.95
    with pytest.raises(ValueError, match=r"retriever.index \('ivf'\) must be one of flat, hnsw"):
        DenseConfig(index="ivf")


def test_disabled_cache_persists_nothing(tmp_path):
    from ragsweep.rag.retriever.bm25 import BM25Retriever
    from ragsweep.rag.retriever.tfidf import TfidfRetriever

    cache = Cache(tmp_path / "off", enabled=False)
    docs = [Document(f"d{i}", f"Document {i} is about bees and topic{i % 7}.") for i in range(30)]
    chunks = TokenChunker(size=8, overlap=2).chunk(docs, cache=cache)
    for r in (BM25Retriever(), TfidfRetriever()):
        r.index(chunks, cache=cache)
        assert r.search([Query("q", "bees topic3")], k=1, cache=cache)["q"][0].chunk.doc_id == "d3"
    assert not (tmp_path / "off").exists()


def test_index_advances_the_stage_bar_it_is_given(tmp_path):
    """The pipeline's ``index`` bar moves while BM25 and TF-IDF index (it used to sit at 0/N until done)."""
    from ragsweep.rag.retriever import bm25, sparse_build, tfidf

    class Bar:
        def __init__(self):
            self.steps = []

        def update(self, n):
            self.steps.append(n)

    n = sparse_build.TEXT_BATCH
    chunks = [Chunk(f"c#{i}", f"d{i}", 0, 5, f"word{i % 13} text {i}") for i in range(2 * n + 5)]
    for cls in (bm25.BM25Retriever, tfidf.TfidfRetriever):
        bar = Bar()
        cls().index(chunks, cache=Cache(tmp_path), progress=bar)
        assert bar.steps == [n, n, 5]
