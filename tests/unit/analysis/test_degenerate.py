"""Sweeps that say when they are degenerate (ragsweep.analysis.degenerate)."""

import json

from hydra import compose, initialize_config_module

from ragsweep.analysis import degenerate
from ragsweep.types import Dataset, Document, Query, Span


def _cfg(*overrides):
    with initialize_config_module("ragsweep.conf", version_base=None):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon".split()


def _dataset():
    long = " ".join(f"{w}{i}" for i in range(30) for w in WORDS)  # ~600 words: many chunks at any size
    docs = [Document("long", long)] + [Document(f"s{i}", f"short note {i} about {WORDS[i]}") for i in range(9)]
    q_long = Query("q0", "alpha3 beta3", None, (Span("long", long.index("alpha3 "), long.index("alpha3 ") + 12),))
    q_short = [Query(f"q{i + 1}", f"note about {WORDS[i]}", None, (Span(f"s{i}", 0, len(docs[i + 1].text)),)) for i in range(9)]
    return Dataset("toy", docs, [q_long, *q_short], has_relevance=True)


def test_sweep_points_from_sweeper_params_and_command_line():
    assert degenerate.sweep_points(_cfg("+experiment=ragchecker_chunk_size")) == {"chunker.size": [150, 300, 600]}
    assert degenerate.sweep_points(_cfg("+experiment=ragchecker_overlap")) == {"chunker.overlap": [0.0, 0.2, 0.4]}
    assert degenerate.sweep_points(_cfg("+experiment=ragchecker_prompt")) == {}


def test_chunk_size_points_that_change_nothing_are_flagged():
    cfg = _cfg("retriever.top_k=2")
    res = degenerate.analyse(cfg, {"chunker.size": [600, 150, 300]}, dataset=_dataset())
    rows = {r["value"]: r for r in res["points"]}
    assert list(rows) == [150, 300, 600]  # in size order
    assert rows[150]["documents_in_one_chunk"] == 0.9 and rows[150]["chunks"] > 10
    # 9 of 10 documents fit in one chunk at every size: 300 and 600 are the same system for 90%
    assert rows[300]["same_chunks_documents"] == 0.9 and rows[300]["vs"] == 150
    assert any(w.startswith("chunk size 300: the same chunks as 150 for 90% of documents") for w in res["warnings"])
    assert rows[150]["top_k"] == 2 and 0 <= rows[150]["all_relevant_in_top_k"] <= 1
    assert res["retriever"] == "bm25"
    md = degenerate.markdown(res)
    assert "| chunk size 600 |" in md and "WARNING" in md
    lines = degenerate.report_lines(json.dumps(res))
    assert lines[0].startswith("corpus figures (toy, 10 documents") and any("WARNING" in x for x in lines)


def test_top_k_points_report_coverage_and_whole_corpus():
    cfg = _cfg("chunker.size=600", "retriever=dense")  # dense is not cheap: BM25 stands in, and says so
    res = degenerate.analyse(cfg, {"retriever.top_k": [1, 20, 40]}, dataset=_dataset())
    assert res["retriever"].startswith("bm25 (instead of the configured dense")
    cov = [r["all_relevant_in_top_k"] for r in res["points"]]
    assert cov == sorted(cov) and cov[-1] == 1.0
    assert [r["retrieves_all_chunks"] for r in res["points"]] == [False, True, True]
    assert any("top_k 20, 40: each retrieves all" in w for w in res["warnings"])


def test_covered_needs_every_character():
    from ragsweep.types import Chunk

    c = lambda a, b: Chunk("d#", "d", a, b, "x" * (b - a))  # noqa: E731
    assert degenerate._covered([Span("d", 5, 15)], [c(0, 10), c(10, 20)])
    assert not degenerate._covered([Span("d", 5, 15)], [c(0, 10)])
    assert not degenerate._covered([Span("d", 5, 15), Span("e", 0, 1)], [c(0, 20)])


class _Tracker:
    def __init__(self):
        self.tags, self.files = {}, {}

    def set_tags(self, tags):
        self.tags.update(tags)

    def log_json(self, obj, name):
        self.files[name] = json.dumps(obj)

    def log_text(self, text, name):
        self.files[name] = text


def test_check_sweep_logs_to_the_parent_and_never_raises(tmp_path, caplog, monkeypatch):
    cfg = _cfg("+experiment=ragchecker_chunk_size", "dataset=ragbench_paper_qa", f"cache_dir={tmp_path}", "dataset.limit=20")
    tr = _Tracker()
    res = degenerate.check_sweep(cfg, tr)
    assert [r["value"] for r in res["points"]] == [150, 300, 600]
    # ragbench_paper_qa's ~50-word entries fit in one chunk at any size: the sweep is degenerate
    assert tr.tags["ragsweep.degenerate"].startswith("yes") and "degenerate sweep: chunk size 300" in caplog.text
    assert set(tr.files) == {"degeneracy.json", "degeneracy.md"}
    assert degenerate.report_lines(json.loads(tr.files["degeneracy.json"]))[1].startswith("  chunk size 150:")

    def boom(*a, **k):
        raise RuntimeError("no tokenizer")

    monkeypatch.setattr(degenerate, "analyse", boom)
    tr = _Tracker()
    res = degenerate.check_sweep(cfg, tr)
    assert res == {"error": "RuntimeError: no tokenizer"} and tr.tags["ragsweep.degenerate"] == "error"
    assert "could not work out what the swept points change" in caplog.text
    assert degenerate.report_lines(res) == ["corpus figures: not computed (RuntimeError: no tokenizer)"]
    assert degenerate.check_sweep(_cfg("+experiment=ragchecker_prompt"), _Tracker()) is None


def test_strategy_points_compare_every_pair_of_strategies():
    assert degenerate.sweep_points(_cfg("+experiment=chunking_strategies"))["chunker"] == [
        "tokens", "recursive", "sentences", "markdown", "semantic"]
    data = _dataset()
    data.documents.append(Document("guide", "# Setup\n\nInstall it.\n\n# Use\n\nRun it with a dataset."))
    cfg = _cfg("retriever.top_k=2", "chunker.size=150")
    res = degenerate.analyse(cfg, {"chunker": ["tokens", "recursive", "markdown"]}, dataset=data)
    rows = {r["value"]: r for r in res["points"]}
    assert list(rows) == ["tokens", "recursive", "markdown"]  # in the sweep's order
    assert rows["recursive"]["chunks"] > 0 and set(rows["markdown"]["same_as"]) == {"tokens", "recursive"}
    # only the Markdown page has headings: markdown chunks like recursive for 10 of 11 documents
    assert rows["markdown"]["same_as"]["recursive"]["same_chunks_documents"] == round(10 / 11, 4)
    assert rows["recursive"]["same_as"]["tokens"]["same_chunks_documents"] < 1
    assert any(w.startswith("chunker recursive and markdown give the same chunks for 91% of documents")
               for w in res["warnings"])
    assert "chunker markdown:" in "\n".join(degenerate.report_lines(res)) and "| chunker markdown |" in degenerate.markdown(res)
