"""A sweep over chunking strategies and sizes, run as a user runs it: one finished run per system,
each named by its strategy, the strategy a short param the report pivots on, the chunks of each
strategy its own, and the degenerate-sweep figures comparing the strategies on the parent run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_faults import cli, mlflow_runs, stores, write_jsonl  # noqa: E402

GUIDE = """# Installation

ragsweep installs with one command. It needs Python 3.10 or newer.

## Linux

Run the setup script from the repository root. It creates a virtual environment when none is active.

## macOS

Apple silicon works with the Metal build of llama.cpp.

# Usage

Call ragsweep with a dataset and a retriever. Every stage is cached by content.
"""


@pytest.mark.slow  # 8 retrieval-only runs and the bundled MiniLM for the semantic chunker: ~1 minute
def test_a_sweep_over_strategies_and_sizes(tmp_path):
    from ragsweep.corpus.dataset import RagbenchPaperLongDoc

    paper = RagbenchPaperLongDoc().load().documents[1]  # real prose: paragraphs, lists
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [{"doc_id": "guide.md", "text": GUIDE},
                                                     {"doc_id": "paper", "text": paper.text[:6000]}])
    queries = write_jsonl(tmp_path / "queries.jsonl", [
        {"query_id": "q1", "query": "How do I install on Linux?", "relevant_doc_ids": ["guide.md"]},
        {"query_id": "q2", "query": "What does RAGBench evaluate?", "relevant_doc_ids": ["paper"]},
    ])
    r = cli(tmp_path, "-m", "dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={queries}",
            "generator=none", "evaluator=none", "chunker=tokens,recursive,markdown,semantic", "chunker.size=64,128",
            *stores(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]

    client, runs = mlflow_runs(tmp_path)
    children = [x for x in runs if x.data.tags.get("ragsweep.role") == "child"]
    assert len(children) == 8 and all(x.info.status == "FINISHED" for x in children)
    assert len({x.info.run_name for x in children}) == 8
    systems = {(x.data.params["chunker"], int(x.data.params["chunk_size"])): x for x in children}
    assert set(systems) == {(s, n) for s in ("tokens", "recursive", "markdown", "semantic") for n in (64, 128)}
    assert systems[("markdown", 64)].info.run_name.startswith("bm25-k4-markdown64o0.2")
    chunks = {k: x.data.metrics["data/chunks"] for k, x in systems.items()}
    assert chunks[("tokens", 64)] > chunks[("tokens", 128)]
    assert len({chunks[(s, 64)] for s in ("tokens", "recursive", "markdown", "semantic")}) > 1
    for x in children:
        assert x.data.metrics["retrieval/recall_at_k/n"] == 2

    parent = next(x for x in runs if x.data.tags.get("ragsweep.role") == "parent")
    path = client.download_artifacts(parent.info.run_id, "degeneracy.json", str(tmp_path / "dl"))
    fig = json.loads(Path(path).read_text())
    strategies = [p for p in fig["points"] if p["param"] == "chunker"]
    assert [p["value"] for p in strategies] == ["tokens", "recursive", "markdown", "semantic"]
    assert set(strategies[2]["same_as"]) == {"tokens", "recursive"}
