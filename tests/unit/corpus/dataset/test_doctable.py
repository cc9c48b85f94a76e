"""A warm load of an unchanged corpus file does not parse it (issue 29, item 3): its documents
come from the document table the cold load wrote (:mod:`ragsweep.corpus.dataset.doctable`), with the
same stats, queries and fingerprint; a changed file is parsed again; errors stay the cold run's."""

from __future__ import annotations

import json
import os

import pytest

from ragsweep.corpus.dataset import BeirDataset, JsonlDataset
from ragsweep.corpus.dataset import loaders
from ragsweep.corpus.dataset.doctable import LazyDocuments, doc_ids_of, titles_of
from ragsweep.errors import DataError
from ragsweep.types import Document

OLD = 10**18  # an mtime long past: a file written just now is always parsed (never remembered)


@pytest.fixture
def reads(tmp_path, monkeypatch):
    """Every file the loaders read, in order (the one reader every JSONL/JSON file goes through)."""
    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo" / "fingerprints.json"))
    seen: list[str] = []
    real_text, real_open = loaders._read_text, loaders._open_binary

    def spy_text(path):
        seen.append(os.path.basename(path))
        return real_text(path)

    def spy_open(path):
        seen.append(os.path.basename(path))
        return real_open(path)

    monkeypatch.setattr(loaders, "_read_text", spy_text)
    monkeypatch.setattr(loaders, "_open_binary", spy_open)
    return seen


def _corpus(tmp_path, docs, name="c.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    os.utime(path, ns=(OLD, OLD))
    return path


DOCS = [{"doc_id": f"d{i}", "text": f"document {i} says " + "word " * (i % 7), **({"title": f"T{i}"} if i % 2 else {})}
        for i in range(40)] + [{"doc_id": "blank", "text": "   "}]
EXPECTED = [Document(d["doc_id"], d["text"], d.get("title")) for d in DOCS if d["text"].strip()]
QUERIES = [{"query_id": "q1", "query": "document 3", "relevant_doc_ids": ["d3", "d10"]},
           {"query_id": "q2", "query": "word", "gt_answer": "a word"}]


def _load(tmp_path, **kw):
    q = tmp_path / "q.jsonl"
    if not q.exists():
        q.write_text("".join(json.dumps(x) + "\n" for x in QUERIES))
    return JsonlDataset(corpus=str(tmp_path / "c.jsonl"), queries=str(q), **kw).load()


def test_warm_load_does_not_parse_the_corpus_and_gives_the_same_dataset(tmp_path, reads):
    _corpus(tmp_path, DOCS)
    cold = _load(tmp_path)
    assert reads == ["c.jsonl", "q.jsonl"]
    reads.clear()
    warm = _load(tmp_path)
    assert reads == ["q.jsonl"]  # the queries file only
    assert isinstance(warm.documents, LazyDocuments)
    assert warm.stats == cold.stats == {"documents": 40, "empty_documents_skipped": 1, "queries": 2, "queries_total": 2}
    assert warm.queries == cold.queries and warm.queries[0].relevant[1].end == len(DOCS[10]["text"])
    assert warm.documents.fingerprint == cold.documents.fingerprint and len(warm.documents) == 40
    # what a run needs without the text: titles of retrieved documents, every doc_id
    assert titles_of(warm.documents)["d3"] == "T3" and titles_of(warm.documents).get("d4") is None
    assert titles_of(warm.documents).get("nope") is None and "d39" in titles_of(warm.documents)
    assert doc_ids_of(warm.documents) == doc_ids_of(cold.documents)
    assert reads == ["q.jsonl"]
    # the text itself: iterating streams the file (each pass reads it, nothing is kept); indexing
    # parses it, once; the documents are the same either way, cold or warm
    assert list(warm.documents) == list(cold.documents) == EXPECTED
    assert reads == ["q.jsonl", "c.jsonl", "c.jsonl"] and warm.documents._docs is None
    reads.clear()
    assert warm.documents[5] == cold.documents[5] and warm.documents[6] == cold.documents[6]
    assert reads == ["c.jsonl", "c.jsonl"]
    assert _load(tmp_path, limit=1).queries == cold.queries[:1]


def test_warm_load_trusts_the_file_stat_not_its_bytes(tmp_path, reads):
    """Same size, mtime and inode: the table answers (the bytes are never read). This is the
    contract the fingerprint memo already had; the test shows the file is really not parsed."""
    path = _corpus(tmp_path, DOCS)
    cold = _load(tmp_path)
    with open(path, "r+b") as f:  # overwrite in place (same inode), same size: not JSON any more
        f.write(b"#" * path.stat().st_size)
    os.utime(path, ns=(OLD, OLD))
    warm = _load(tmp_path)
    assert warm.stats == cold.stats and warm.queries == cold.queries and len(warm.documents) == 40


def test_a_changed_corpus_is_parsed_again(tmp_path, reads):
    path = _corpus(tmp_path, DOCS)
    first = _load(tmp_path)
    os.utime(path, ns=(OLD + 10**9, OLD + 10**9))  # touched: a later mtime
    reads.clear()
    again = _load(tmp_path)
    assert reads == ["c.jsonl", "q.jsonl"]  # read (and checked) again, in one streaming pass
    assert again.documents.fingerprint == first.documents.fingerprint
    _corpus(tmp_path, DOCS[:10] + [{"doc_id": "d10", "text": "changed"}, {"doc_id": "new", "text": "more"}])
    reads.clear()
    changed = _load(tmp_path)
    assert reads == ["c.jsonl", "q.jsonl"] and changed.stats["documents"] == 12
    assert changed.queries[0].relevant[1].end == len("changed")
    assert changed.documents.fingerprint != first.documents.fingerprint
    # a bad line in a changed file is still the cold run's error, naming file and line
    path.write_text(path.read_text() + "{not json\n")
    os.utime(path, ns=(OLD + 2 * 10**9, OLD + 2 * 10**9))
    with pytest.raises(DataError, match=r"c\.jsonl:13: not valid JSON"):
        _load(tmp_path)


def test_a_just_written_corpus_gets_no_table(tmp_path, reads):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS))  # mtime: now
    _load(tmp_path)
    reads.clear()
    assert not isinstance(_load(tmp_path).documents, LazyDocuments) and reads[0] == "c.jsonl"


