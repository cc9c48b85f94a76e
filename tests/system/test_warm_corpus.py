"""A warm run over an unchanged JSONL corpus (issue 29, item 3): the pipeline never opens the
corpus file (chunks, index and the prompt's titles come from the caches and the document table)
and its retrieval, prompts and metrics are the cold run's."""

from __future__ import annotations

import json
import os

import pytest

from test_faults import seed_mlflow, stores  # noqa: E402

DOCS = [("photo", "Photosynthesis", "Plants turn light, water and carbon dioxide into sugar and oxygen in the chloroplasts."),
        ("tides", None, "Tides are caused mainly by the gravitational pull of the Moon on the oceans of the Earth."),
        ("rust", "Corrosion", "Iron rusts when it reacts with oxygen and water, forming hydrated iron oxides."),
        ("volcano", "Volcanoes", "A volcano erupts when molten rock, gas and ash escape from a magma chamber."),
        ("empty", None, "  ")]
QUERIES = [("q1", "What do plants make from light?", ["photo"]), ("q2", "What causes tides?", ["tides"]),
           ("q3", "Why does iron rust?", ["rust"])]
TEMPLATE = "prompt.template='Context: {documents} Question: {question}'"
DOC_TEMPLATE = "prompt.document_template='[{title}] {text}'"  # the titles come from the document table


def _dataset(d):
    corpus, queries = d / "corpus.jsonl", d / "queries.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": i, "title": t, "text": x}) + "\n" for i, t, x in DOCS))
    queries.write_text("".join(json.dumps({"query_id": i, "query": q, "relevant_doc_ids": r}) + "\n" for i, q, r in QUERIES))
    os.utime(corpus, ns=(10**18, 10**18))  # not just written: a just-written file is always parsed
    return ["dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={queries}"]


@pytest.mark.slow  # two pipeline runs (tokenizer, MLflow store): a few seconds
def test_warm_run_does_not_open_the_corpus_and_gives_the_same_results(compose_cfg, tmp_path, monkeypatch):
    import ragsweep.corpus.dataset.loaders as loaders
    from ragsweep.pipeline.system import run_system
    from ragsweep.rag.prompt import PromptTemplate

    prompts: list[str] = []  # every prompt the runs built (retrieval-only runs build them too)
    fit = PromptTemplate.fit
    monkeypatch.setattr(PromptTemplate, "fit", lambda self, *a, **k: (lambda out: (prompts.append(out[0]), out)[1])(fit(self, *a, **k)))

    monkeypatch.setenv("RAGSWEEP_FINGERPRINTS", str(tmp_path / "memo" / "fingerprints.json"))
    opened: list[str] = []
    real, real_open = loaders._read_text, loaders._open_binary
    monkeypatch.setattr(loaders, "_read_text", lambda p: (opened.append(os.path.basename(p)), real(p))[1])
    monkeypatch.setattr(loaders, "_open_binary", lambda p: (opened.append(os.path.basename(p)), real_open(p))[1])
    seed_mlflow(tmp_path)
    overrides = [*_dataset(tmp_path), *stores(tmp_path), "generator=none", "evaluator=none", "retriever.top_k=2",
                 "chunker.size=16", "chunker.overlap=4"]
    cfg = compose_cfg(*overrides, TEMPLATE, DOC_TEMPLATE)
    cold = run_system(cfg)
    assert "corpus.jsonl" in opened
    opened.clear()
    warm = run_system(cfg)
    assert opened == ["queries.jsonl"]  # the corpus file is never read on the warm run

    def same(m):
        return {k: v for k, v in m.items() if not k.startswith(("time/", "cache/", "run/", "cost/"))}

    assert same(dict(warm)) == same(dict(cold))
    assert warm["data/documents"] == 4 and warm["data/empty_documents_skipped"] == 1
    keep = ("query_id", "retrieved_context", "relevant_spans", "metrics")
    assert [{k: r.get(k) for k in keep} for r in warm.records] == [{k: r.get(k) for k in keep} for r in cold.records]
    assert prompts[: len(prompts) // 2] == prompts[len(prompts) // 2 :]  # the same prompts, titles included
    assert any("[Photosynthesis] Plants turn light" in p for p in prompts) and "[] Tides are" in " ".join(prompts)
