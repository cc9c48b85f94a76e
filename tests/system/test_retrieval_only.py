"""Retrieval-only runs (``generator=none``), the oracle retriever and the floor/ceiling report block
(issue 23): no server, only the response-free metrics, the rest listed as not applicable, and the
judge's ground-truth work shared through the cache with a later full run."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from support import ROOT
from fake_openai_server import FakeOpenAIServer, ok  # noqa: E402
from test_faults import KEY_ENV, external, mlflow_runs, seed_mlflow, stores, tiny_dataset  # noqa: E402

from ragsweep.types import Chunk, Query, Span  # noqa: E402

# lexical checker, no RAGAS: no model to load, the test stays fast
JUDGE = ["evaluator=offline", "evaluator.checker.model=none", "evaluator.ragas=false"]
RESPONSE_FREE = ("ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision", "trace/relevance",
                 "retrieval/recall_at_k")
NEEDS_RESPONSE = ("ragchecker/overall/f1", "ragchecker/overall/recall", "ragchecker/generator/faithfulness",
                  "ragchecker/generator/hallucination", "trace/utilization", "trace/adherence_rate", "baseline/token_f1")


@pytest.fixture
def spy_checks(monkeypatch):
    """Every (claim, reference) pair the offline checker is asked to label, in order."""
    from ragsweep.judge.offline import OfflineChecker

    seen: list[tuple[str, str]] = []
    real = OfflineChecker.check_pairs

    def spy(self, pairs, cache=None, kind="context"):
        seen.extend((str(c), str(r)) for c, r in pairs)
        return real(self, pairs, cache=cache, kind=kind)

    monkeypatch.setattr(OfflineChecker, "check_pairs", spy)
    return seen


def _ledger(client, run, dest: Path) -> dict:
    path = client.download_artifacts(run.info.run_id, "ledger.json", str(dest))
    return json.loads(Path(path).read_text())


@pytest.mark.slow  # one pipeline run (chunker tokenizer, MLflow store): a few seconds
def test_generator_none_retrieves_and_judges_retrieval_only(compose_cfg, tmp_path, monkeypatch):
    import ragsweep.rag.generator as gen
    from ragsweep.pipeline.system import run_system

    def no_client(*a, **k):  # nothing may be generated
        raise AssertionError("a retrieval-only run built a generator client")

    monkeypatch.setattr(gen, "build_client", no_client)
    seed_mlflow(tmp_path)
    cfg = compose_cfg(*tiny_dataset(tmp_path), *stores(tmp_path), *JUDGE, "generator=none", "retriever.top_k=2")
    assert cfg.generator.server is None  # no server to start
    m = run_system(cfg)

    for name in RESPONSE_FREE:  # per question over every question, with its interval
        assert m[f"{name}/n"] == 4, name
        assert math.isfinite(m[name]) and m[f"{name}/ci_low"] <= m[name] <= m[f"{name}/ci_high"], name
    for name in NEEDS_RESPONSE:  # absent: never a NaN counted as a failure, never 0
        assert name not in m and f"{name}/n" not in m and f"{name}/failed" not in m, name
    assert m["ledger/failed_judge"] == 0 and m["generator/calls"] == 0

    client, runs = mlflow_runs(tmp_path)
    run = runs[-1]
    assert run.data.tags["ragsweep.mode"] == "retrieval_only"
    assert run.info.run_name == "bm25-k2-c300o0.2-retrieval_only"
    led = _ledger(client, run, tmp_path / "dl")
    assert led["mode"] == "retrieval_only"
    for name in NEEDS_RESPONSE:
        assert "retrieval-only" in led["not_applicable"][name] and name not in led["metrics"], name
    for name in RESPONSE_FREE:
        assert name not in led["not_applicable"] and led["metrics"][name]["scored"] == 4


@pytest.mark.slow  # two pipeline runs
def test_a_sweep_over_k_checks_the_chunks_two_points_share_once(compose_cfg, tmp_path, spy_checks):
    from ragsweep.pipeline.system import run_system

    seed_mlflow(tmp_path)
    base = [*tiny_dataset(tmp_path), *stores(tmp_path), *JUDGE, "generator=none"]
    k2 = run_system(compose_cfg(*base, "retriever.top_k=2"))
    first = list(spy_checks)
    spy_checks.clear()
    k3 = run_system(compose_cfg(*base, "retriever.top_k=3"))
    assert first and spy_checks and not set(first) & set(spy_checks)  # only the third chunk's pairs are new
    assert k3["judge/checks"] == len(set(spy_checks)) and k3["judge/cache_hits"] >= len(set(first))
    assert k2["judge/checks"] == len(set(first))


@pytest.mark.slow  # two pipeline runs, one against the fake OpenAI server
def test_a_full_run_after_a_retrieval_only_run_rejudges_none_of_its_claims(compose_cfg, tmp_path, monkeypatch, spy_checks):
    from ragsweep.pipeline.system import run_system

    monkeypatch.setenv(KEY_ENV, "sk-test")
    seed_mlflow(tmp_path)
    base = [*tiny_dataset(tmp_path), *stores(tmp_path), *JUDGE, "retriever.top_k=2"]
    retro = run_system(compose_cfg(*base, "generator=none"))
    retrieval_side = set(spy_checks)
    assert retrieval_side and retro["judge/checks"] == len(retrieval_side)
    spy_checks.clear()

    with FakeOpenAIServer(default=ok("The tower was completed in 1889 in Paris."), max_seconds=600) as fake:
        full = run_system(compose_cfg(*base, *external(fake.base_url)))
    assert full["generator/calls"] == 4
    assert not retrieval_side & set(spy_checks)  # every ground-truth-claim-vs-chunk label came from the cache
    assert spy_checks  # the response's own claims were checked
    assert full["judge/cache_hits"] >= len(retrieval_side)
    for name in ("ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision", "trace/relevance"):
        assert full[name] == pytest.approx(retro[name]) and full[f"{name}/n"] == retro[f"{name}/n"]
    assert math.isfinite(full["ragchecker/overall/f1"])


# -- the oracle retriever ---------------------------------------------------------------------------
def _chunks() -> list[Chunk]:
    text = "x" * 100
    return [Chunk(f"a#{i}", "a", s, s + 40, text[s:s + 40]) for i, s in enumerate((0, 30, 60))] + [
        Chunk("b#0", "b", 0, 50, "y" * 50)]


def test_oracle_returns_the_chunks_overlapping_the_relevant_spans_ranked_by_overlap():
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from ragsweep.pipeline.config import CONF_DIR

    oracle = instantiate(OmegaConf.load(CONF_DIR / "retriever" / "oracle.yaml"))
    assert oracle.name == "oracle" and oracle.top_k == 4
    oracle.index(_chunks())
    queries = [Query("q1", "anything", relevant=(Span("a", 35, 75),)),  # a#1 (30-70): 35, a#2 (60-100): 15, a#0: 5
               Query("q2", "anything", relevant=(Span("b", 10, 20), Span("a", 0, 10))),
               Query("q3", "no labels")]
    got = oracle.search(queries, k=2)
    assert [(h.chunk.chunk_id, h.score, h.rank) for h in got["q1"]] == [("a#1", 35.0, 1), ("a#2", 15.0, 2)]
    assert [h.chunk.chunk_id for h in oracle.search(queries, k=10)["q1"]] == ["a#1", "a#2", "a#0"]  # never padded
    assert [h.chunk.chunk_id for h in got["q2"]] == ["a#0", "b#0"]  # equal overlap: chunk order
    assert got["q3"] == [] and oracle.stats["no_labels"] == 2  # once per search


# -- floor and ceiling in the report ------------------------------------------------------------------
def test_bounds_leave_the_frame_and_show_the_share_of_headroom():
    import pandas as pd

    from ragsweep.analysis.report import bounds

    M = "ragchecker/retriever/claim_recall"
    F = "ragchecker/overall/f1"

    def row(retriever, prompt, k, cr, f1):
        return {"run_id": f"{retriever}{prompt}{k}", "run_name": "x", "retriever": retriever, "prompt": prompt,
                "top_k": k, M: cr, f"{M}/ci_low": cr - 5, f"{M}/ci_high": cr + 5, f"{M}/n": 300.0,
                F: f1, f"{F}/ci_low": f1 - 2, f"{F}/ci_high": f1 + 2, f"{F}/n": 300.0}

    df = pd.DataFrame([row("bm25", "d", 5, 60.0, 30.0), row("bm25", "d", 20, 80.0, 35.0),
                       row("oracle", "d", 5, 90.0, 50.0), row("oracle", "d", 20, 95.0, 50.0),
                       row("bm25", "no_context", 5, 40.0, 10.0)])  # closed book, but it retrieved
    kept, _ = bounds.split(df)  # undeclared: a closed-book run is a system (RAGBench's case study compares it)
    assert list(kept["run_id"]) == ["bm25d5", "bm25d20", "bm25no_context5"]
    systems, b = bounds.split(df, {"bounds": ["floor"]})
    assert list(systems["run_id"]) == ["bm25d5", "bm25d20"]  # the verdicts never see a bound run
    assert len(b.ceiling) == 2 and len(b.floor) == 1
    found = {(r["system"], r["metric"]): r for r in bounds.rows(systems, b, ["top_k"], [M, F])}
    k5 = found[("k=5", M)]
    assert k5["share"] == pytest.approx(60 / 90) and "90 [85, 95] (n=300)" == k5["ceiling"]
    assert k5["floor"] == "0 (nothing retrieved)"  # not the closed-book run's own retrieval (40)
    assert found[("k=20", M)]["share"] == pytest.approx(80 / 95)  # the k = 20 oracle for k = 20
    assert found[("k=20", F)]["share"] == pytest.approx((35 - 10) / (50 - 10))  # one closed-book floor for all k
    text = bounds.markdown(systems, b, ["top_k"], [M])
    assert "share of headroom" in text and "67%" in text
    assert bounds.markdown(systems, bounds.split(systems)[1], ["top_k"]) == ""  # no bound run: no block


# -- the SciFact benchmark goes through the pipeline ---------------------------------------------------
def _beir(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    docs = [("d1", "Mercury", "Mercury boils at 357 degrees Celsius."), ("d2", "Bees", "Bees dance to show where flowers are."),
            ("d3", "Everest", "Everest is the highest mountain above sea level."), ("d4", "Nile", "The Nile flows north.")]
    (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in docs))
    qs = [("q1", "At what temperature does mercury boil?", "d1"), ("q2", "How do bees show flowers?", "d2"),
          ("q3", "Which mountain is the highest?", "d3")]
    (d / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t, _ in qs))
    (d / "qrels").mkdir(exist_ok=True)
    (d / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{r}\t1\n" for q, _, r in qs))
    return d


@pytest.mark.slow  # the pipeline's chunker tokenizer and MLflow-free runs of two systems: ~10 s
def test_scifact_bench_prints_the_pipelines_retrieval_metrics_with_intervals(tmp_path, capsys):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from experiments.benchmarks import bench_retrieval

    labels = [label for label, _ in bench_retrieval.scifact_systems(100)]
    assert labels == ["tfidf", "tfidf+embedding", "bm25", "bm25+embedding", "dense", "dense+embedding",
                      "hybrid", "hybrid+embedding"]
    out = bench_retrieval.main(["--scifact", str(_beir(tmp_path / "beir")), "--cache", str(tmp_path / "cache"),
                                "--systems", "tfidf,bm25"])
    assert set(out["rows"]) == {"tfidf", "bm25"} and out["queries"] == 3 and out["corpus"] == 4
    for row in out["rows"].values():
        assert row["n"] == 3 and row["ndcg@10_ci"][0] <= row["ndcg@10"] <= row["ndcg@10_ci"][1]
        assert row["recall@100"] == 1.0  # 4 abstracts, k = 100: every relevant one is retrieved
    printed = capsys.readouterr().out
    assert "nDCG@10" in printed and "R@100" in printed and "bm25" in printed


# -- the retrieval-only top-k diagnosis against its expected results (reduced form) ------------------
@pytest.mark.slow  # a real 4-system sweep on 5 questions with the lexical checker: ~20 s on 2 cores
def test_retrieval_only_topk_sweep_matches_its_expected_results(tmp_path):
    import os
    import subprocess

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_MLFLOW_TRACES": "sync", "RAGSWEEP_STATE_DIR": str(tmp_path / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    sweep = subprocess.run(
        [sys.executable, "-m", "ragsweep.pipeline.cli", "-q", "-m", "+experiment=ragchecker_topk_retrieval", "dataset.limit=5",
         "retriever.top_k=5,20", "evaluator.checker.model=none", "evaluator.ragas=false", f"mlflow.tracking_uri={uri}",
         f"mlflow.artifact_location={tmp_path / 'art'}", f"hydra.sweep.dir={tmp_path / 'multirun'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    check = subprocess.run(
        [sys.executable, "-m", "ragsweep.analysis.report", "--experiment", "ragchecker_topk_retrieval", "--tracking-uri", uri,
         "--out", str(tmp_path / "report"), "--check"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    directions = (tmp_path / "report" / "directions.md").read_text()
    assert "retrieval-only: 4 of 4 run(s)" in directions  # 2 BM25 systems + their 2 oracle ceilings
    bounds = (tmp_path / "report" / "bounds.md").read_text()
    assert "retriever=oracle" in bounds and "share of headroom" in bounds
    # question-by-question pages ordered by claim recall: no response to score, no "no compare page" warning
    assert "no compare page" not in check.stderr and list((tmp_path / "report" / "compare").glob("*.html"))
