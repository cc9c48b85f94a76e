import json

import pytest

from ragsweep.corpus.dataset import BeirDataset, ClapNQ, JsonlDataset, RagbenchPaperQA, RagcheckerDataset
from ragsweep.errors import DataError

from conftest import FIXTURES


def test_clapnq_builtin_matches_the_paper_setup():
    ds = ClapNQ().load()
    assert len(ds.documents) == 600 and len(ds.queries) == 300
    docs = ds.doc_index
    for q in ds.queries:
        assert q.gt_answer and q.relevant
        for span in q.relevant:  # spans point at the annotator-selected sentences, exactly
            text = docs[span.doc_id].text[span.start : span.end]
            assert text and text == text.strip()
    assert ClapNQ(limit=20).load().queries == ds.queries[:20]


def test_ragbench_paper_qa_relevance_is_the_whole_entry():
    ds = RagbenchPaperQA().load()
    assert len(ds.documents) == 197 and len(ds.queries) == 400
    q = ds.queries[0]
    assert q.gt_answer is None
    (span,) = q.relevant
    assert span.start == 0 and span.end == len(ds.doc_index[span.doc_id].text)


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_jsonl_loader(tmp_path):
    corpus = _write(tmp_path / "c.jsonl", [json.dumps({"doc_id": "a", "text": "Alpha text."}), json.dumps({"doc_id": "b", "text": "  "}), json.dumps({"doc_id": "c", "text": "Gamma.", "title": "G"})])
    queries = _write(tmp_path / "q.jsonl", [json.dumps({"query_id": "1", "query": "alpha?", "gt_answer": "Alpha.", "relevant_doc_ids": ["a"]})])
    ds = JsonlDataset(corpus=corpus, queries=queries).load()
    assert [d.doc_id for d in ds.documents] == ["a", "c"]
    assert ds.stats["empty_documents_skipped"] == 1
    assert ds.queries[0].relevant[0].end == len("Alpha text.")


@pytest.mark.parametrize(
    "corpus_lines, query_lines, match",
    [
        (['{"doc_id": "a", "text": "x"}', "{not json"], ['{"query_id": "1", "query": "q"}'], r"c.jsonl:2: not valid JSON"),
        (['{"text": "x"}'], ['{"query_id": "1", "query": "q"}'], r"c.jsonl:1: missing required field 'doc_id'"),
        (['{"doc_id": "a", "text": "x"}'], ['{"query_id": "1"}'], r"q.jsonl:1: missing required field 'query'"),
        (['{"doc_id": "a", "text": "x"}', '{"doc_id": "a", "text": "y"}'], ['{"query_id": "1", "query": "q"}'], r"duplicate doc_id 'a'"),
        (['{"doc_id": "a", "text": ""}'], ['{"query_id": "1", "query": "q"}'], r"zero \(non-empty\) documents"),
        (['{"doc_id": "a", "text": "x"}'], ['{"query_id": "1", "query": "q", "relevant_doc_ids": ["zz"]}'], r"q.jsonl:1: relevant document 'zz' is not in the corpus"),
    ],
)
def test_jsonl_bad_input_names_file_and_line(tmp_path, corpus_lines, query_lines, match):
    c, q = _write(tmp_path / "c.jsonl", corpus_lines), _write(tmp_path / "q.jsonl", query_lines)
    with pytest.raises(DataError, match=match):
        JsonlDataset(corpus=c, queries=q).load()


def test_non_utf8_is_named(tmp_path):
    c = tmp_path / "c.jsonl"
    c.write_bytes(b'{"doc_id": "a", "text": "ok"}\n{"doc_id": "b", "text": "caf\xe9"}\n')
    q = _write(tmp_path / "q.jsonl", ['{"query_id": "1", "query": "q"}'])
    with pytest.raises(DataError, match=r"c.jsonl:2: text is not UTF-8"):
        JsonlDataset(corpus=str(c), queries=q).load()


def test_beir_loader_and_unknown_qrels_doc(tmp_path):
    _write(tmp_path / "corpus.jsonl", ['{"_id": "d1", "title": "T", "text": "one"}', '{"_id": "d2", "text": "two"}'])
    _write(tmp_path / "queries.jsonl", ['{"_id": "q1", "text": "one?"}', '{"_id": "q2", "text": "no qrels"}'])
    (tmp_path / "qrels").mkdir()
    _write(tmp_path / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q1\td1\t1"])
    ds = BeirDataset(path=str(tmp_path)).load()
    assert [q.query_id for q in ds.queries] == ["q1"] and ds.queries[0].relevant[0].doc_id == "d1"
    _write(tmp_path / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q1\tdX\t1"])
    with pytest.raises(DataError, match=r"test.tsv:2: corpus-id 'dX' is not in corpus.jsonl"):
        BeirDataset(path=str(tmp_path)).load()


def test_ragchecker_file_contexts_become_the_corpus():
    ds = RagcheckerDataset(path=str(FIXTURES / "ragchecker" / "examples_checking_inputs.json")).load()
    assert len(ds.queries) == 2 and all(q.gt_answer for q in ds.queries)
    assert len(ds.documents) >= 4


def test_a_parsed_files_layout_is_part_of_the_corpus_fingerprint():
    """The markdown chunker splits at a parsed file's headings: new headings over the same text
    are a new corpus (a new chunk cache key), while a plain-text corpus hashes as before."""
    from ragsweep.corpus.dataset.fingerprint import hash_documents
    from ragsweep.types import Document, Heading

    plain = Document("a.md", "Intro\nBody text.")
    assert hash_documents([plain]) == hash_documents([Document("a.md", "Intro\nBody text.", pages=(), headings=())])
    one = Document("a.md", plain.text, headings=(Heading(0, 5, 1, "Intro"),))
    two = Document("a.md", plain.text, headings=(Heading(0, 5, 2, "Intro"),))
    paged = Document("a.md", plain.text, pages=(0, 6))
    assert len({hash_documents([d]) for d in (plain, one, two, paged)}) == 4
