"""Built-in long-document datasets: shapes as stated, spans that point at the original text."""

import json

import pytest

from ragsweep.corpus.dataset import BUILTIN, ClapNQ, ClapNQLongDoc, RagbenchPaperLongDoc
from ragsweep.corpus.dataset.longdoc import reassemble


def test_reassemble_overlapping_chunks():
    text, starts = reassemble(["the cat sat on", "sat on the mat.", "A new paragraph.", "respon", "sentence"])
    assert text == "the cat sat on the mat.\n\nA new paragraph.\n\nrespon\n\nsentence"  # "se" is no overlap
    assert starts == [0, 8, 25, 43, 51]


def test_ragbench_paper_longdoc_spans_are_the_relevant_chunks():
    data = json.loads((BUILTIN / "ragbench_paper_qa" / "ragbench_paper_qa.json").read_text(encoding="utf-8"))
    ds = RagbenchPaperLongDoc().load()
    assert len(ds.documents) == 8 and len(ds.queries) == 400 and not ds.has_answers
    assert [d.title for d in ds.documents][1:3] == ["1 Introduction", "2 Related Work"]
    docs = ds.doc_index
    for q in ds.queries:
        (cid,) = data["relevant_contexts"][q.query_id]
        got = "".join(docs[s.doc_id].text[s.start : s.end] for s in q.relevant)
        assert got == data["corpus"][cid]  # split across a section boundary at most
    whole = RagbenchPaperLongDoc(split="none").load()
    (doc,) = whole.documents
    assert doc.text == "".join(d.text for d in ds.documents) and len(doc.text) == 67830
    for q in whole.queries:
        (s,) = q.relevant
        assert doc.text[s.start : s.end] == data["corpus"][data["relevant_contexts"][q.query_id][0]]
    with pytest.raises(ValueError, match="sections"):
        RagbenchPaperLongDoc(split="pages")


def test_clapnq_longdoc_keeps_answers_and_annotated_sentences():
    base, ds = ClapNQ().load(), ClapNQLongDoc().load()
    assert len(ds.documents) == 60 and len(ds.queries) == 300 and ds.has_answers
    assert sum(len(d.text) for d in ds.documents) == sum(len(d.text) for d in base.documents) + 2 * (600 - 60)
    bdocs, docs = base.doc_index, ds.doc_index
    for bq, q in zip(base.queries, ds.queries):
        assert (q.query_id, q.gt_answer) == (bq.query_id, bq.gt_answer)
        assert [docs[s.doc_id].text[s.start : s.end] for s in q.relevant] == [bdocs[s.doc_id].text[s.start : s.end] for s in bq.relevant]
    assert len(ClapNQLongDoc(passages_per_doc=30).load().documents) == 20
    assert ClapNQLongDoc(limit=5).load().queries == ds.queries[:5]
