"""Per-question MLflow traces (spans, assessments from the judge), the evaluation table, and
their background sender, over a real sqlite MLflow store."""

from __future__ import annotations

import copy
import json
import os
import time

import pytest

from support import FIXTURES
from ragsweep.tracking import Tracker
from ragsweep.tracking import traces as tt

FIXTURE = FIXTURES / "ragchecker" / "examples_checking_outputs.json"


def _records() -> list[dict]:
    recs = json.loads(FIXTURE.read_text())["results"]
    for i, r in enumerate(recs):
        r["metrics"] = {"ragchecker/overall/f1": 40.0 + 20 * i, "ragchecker/generator/hallucination": 10.0 * i,
                        "retrieval/recall_at_k": 1.0, "ragas/faithfulness": float("nan")}
        r["prompt"] = f"Answer: {r['query']}"
        r["chunks_dropped"] = i
        r["generation"] = {"model": "smollm2", "prompt_tokens": 100 + i, "completion_tokens": 20, "latency_s": 0.5,
                           "cached": i == 0, "finish_reason": "stop"}
    failed = copy.deepcopy(recs[0])
    failed.update(query_id="failed", response="", error="HTTP 500", metrics={},
                  failure={"stage": "generation", "reason": "HTTP 500"})
    return recs + [failed]


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    root = tmp_path_factory.mktemp("traces")
    return Tracker(f"sqlite:///{root / 'mlflow.db'}", str(root / "art"), "traces")


def _traces(tr, run_id):
    import mlflow

    return mlflow.search_traces(locations=[tr.experiment_id], run_id=run_id, return_type="list")


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_one_trace_per_question_with_spans_and_assessments(tracker, monkeypatch):
    monkeypatch.setenv(tt.MODE_ENV, "sync")
    recs = _records()
    run_id = tracker.start("sync")
    res = tt.log_traces(tracker, recs, judge="llm:smollm2", run_id=run_id)
    tracker.end()
    assert res["traces"] == 3 and res["errors"] == 0 and res["spans"] == 15
    # each question's registry metrics where defined (RAGAS's faithfulness is NaN: none), the failed
    # question: its reason; each question's ground truth as two expectations (reference answer,
    # ground-truth claims; the fixture has no relevant spans)
    from ragsweep.tracking.trace_build import question_values

    defined = [question_values(r) for r in recs[:2]]
    assert res["assessments"] == sum(len(d) for d in defined) + 1 + 3 * 2
    assert not any(m.name == "ragas/faithfulness" for d in defined for m, _ in d)
    found = {t.info.trace_metadata["ragsweep.query_id"]: t for t in _traces(tracker, run_id)}
    assert set(found) == {str(recs[0]["query_id"]), str(recs[1]["query_id"]), "failed"}
    t0 = found[str(recs[0]["query_id"])]
    spans = {s.name: s for s in t0.data.spans}
    assert set(spans) == {tt.TRACE_NAME, "retrieve", "prompt", "generate", "evaluate"}
    assert [d["metadata"]["rank"] for d in spans["retrieve"].outputs] == list(range(1, len(recs[0]["retrieved_context"]) + 1))
    assert spans["prompt"].outputs == {"prompt": recs[0]["prompt"], "chunks_dropped": 0}
    assert spans["generate"].attributes["ragsweep.cached"] is True
    assert spans["generate"].attributes["ragsweep.prompt_tokens"] == 100
    claims = spans["evaluate"].outputs["response_claims"]
    assert len(claims) == len(recs[0]["response_claims"]) and {"vs_gt", "vs_chunks", "hallucination"} <= set(claims[0])
    names = [a.name for a in t0.info.assessments]
    assert len(names) == len(set(names))  # MLflow's UI shows a name's part after its last slash: none has one
    assert not any("/" in n for n in names)
    by_name = {a.name: a for a in t0.info.assessments}
    from ragsweep.judge.ragchecker_metrics import compute_example_metrics

    f1 = compute_example_metrics(recs[0])["f1"]  # on RAGChecker's 0-100, as the run's metric
    assert by_name["f1 (RAGChecker)"].value == round(f1, 1) and by_name["f1 (RAGChecker)"].value != 0.4
    assert by_name["f1 (RAGChecker)"].metadata["ragsweep.metric"] == "ragchecker/overall/f1"
    assert by_name["f1 (RAGChecker)"].source.source_type == "LLM_JUDGE"
    assert by_name["f1 (RAGChecker)"].source.source_id == "llm:smollm2"
    assert by_name["recall at k (retrieval)"].value == 1.0
    assert by_name["recall at k (retrieval)"].source.source_type == "CODE"
    assert all(len(repr(a.value).split(".")[-1]) <= 3 for a in t0.info.assessments if isinstance(a.value, float))
    assert json.loads(t0.info.request_preview) == {"system": "sync", "query": recs[0]["query"]}
    preview = t0.info.response_preview
    assert preview.startswith(recs[0]["response"][:40]) and "**Ground truth:**" in preview and len(preview) <= 1000
    assert "Retrieved chunks" in preview and recs[0]["gt_answer"][:30] in preview
    assert by_name["expected_response"].value == recs[0]["gt_answer"]  # where MLflow's own judges read it
    assert by_name["expected_facts"].value == [" ".join(c) if isinstance(c, list) else c for c in recs[0]["gt_answer_claims"]]
    assert by_name["expected_response"].source.source_type == "HUMAN"
    bad = found["failed"]
    assert bad.info.state.value == "ERROR"
    assert [(a.name, a.value) for a in bad.info.assessments if a.name == "failure"] == [("failure", "generation: HTTP 500")]


