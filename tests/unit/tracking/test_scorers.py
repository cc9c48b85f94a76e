"""ragsweep's judge as MLflow scorers (issue 38): ``mlflow.genai.evaluate`` scores a tiny app,
traced with ``@mlflow.trace`` and a RETRIEVER span, offline, the assessments landing on its
traces; and MLflow's own judges read the ground truth ragsweep puts on its traces, against a fake
OpenAI-compatible endpoint (no network)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from ragsweep.tracking import scorers as S

FACTS = {"capital of France?": ("Paris is the capital of France.", "The capital of France is Paris."),
         "largest planet?": ("Jupiter is the largest planet.", "Bananas are yellow.")}


def test_the_metric_set_and_its_errors():
    names = S.metric_names()
    assert {"ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision", "ragchecker/generator/faithfulness",
            "ragchecker/generator/hallucination", "ragchecker/generator/noise_sensitivity_in_relevant",
            "trace/adherence_rate", "trace/utilization", "ragas/faithfulness"} <= set(names)
    assert not [n for n in names if n.startswith(("retrieval/", "baseline/"))] and "trace/overall_supported" not in names
    assert S.metric_names(["ragchecker/overall/f1"]) == ["ragchecker/overall/f1"]
    with pytest.raises(S.ScorerError, match="'ragchecker/f2' is not a per-question metric"):
        S.metric_names(["ragchecker/f2"])
    with pytest.raises(S.ScorerError, match="'retriever=bm25' is not an override of the evaluator group"):
        S.build_evaluator("retriever=bm25")


@pytest.fixture(scope="module")
def toy_app(tmp_path_factory):
    """A tiny RAG app traced with @mlflow.trace (a RETRIEVER span), run on two questions, each
    trace with its reference answer as an expectation."""
    import mlflow
    from mlflow.entities import Document, SpanType

    root = tmp_path_factory.mktemp("toy")
    mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
    exp = mlflow.set_experiment("toy_app")

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def retrieve(question: str) -> list:
        return [Document(page_content=FACTS[question][0], metadata={"doc_uri": "facts.md"}),
                Document(page_content="Bananas are yellow.", metadata={"doc_uri": "fruit.md"})]

    @mlflow.trace
    def answer(question: str) -> str:
        retrieve(question)
        return FACTS[question][1]

    for q in FACTS:
        answer(q)
    mlflow.flush_trace_async_logging()
    traces = mlflow.search_traces(locations=[exp.experiment_id], return_type="list")
    for t in traces:
        q = t.data.spans[0].inputs["question"]
        mlflow.log_expectation(trace_id=t.info.trace_id, name="expected_response", value=FACTS[q][0])
    return SimpleNamespace(root=root, experiment_id=exp.experiment_id)


@pytest.mark.slow  # a sqlite MLflow store and the offline judge's MiniLM
def test_ragsweep_scorers_score_a_traced_app_offline(toy_app):
    import mlflow

    traces = mlflow.search_traces(locations=[toy_app.experiment_id], return_type="list")
    names = ["ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision",
             "ragchecker/overall/recall", "trace/adherence_rate", "ragas/faithfulness"]
    scorers = S.mlflow_scorers(names, cache_dir=toy_app.root / "cache")
    res = mlflow.genai.evaluate(data=traces, scorers=scorers)
    by_q = {}
    for t in mlflow.search_traces(locations=[toy_app.experiment_id], run_id=res.run_id, return_type="list"):
        fb = {a.name: a for a in t.info.assessments if getattr(a, "feedback", None) is not None}
        by_q[t.data.spans[0].inputs["question"]] = fb
    assert set(by_q) == set(FACTS)
    right, wrong = by_q["capital of France?"], by_q["largest planet?"]
    for fb in (right, wrong):
        assert set(names) <= set(fb)
        assert fb["ragchecker/retriever/claim_recall"].source.source_id == "ragsweep:offline"
    # the fact is in the first chunk both times: every ground-truth claim retrieved, one chunk of two useful
    assert right["ragchecker/retriever/claim_recall"].value == 100.0 == wrong["ragchecker/retriever/claim_recall"].value
    assert right["ragchecker/retriever/context_precision"].value == 50.0
    # the right answer covers the reference's claim, the off-topic one does not
    assert right["ragchecker/overall/recall"].value == 100.0 and wrong["ragchecker/overall/recall"].value == 0.0
    assert "ground-truth claim" in right["ragchecker/retriever/claim_recall"].rationale
    assert res.metrics["ragchecker/retriever/claim_recall/mean"] == 100.0


@pytest.mark.slow
def test_a_trace_without_ground_truth_gets_an_error_that_says_why(toy_app):
    scorer = S.mlflow_scorers(["ragchecker/overall/recall", "trace/utilization"], cache_dir=toy_app.root / "cache")
    fb = scorer[0](inputs={"question": "q"}, outputs="Paris is in France.", expectations=None, trace=None)
    assert fb.value is None and "needs a ground truth" in fb.error.error_message
    ok = scorer[1](inputs={"question": "q"}, outputs="Paris is in France.", trace=None)
    assert ok.error is not None  # no RETRIEVER span: nothing to utilize, undefined, never a guessed 0


def _mlflow_version() -> tuple[int, int]:
    import mlflow

    return tuple(int(x) for x in mlflow.__version__.split(".")[:2])


@pytest.mark.slow
@pytest.mark.skipif(_mlflow_version() < (3, 14), reason="MLflow's judges read OPENAI_BASE_URL / OPENAI_API_BASE from "
                    "3.14 (3.12's openai provider takes the key only and calls api.openai.com); docs/python.md")
def test_mlflows_own_judges_read_ragsweeps_expectations_through_an_openai_compatible_endpoint(tmp_path, monkeypatch):
    import mlflow
    from mlflow.genai.scorers import Correctness, RetrievalGroundedness, RetrievalSufficiency

    from fake_openai_server import FakeOpenAIServer, ok
    from ragsweep import mlflow_traces
    from ragsweep.tracking import Tracker
    from ragsweep.tracking.traces import send_traces

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, str(tmp_path / "art"), "judges")
    rid = tracker.start("bm25")
    recs = [{"query_id": "q1", "query": "capital of France?", "gt_answer": "Paris", "response": "Paris.",
             "gt_answer_claims": ["Paris is the capital of France"], "metrics": {"trace/adherence_rate": 1.0},
             "retrieved_context": [{"doc_id": "a", "text": "Paris is the capital of France.", "chunk_id": "a#0"}],
             "relevant_spans": [{"doc_id": "a", "start": 0, "end": 31}]}]
    assert send_traces(tracker, recs, judge="offline", run_id=rid, spool=False)["traces"] == 1
    tracker.end()
    seen = []

    def responder(body, i):
        seen.append(json.dumps(body["messages"]))
        return ok(json.dumps({"result": "yes", "rationale": "the facts are there"}))

    with FakeOpenAIServer(responder=responder) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.delenv("OPENAI_API_BASE", raising=False)
        data = mlflow_traces("judges", run=rid, tracking_uri=uri)
        assert data["expectations"].tolist() == [{"expected_response": "Paris"}]
        judges = [Correctness(model="openai:/fake"), RetrievalSufficiency(model="openai:/fake"),
                  RetrievalGroundedness(model="openai:/fake")]
        res = mlflow.genai.evaluate(data=data, scorers=judges)
        facts = mlflow_traces("judges", run=rid, tracking_uri=uri, expectations="expected_facts")
        assert facts["expectations"].tolist() == [{"expected_facts": ["Paris is the capital of France"]}]
    df = res.result_df
    assert [df.loc[0, f"{n}/value"] for n in ("correctness", "retrieval_sufficiency", "retrieval_groundedness")] == ["yes"] * 3
    # the judges were shown ragsweep's ground truth (Correctness: the reference as the claim to find in the
    # response; RetrievalSufficiency: as the answer the chunks must support) and the RETRIEVER span's chunk
    assert sum("<claim>Paris</claim>" in m for m in seen) == 1 and sum("<answer>Paris</answer>" in m for m in seen) == 1
    assert sum("Paris is the capital of France." in m for m in seen) == 2
    assert not math.isnan(res.metrics["correctness/mean"])