def test_warm_errors_and_edge_cases_are_the_cold_runs(tmp_path, reads):
    _corpus(tmp_path, DOCS)
    _load(tmp_path)
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"query_id": "q", "query": "x", "relevant_doc_ids": ["missing"]}) + "\n")
    with pytest.raises(DataError, match=r"q\.jsonl:1: relevant document 'missing' is not in the corpus"):
        _load(tmp_path)
    # a relevant document that is blank is not in the table: the cold path decides (as before)
    q.write_text(json.dumps({"query_id": "q", "query": "x", "relevant_doc_ids": ["blank"]}) + "\n")
    reads.clear()
    ds = _load(tmp_path)
    assert ds.queries[0].relevant[0].end == 3 and reads == ["q.jsonl", "c.jsonl", "q.jsonl"]
    q.write_text('{"query_id": "q", "query": "x"}\n[1]\n')
    with pytest.raises(DataError, match=r"q\.jsonl:2: expected a JSON object"):
        _load(tmp_path)


def test_beir_warm_load_and_title_in_text_is_its_own_table(tmp_path, reads):
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    _corpus(root, [{"_id": "a", "title": "Alpha", "text": "first text"}, {"_id": "b", "text": "second"}], "corpus.jsonl")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "first?"}\n{"_id": "q2", "text": "none"}\n')
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\n")
    plain, titled = BeirDataset(path=str(root)).load(), BeirDataset(path=str(root), title_in_text=True).load()
    reads.clear()
    plain2, titled2 = BeirDataset(path=str(root)).load(), BeirDataset(path=str(root), title_in_text=True).load()
    assert "corpus.jsonl" not in reads
    assert plain2.queries == plain.queries and plain2.queries[0].relevant[0].end == len("first text")
    assert titled2.queries == titled.queries and titled2.queries[0].relevant[0].end == len("Alpha first text")
    assert titled2.documents.fingerprint == titled.documents.fingerprint != plain2.documents.fingerprint
    assert titles_of(plain2.documents)["a"] == "Alpha" and plain2.stats == plain.stats


def test_a_cold_load_streams_the_corpus_into_the_chunker(tmp_path, reads):
    """Issue 29 (peak memory at 1M documents): a cold load keeps no document text (one streaming
    pass checks, fingerprints and tables the file) and the chunker reads the file again a batch at
    a time; the chunks are those of the parsed list."""
    from ragsweep.store.cache import Cache
    from ragsweep.corpus.chunker import TokenChunker
    from ragsweep.corpus.dataset.fingerprint import hash_documents

    _corpus(tmp_path, DOCS)
    cold = _load(tmp_path)
    assert isinstance(cold.documents, LazyDocuments) and cold.documents._docs is None
    assert reads == ["c.jsonl", "q.jsonl"]
    assert cold.documents.fingerprint == hash_documents(EXPECTED)
    reads.clear()
    chunker = TokenChunker(size=8, overlap=2)
    got = list(chunker.chunk(cold.documents, cache=Cache(tmp_path / "cache")))
    assert reads == ["c.jsonl"] and cold.documents._docs is None  # streamed, never held
    assert got == list(TokenChunker(size=8, overlap=2).chunk(EXPECTED)) and len(got) > len(EXPECTED)
    # the file changed under the run (same stat, other ids): the stream says so instead of mis-chunking
    path = tmp_path / "c.jsonl"
    st = path.stat()
    path.write_text(path.read_text().replace('"d7"', '"x7"'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(RuntimeError, match="changed while this run used it"):
        list(cold.documents)