def _mlflow_version() -> tuple[int, int]:
    import mlflow

    return tuple(int(x) for x in mlflow.__version__.split(".")[:2])


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
@pytest.mark.skipif(_mlflow_version() < (3, 15), reason="a numeric feedback filter (feedback.x > 0) needs MLflow 3.15 (its parser's source): "
                    "3.12-3.14's trace search takes quoted strings only ('Expected a quoted string value for feedback'); "
                    "ragsweep itself never filters so (docs/python.md)")
def test_traces_filter_by_metric(tracker, monkeypatch):
    import mlflow

    monkeypatch.setenv(tt.MODE_ENV, "sync")
    run_id = tracker.start("filter")
    tt.log_traces(tracker, _records(), judge="offline", run_id=run_id)
    tracker.end()
    from ragsweep.judge.ragchecker_metrics import compute_example_metrics

    want = sum(compute_example_metrics(r)["hallucination"] > 0 for r in _records()[:2])
    hits = mlflow.search_traces(locations=[tracker.experiment_id], run_id=run_id, return_type="list",
                                filter_string="feedback.`hallucination (RAGChecker)` > 0")
    assert len(hits) == want and hits[0].info.assessments[0].source.source_type == "CODE"


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_background_sender_logs_traces_and_table(tracker, monkeypatch):
    monkeypatch.setenv(tt.MODE_ENV, "background")
    recs = _records()
    run_id = tracker.start("background")
    tab = tt.log_eval_table(tracker, recs)
    res = tt.log_traces(tracker, recs, judge="offline", run_id=run_id)
    tracker.end()
    assert res["spooled"] == 3 and res["seconds"] < 1.0 and res["sender_pid"] == tab["sender_pid"]
    sender = tracker._sender
    sender.wait(timeout=300)
    assert sender.returncode == 0, (tracker.spool.root / "sender.log").read_text()[-2000:]
    assert len(_traces(tracker, run_id)) == 3
    assert not tracker.spool.pending()
    table = tracker.client.load_table(tracker.experiment_id, "eval_table.json", run_ids=[run_id])
    assert list(table["query_id"]) == [f"#{r['query_id']}" for r in recs]  # text in the UI, never a rounded number
    assert {"question", "ground_truth", "response", "ragchecker/overall/f1", "failure"} <= set(table.columns)
    assert list(table["failure"])[-1] == "generation: HTTP 500"


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_never_fails_a_run(tracker, monkeypatch, caplog):
    monkeypatch.setenv(tt.MODE_ENV, "sync")

    class Broken:
        enabled = True
        experiment_id = "999999"
        tracking_uri = tracker.tracking_uri
        run_id = "nope"

        def log_table(self, *a, **k):
            raise RuntimeError("disk full")

    res = tt.log_traces(Broken(), _records(), judge="offline", run_id="nope")
    assert res["traces"] == 0 and res["errors"] == 3
    assert tt.log_eval_table(Broken(), _records())["errors"] == 1
    assert "not logged" in caplog.text


def test_table_rows_one_per_question():
    cols = tt.table_rows(_records())
    assert cols["query_id"][-1] == "#failed" and cols["ragas/faithfulness"] == [None, None, None]
    assert cols["ragchecker/overall/f1"] == [40.0, 60.0, None]


def test_assessment_names_are_unique_without_a_slash_and_values_keep_their_scales_digits():
    from ragsweep.judge.metrics import registry
    from ragsweep.tracking.trace_build import assessment_name, rounded

    per_question = [m for m in registry.all_metrics() if m.per_question is not None]
    names = [assessment_name(m) for m in per_question]
    assert len(set(names)) == len(names) and not any("/" in n for n in names)
    assert assessment_name(registry.get("ragchecker/generator/faithfulness")) == "faithfulness (RAGChecker)"
    assert assessment_name(registry.get("ragas/faithfulness")) == "faithfulness (RAGAS)"
    assert rounded(200 / 3, registry.get("ragchecker/overall/f1")) == 66.7
    assert rounded(0.1 + 0.2, registry.get("trace/utilization")) == 0.3


def test_the_response_preview_holds_the_answer_ground_truth_and_used_chunks_within_mlflows_limit():
    from ragsweep.tracking.trace_build import PREVIEW_CHARS, request_preview, response_preview

    rec = {"query": "q?", "response": "Paris is the capital.", "gt_answer": "Paris.",
           "retrieved_context": [{"doc_id": "a.md", "text": "Lyon is big. " * 200}, {"doc_id": "b.md", "text": "Paris is the capital of France. " * 100}],
           "retrieved2response": [["Neutral", "Entailment"]]}
    text = response_preview(rec)
    assert len(text) <= PREVIEW_CHARS and text.startswith("Paris is the capital.")
    assert "**Ground truth:** Paris." in text and "used** (1 of 2)" in text and "`b.md` Paris is the capital" in text
    assert "a.md" not in text  # not used by the answer
    none_used = response_preview({**rec, "retrieved2response": [["Neutral", "Neutral"]]})
    assert "a.md" in none_used and "b.md" in none_used and len(none_used) <= PREVIEW_CHARS  # every chunk, clipped
    assert response_preview({**rec, "response": ""}).startswith("*(no answer: retrieval only)*")
    assert json.loads(request_preview(rec, "bm25-k2")) == {"system": "bm25-k2", "query": "q?"}
    assert len(request_preview({"query": "x" * 5000}, "s")) <= PREVIEW_CHARS
