"""The PDF round trip (issue 36, item 3): the RAGBench paper's text (the source of
``dataset=ragbench_paper_longdoc``), typeset to PDF by pandoc + pdfTeX
(tests/fixtures/files/paper/ragbench_paper.pdf, experiments/benchmarks/own_docs/make_paper_docs.py), parsed
back by ``dataset=files``; every ``ragbench_paper_qa`` question's evidence (its relevant chunk's
text) is located in the parsed text, and BM25's recall over the PDF stays within
:data:`MARGIN` of its recall over the text itself (the same questions, chunker and retriever).
Measured: recall@4 0.8375 over the text, 0.8450 over the PDF (400 questions; 0.8425 before PDFium's line-break marks were resolved)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from ragsweep.corpus.dataset.files import FilesDataset
from ragsweep.corpus.dataset.loaders import BUILTIN, read_json
from ragsweep.corpus.dataset.longdoc import RagbenchPaperLongDoc
from support import FIXTURES

#: the largest difference of recall@4 between the text and its PDF that the round trip accepts
#: (measured: 0.8375 and 0.8450; 0.03 is about one standard error of a recall over 400 questions)
MARGIN = 0.03
K = 4


def _questions(path, doc_id):
    data = read_json(str(BUILTIN / "ragbench_paper_qa" / "ragbench_paper_qa.json"))
    with open(path, "w", encoding="utf-8") as fh:
        for qid, text in data["questions"].items():
            quotes = [{"doc_id": doc_id, "quote": data["corpus"][str(c)]} for c in data["relevant_contexts"].get(qid, [])]
            fh.write(json.dumps({"query_id": qid, "query": text, "evidence": quotes}) + "\n")


def _recall(tmp_path, name, make):
    from ragsweep.corpus.chunker import TokenChunker
    from ragsweep.judge.metrics.retrieval import retrieval_metrics
    from ragsweep.rag.retriever.bm25 import BM25Retriever

    folder = tmp_path / name
    folder.mkdir()
    make(folder / name)
    old = time.time() - 60  # an unchanged folder (not written seconds ago): the cached, streaming path
    os.utime(folder / name, (old, old))
    _questions(tmp_path / f"{name}.jsonl", name)
    ds = FilesDataset(path=str(folder), queries=str(tmp_path / f"{name}.jsonl"), cache_dir=str(tmp_path / "cache")).load()
    chunks = TokenChunker(size=300, overlap=0.2).chunk(ds.documents)
    bm25 = BM25Retriever(top_k=K)
    bm25.index(chunks)
    results = bm25.search(ds.queries, k=K)
    return ds, retrieval_metrics(results, ds.queries, K, chunks=chunks)["recall@4"]


def test_the_papers_pdf_retrieves_its_evidence_as_well_as_its_text(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo" / "fingerprints.json"))
    text = RagbenchPaperLongDoc(split="none").load().documents[0].text
    txt, r_text = _recall(tmp_path, "ragbench_paper.txt", lambda p: p.write_text(text, encoding="utf-8"))
    pdf, r_pdf = _recall(tmp_path, "ragbench_paper.pdf",
                         lambda p: shutil.copy(FIXTURES / "files" / "paper" / "ragbench_paper.pdf", p))
    assert len(pdf.queries) == len(txt.queries) == 400
    assert all(q.relevant for q in pdf.queries)  # every question's evidence was located in the PDF's text
    doc = pdf.documents.documents_of(["ragbench_paper.pdf"])["ragbench_paper.pdf"]
    assert len(doc.pages) == 32
    print(f"recall@{K}: text {r_text:.4f}, PDF {r_pdf:.4f}")
    assert abs(r_text - r_pdf) <= MARGIN, (r_text, r_pdf)
    assert r_pdf > 0.5  # retrieval works at all over the parsed PDF
