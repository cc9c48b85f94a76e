"""``dataset=files`` over a copy of the real fixture files: documents by relative path, the parse
ledger, a warm run that parses nothing, one changed file parsed again alone, the globs, the
one-line error of a folder where nothing parses, and the questions' evidence located."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from ragsweep.corpus.dataset.files import FileDocuments, FilesDataset
from ragsweep.corpus.place import placer
from ragsweep.errors import DataError
from support import FIXTURES

GOOD = ["docx/python_docx_test.docx", "html/sqlite_lang_transaction.html", "html/sqlite_quickstart.html",
        "md/pypdf_README.md", "pdf/crazyones.pdf", "pdf/pdflatex-outline.pdf"]
BAD = {"bad/empty.md": "empty", "bad/encrypted.pdf": "encrypted", "bad/scanned.pdf": "no_text_layer",
       "bad/sqlite_logo.gif": "unsupported", "bad/truncated.pdf": "corrupt"}


def _age(folder, seconds=60):
    old = time.time() - seconds
    for p in folder.rglob("*"):
        os.utime(p, (old, old))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo" / "fingerprints.json"))
    root = tmp_path / "docs"
    shutil.copytree(FIXTURES / "files", root, ignore=shutil.ignore_patterns("paper", "producers", "README.md"))
    _age(root)  # not written seconds ago: the streaming, tabled path
    return root


def load(root, cache, **kw):
    return FilesDataset(path=str(root), cache_dir=str(cache), workers=1, **kw).load_corpus()


def test_documents_by_relative_path_and_the_parse_ledger(folder, tmp_path):
    ds = load(folder, tmp_path / "cache")
    assert isinstance(ds.documents, FileDocuments)
    assert ds.documents.doc_ids() == GOOD
    ledger = ds.artifacts["parse_ledger.json"]["ledger"]
    assert {r["file"]: r["reason"] for r in ledger} == BAD
    assert all(r["fix"] for r in ledger)
    assert ds.stats["files"] == 11 and ds.stats["files_parsed"] == 6 and ds.stats["files_in_ledger"] == 5
    assert ds.stats["files_parsed_now"] == 9  # every supported, non-empty file
    docs = {d.doc_id: d for d in ds.documents}  # streamed back from the parse cache
    assert docs["html/sqlite_quickstart.html"].title == "SQLite In 5 Minutes Or Less"
    assert docs["pdf/crazyones.pdf"].title == "crazyones"  # no metadata title, no heading: the file name
    assert len(docs["pdf/pdflatex-outline.pdf"].pages) == 4


def test_a_warm_run_parses_nothing_and_a_changed_file_alone_is_parsed_again(folder, tmp_path):
    cold = load(folder, tmp_path / "cache")
    warm = load(folder, tmp_path / "cache")
    assert warm.stats["files_parsed_now"] == 0
    assert warm.artifacts == cold.artifacts and warm.documents.fingerprint == cold.documents.fingerprint
    md = folder / "md" / "pypdf_README.md"
    md.write_text(md.read_text(encoding="utf-8") + "\n## Changed\n\nOne more section.\n", encoding="utf-8")
    _age(folder)
    again = load(folder, tmp_path / "cache")
    assert again.stats["files_parsed_now"] == 1
    assert again.documents.fingerprint != cold.documents.fingerprint
    assert "Changed" in [h.title for h in again.documents.documents_of([md.relative_to(folder).as_posix()])
                         ["md/pypdf_README.md"].headings]


def test_a_second_cache_dir_over_the_same_folder_parses_it_again(folder, tmp_path):
    """The document table is shared by every cache dir; the parse ledger lives in one: a cache dir
    without the ledger must not take the table (it crashed on the cache's missing-value marker)."""
    first = load(folder, tmp_path / "cache_a")
    other = load(folder, tmp_path / "cache_b")
    assert other.artifacts == first.artifacts and other.stats["files_in_ledger"] == 5


def test_files_written_seconds_ago_are_parsed_into_memory(folder, tmp_path):
    (folder / "md" / "new.md").write_text("# New\n\nJust written.\n", encoding="utf-8")
    ds = load(folder, tmp_path / "cache")
    assert isinstance(ds.documents, list) and "md/new.md" in [d.doc_id for d in ds.documents]
    where = placer(ds.documents, ["md/new.md"])
    assert where("md/new.md", 8) == "md/new.md, § New"


def test_include_and_exclude_globs(folder, tmp_path):
    ds = load(folder, tmp_path / "cache", include=["*.pdf", "*.md"], exclude=["bad/*"])
    assert ds.documents.doc_ids() == ["md/pypdf_README.md", "pdf/crazyones.pdf", "pdf/pdflatex-outline.pdf"]
    assert ds.stats["files_in_ledger"] == 0


def test_a_folder_where_nothing_parses_is_one_line_naming_it_and_the_reasons(folder, tmp_path):
    with pytest.raises(DataError) as err:
        load(folder / "bad", tmp_path / "cache")
    msg = str(err.value)
    assert "\n" not in msg and str(folder / "bad") in msg
    assert "no file could be parsed (5 files:" in msg
    assert all(f"1 {r}" in msg for r in BAD.values())
    with pytest.raises(DataError, match="dataset.path: .* does not exist"):
        load(tmp_path / "nowhere", tmp_path / "cache")
    with pytest.raises(ValueError, match="dataset.path is required"):
        FilesDataset()


def _queries(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_questions_evidence_becomes_spans_in_the_parsed_text(folder, tmp_path):
    q = _queries(tmp_path / "q.jsonl", [
        {"query_id": "a", "query": "How to create a database?", "gt_answer": "sqlite3 test.db",
         "evidence": [{"doc_id": "html/sqlite_quickstart.html",
                       "quote": 'enter:   "sqlite3 test.db".\nThis will create a new database named "test.db".'}]},
        {"query_id": "b", "query": "Who are the crazy ones?", "relevant_doc_ids": ["pdf/crazyones.pdf"]},
        {"query_id": "c", "query": "misfits?", "relevant_doc_ids": ["pdf/crazyones.pdf"],
         "evidence": ["Here's to the crazy ones. The misfits. The rebels."]},  # the PDF lacks the apostrophe
    ])
    ds = FilesDataset(path=str(folder), queries=q, cache_dir=str(tmp_path / "cache"), workers=1).load()
    docs = ds.documents.documents_of(["html/sqlite_quickstart.html", "pdf/crazyones.pdf"])
    (a,) = ds.queries[0].relevant
    assert docs[a.doc_id].text[a.start:a.end].startswith('enter: "sqlite3 test.db"')
    (b,) = ds.queries[1].relevant
    assert (b.start, b.end) == (0, len(docs["pdf/crazyones.pdf"].text))  # a whole file
    (c,) = ds.queries[2].relevant
    assert "crazy ones. The misfits. The rebels" in docs[c.doc_id].text[c.start:c.end]
    assert ds.has_answers and ds.has_relevance and ds.artifacts["parse_ledger.json"]["parsed"] == 6


def test_questions_naming_a_file_that_is_missing_or_did_not_parse(folder, tmp_path):
    bad = _queries(tmp_path / "bad.jsonl", [{"query_id": "a", "query": "?", "relevant_doc_ids": ["bad/encrypted.pdf"]}])
    with pytest.raises(DataError, match=r"'bad/encrypted.pdf' is not in the corpus \(it is in the parse ledger: encrypted\)"):
        FilesDataset(path=str(folder), queries=bad, cache_dir=str(tmp_path / "cache")).load()
    lost = _queries(tmp_path / "lost.jsonl", [{"query_id": "a", "query": "?",
                                               "evidence": [{"doc_id": "pdf/crazyones.pdf", "quote": "not in this file at all"}]}])
    with pytest.raises(DataError, match="1 evidence quote.* not found .*lower dataset.match"):
        FilesDataset(path=str(folder), queries=lost, cache_dir=str(tmp_path / "cache")).load()
    with pytest.raises(DataError, match="dataset.queries is required"):
        FilesDataset(path=str(folder), cache_dir=str(tmp_path / "cache")).load()


def test_the_run_summary_counts_the_parse_ledger():
    from ragsweep.pipeline.summary import files_line

    m = {"data/files": 8, "data/files_parsed": 5, "data/files_parsed_now": 0, "data/files_in_ledger": 3,
         "data/files_encrypted": 1, "data/files_no_text_layer": 2}
    assert files_line(m) == ("files: 5 parsed (0 parsed now), 3 in the parse ledger: 1 encrypted, 2 no_text_layer "
                             "(parse_ledger.json: each file's reason and fix)")


def test_records_carry_where_a_retrieved_chunk_of_a_parsed_file_is(folder, tmp_path):
    from ragsweep.pipeline.stages import retrieved_context as _retrieved_context
    from ragsweep.types import Chunk, Hit

    ds = load(folder, tmp_path / "cache")
    doc = ds.documents.documents_of(["pdf/pdflatex-outline.pdf"])["pdf/pdflatex-outline.pdf"]
    at = doc.pages[2] + 1
    hit = Hit(Chunk("c", doc.doc_id, at, at + 5, doc.text[at:at + 5]), 1.0, 1)
    (ctx,) = _retrieved_context([hit], placer(ds.documents, [doc.doc_id]))
    assert ctx["where"].startswith("pdf/pdflatex-outline.pdf p. 3")
    assert "where" not in _retrieved_context([Hit(Chunk("x", "plain", 0, 1, "x"), 1.0, 1)])[0]
