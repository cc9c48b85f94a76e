"""dataset=ragchecker_benchmark: RAGChecker's processed benchmark format, gold passages as spans."""

import json
import logging

import pytest

from ragsweep.corpus.dataset import RagcheckerBenchmark
from ragsweep.corpus.dataset.locate import locate
from ragsweep.errors import DataError
from ragsweep.types import Chunk, is_relevant

from conftest import FIXTURES

ROOT = FIXTURES / "ragchecker_benchmark"


def test_fixture_every_way_of_locating_a_passage(caplog):
    with caplog.at_level(logging.WARNING):
        ds = RagcheckerBenchmark(path=str(ROOT)).load()
    assert ds.name == "ragchecker_benchmark" and len(ds.documents) == 3 and len(ds.queries) == 6
    assert ds.has_answers and ds.has_relevance
    assert {k: v for k, v in ds.stats.items() if k.startswith("gt_context_")} == {
        "gt_context_exact": 2, "gt_context_whitespace": 1, "gt_context_words": 1, "gt_context_fuzzy": 1, "gt_context_unlocated": 1}
    assert "1 of 6 gt_context passage(s) could not be located" in caplog.text and "item 4" in caplog.text
    assert "1 gt_context passage(s) located only approximately" in caplog.text
    docs, q = ds.doc_index, {q.query_id: q for q in ds.queries}
    text = lambda s: docs[s.doc_id].text[s.start : s.end]  # noqa: E731
    (s1,) = q["q1"].relevant
    assert s1.doc_id == "-101" and text(s1).startswith("Seasonality") and text(s1).endswith("calendar year.")
    (s2,) = q["q2"].relevant  # tokenized passage ("Examiner 's office") in plain text
    assert text(s2).startswith("It is common") and "Examiner's office" in text(s2) and text(s2).endswith("day of the week")
    a, b = q["q3"].relevant  # two passages: whitespace-normalised, then fuzzy ("bush" vs "shrub")
    assert text(a).startswith("Tea is an aromatic") and text(a).endswith("Camellia sinensis,")
    assert "East Asia" in text(b) and text(b).endswith("northern Myanmar") and b.start > a.end
    (s4,) = q["q4"].relevant  # its title names no document: found by its phrases
    assert s4.doc_id == "-101" and text(s4).startswith("Moving averages")
    assert q["q5"].relevant == () and q["q6"].relevant == ()
    assert q["q1"].gt_answer.startswith("Regular")


def test_spans_survive_any_chunking():
    ds = RagcheckerBenchmark(path=str(ROOT)).load()
    (s,) = ds.queries[0].relevant
    doc = ds.doc_index[s.doc_id]
    cut = len(doc.text) // 3  # a chunk that ends before the span is not relevant, one over it is
    assert not is_relevant(Chunk("x#0", doc.doc_id, 0, min(cut, s.start), doc.text[: min(cut, s.start)]), ds.queries[0].relevant)
    assert is_relevant(Chunk("x#1", doc.doc_id, s.start + 5, s.start + 6, doc.text[s.start + 5 : s.start + 6]), ds.queries[0].relevant)


def test_queries_file_as_a_bare_list_and_doc_ids(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"doc_id": "7", "text": "One two three four five six seven."}) + "\n")
    (tmp_path / "lifestyle_queries.json").write_text(json.dumps([
        {"query_id": "a", "query": "q?", "gt_answer": "x", "gt_context": ["three four five"]},
        {"query_id": "b", "query": "q?", "gt_answer": "x", "gt_context": [{"doc_id": "7", "text": "FIVE six, seven"}]},
    ]))
    ds = RagcheckerBenchmark(path=str(tmp_path), limit=1).load()
    assert len(ds.queries) == 1 and ds.stats["queries_total"] == 2
    ds = RagcheckerBenchmark(path=str(tmp_path)).load()
    a, b = ds.queries
    assert a.relevant[0].start == len("One two ") and ds.stats["gt_context_words"] == 1


@pytest.mark.parametrize("setup, match", [
    (lambda p: None, r"corpus.jsonl: file not found"),
    (lambda p: (p / "corpus.jsonl").write_text('{"doc_id": "1", "text": "x"}\n'), r"exactly one \*_queries.json"),
    (lambda p: ((p / "corpus.jsonl").write_text('{"doc_id": "1", "text": "x"}\n'), (p / "a_queries.json").write_text('{"x": 1}')), r"input_data"),
    (lambda p: ((p / "corpus.jsonl").write_text('{"doc_id": "1", "text": "x"}\n'),
                (p / "a_queries.json").write_text('[{"query_id": "1", "query": "q", "gt_context": [{"doc_id": "9", "text": "x"}]}]')), r"doc_id '9' is not in the corpus"),
])
def test_bad_input_is_named(tmp_path, setup, match):
    setup(tmp_path)
    with pytest.raises(DataError, match=match):
        RagcheckerBenchmark(path=str(tmp_path)).load()


def test_path_is_required():
    with pytest.raises(ValueError, match="dataset.path is required"):
        RagcheckerBenchmark()


def test_locate_methods():
    doc = "Alpha beta , gamma delta.\nEpsilon   zeta eta theta iota kappa lambda mu."
    assert locate("beta , gamma", doc)[2] == "exact"
    assert locate("Epsilon zeta", doc) == (26, 26 + len("Epsilon   zeta"), "whitespace")
    assert locate("beta, gamma delta", doc)[2] == "words"
    s, e, how = locate("zeta eta theta iota kappa lambda nu", doc)
    assert how == "fuzzy" and doc[s:e] == "zeta eta theta iota kappa lambda"
    assert locate("nothing of the sort here at all", doc) is None
