"""Over a chunk file (a memory-mapped ChunkTable), the run's per-question retrieval metrics and the
oracle retriever read only the labelled documents' chunks (issue 29, item 3: a warm run touches
only what it needs), with the same results as over the list of every chunk."""

from __future__ import annotations

from ragsweep.corpus import chunkstore
from ragsweep.judge.metrics.retrieval import retrieval_metrics_per_query
from ragsweep.rag.retriever.oracle import OracleRetriever
from ragsweep.types import Chunk, Hit, Query, Span


def _chunks() -> list[Chunk]:
    out = []
    for d in range(30):
        for j in range(d % 4 + 1):
            out.append(Chunk(f"d{d}#{j}", f"d{d}", 10 * j, 10 * j + 14, f"text {d} {j}"))
    return out


QUERIES = [Query("q1", "a", None, (Span("d3", 5, 30),)), Query("q2", "b", None, (Span("d7", 0, 12), Span("d29", 20, 40))),
           Query("q3", "c")]


def _table(tmp_path, chunks):
    path = tmp_path / chunkstore.FILE
    chunkstore.write(path, [chunks[:20], chunks[20:]])
    return chunkstore.ChunkTable(path, "fp")


def test_of_docs_builds_only_those_documents_chunks(tmp_path, monkeypatch):
    chunks = _chunks()
    table = _table(tmp_path, chunks)
    built: list[int] = []
    get = chunkstore.ChunkTable.__getitem__
    monkeypatch.setattr(chunkstore.ChunkTable, "__getitem__", lambda self, i: (built.append(i), get(self, i))[1])
    got = table.of_docs(["d7", "d3", "nope"])
    assert [c for _, c in got] == [c for c in chunks if c.doc_id in ("d3", "d7")]
    assert [i for i, _ in got] == [i for i, c in enumerate(chunks) if c.doc_id in ("d3", "d7")] == built
    assert table.of_docs([]) == []


def test_metrics_and_oracle_over_a_chunk_file_equal_the_lists(tmp_path, monkeypatch):
    chunks = _chunks()
    table = _table(tmp_path, chunks)
    results = {"q1": [Hit(chunks[7], 1.0, 1), Hit(chunks[0], 0.5, 2)], "q2": [Hit(chunks[20], 1.0, 1)]}
    assert retrieval_metrics_per_query(results, QUERIES, 5, chunks=table) == retrieval_metrics_per_query(results, QUERIES, 5, chunks=chunks)

    def no_iteration(self):
        raise AssertionError("every chunk was read")

    monkeypatch.setattr(chunkstore.ChunkTable, "__iter__", no_iteration)
    retrieval_metrics_per_query(results, QUERIES, 5, chunks=table)
    lazy, plain = OracleRetriever(top_k=3), OracleRetriever(top_k=3)
    lazy.index(table)
    monkeypatch.undo()
    plain.index(chunks)
    for k in (1, 3):
        assert lazy.search(QUERIES, k=k) == plain.search(QUERIES, k=k)
    assert lazy.search(QUERIES[:1]) == plain.search(QUERIES[:1]) and lazy.stats["no_labels"] == plain.stats["no_labels"] == 2
