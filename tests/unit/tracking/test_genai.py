"""ragsweep inside MLflow's GenAI evaluation (issue 38): a question set round-trips through an
MLflow evaluation dataset (written by a run as its input, read back by ``dataset=mlflow``), and
the traces carry the ground truth as expectations that ``mlflow_traces`` hands to the judges."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ragsweep.errors import DataError
from ragsweep.tracking import Tracker
from ragsweep.tracking import genai
from ragsweep.tracking.questions import MlflowQuestions, to_query
from ragsweep.types import Dataset, Document, Query, Span

DOCS = [Document("a.md", "Paris is the capital of France. It lies on the Seine."),
        Document("b.md", "Berlin is the capital of Germany.")]
QUERIES = [Query("q1", "What is the capital of France?", "Paris", (Span("a.md", 0, 31),)),
           Query("q2", "Which river runs through Paris?", "The Seine", (Span("a.md", 32, 53), Span("b.md", 0, 5))),
           Query("q3", "An unanswered question?", None, ())]


def test_a_question_becomes_an_mlflow_record_and_back():
    lengths = {d.doc_id: len(d.text) for d in DOCS}
    records = genai.question_records(QUERIES)
    assert records[0] == {"inputs": {"question": "What is the capital of France?"},
                          "expectations": {"expected_response": "Paris",
                                           "expected_retrieved_context": [{"doc_uri": "a.md", "start": 0, "end": 31}]},
                          "tags": {"query_id": "q1"}}
    back = [to_query(r, i, lengths, "here") for i, r in enumerate(records)]
    assert back == QUERIES
    # a record curated in MLflow: a whole relevant document, facts instead of a reference answer
    q = to_query({"inputs": {"query": "capital?"}, "expectations": {"expected_facts": ["Paris", "is the capital"],
                  "expected_retrieved_context": [{"doc_uri": "b.md"}]}, "dataset_record_id": "dr-1"}, 0, lengths, "x")
    assert q == Query("dr-1", "capital?", "Paris is the capital", (Span("b.md", 0, 33),))
    with pytest.raises(DataError, match=r"record 3: expected_retrieved_context\[0\].doc_uri 'c.md' is not in the corpus"):
        to_query({"inputs": {"question": "?"}, "expectations": {"expected_retrieved_context": [{"doc_uri": "c.md"}]}},
                 3, lengths, "record 3")
    with pytest.raises(DataError, match="no question"):
        to_query({"inputs": {"a": 1}}, 0, lengths, "x")
    # a span that does not lie inside its document (edited in the MLflow UI, or made for another corpus)
    for start, end in ((0, 34), (-1, 5), (5, 5), (20, 10)):
        with pytest.raises(DataError, match=r"record 4: expected_retrieved_context\[0\]: the span \[.*\) does not lie "
                                             r"inside 'b.md' \(33 characters\): fix its start/end"):
            to_query({"inputs": {"question": "?"}, "expectations": {"expected_retrieved_context": [
                {"doc_uri": "b.md", "start": start, "end": end}]}}, 4, lengths, "record 4")
    with pytest.raises(DataError, match=r"start and end must be character offsets \(integers\), got start='two'"):
        to_query({"inputs": {"question": "?"}, "expectations": {"expected_retrieved_context": [
            {"doc_uri": "b.md", "start": "two", "end": 5}]}}, 4, lengths, "record 4")
    # the same questions give the same set name; another answer, another name
    assert genai.set_name("d", records) == genai.set_name("d", genai.question_records(QUERIES))
    other = genai.question_records([Query("q1", QUERIES[0].query, "Lyon", QUERIES[0].relevant)])
    assert genai.set_name("d", other) != genai.set_name("d", records[:1])


def test_a_records_ground_truth_as_expectations():
    rec = {"gt_answer": "Paris", "gt_answer_claims": [["Paris", "is", "capital"], "France has Paris", None],
           "relevant_spans": [{"doc_id": "a.md", "start": 0, "end": 31}]}
    assert genai.expectations_of(rec) == {
        "expected_response": "Paris", "expected_facts": ["Paris is capital", "France has Paris"],
        "expected_retrieved_context": [{"doc_uri": "a.md", "start": 0, "end": 31}]}
    assert genai.expectations_of({"gt_answer": "  ", "gt_answer_claims": None, "relevant_spans": []}) == {}


@pytest.mark.slow  # a fresh sqlite MLflow store
def test_a_question_set_round_trips_through_an_mlflow_evaluation_dataset(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, str(tmp_path / "art"), "genai")
    ds = Dataset("mini", DOCS, QUERIES, has_relevance=True, has_answers=True)
    tracker.start("bm25")
    first = genai.log_question_set(tracker, ds)
    tracker.end()
    tracker.start("tfidf")  # another system over the same questions: the same dataset, not a new one
    again = genai.log_question_set(tracker, ds)
    tracker.end()
    assert first["created"] and not again["created"] and first["dataset_id"] == again["dataset_id"]
    assert first["name"] == genai.set_name("mini", genai.question_records(QUERIES))
    digests = set()
    for rid in (r.info.run_id for r in tracker.client.search_runs([tracker.experiment_id])):
        inputs = tracker.client.get_run(rid).inputs.dataset_inputs
        assert [(i.dataset.name, i.dataset.source_type) for i in inputs] == [(first["name"], "mlflow_evaluation_dataset")]
        digests.add(inputs[0].dataset.digest)
    # one set, one digest: the first run had logged the digest from before its records were merged
    assert len(digests) == 1

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in DOCS))
    back = MlflowQuestions(name=first["name"], corpus=str(corpus), tracking_uri=uri).load()
    assert sorted(back.queries, key=lambda q: q.query_id) == QUERIES
    assert back.name == f"mlflow:{first['name']}" and back.has_relevance and back.has_answers
    # a run over the set read from MLflow logs that same set as its input
    tracker.start("from-mlflow")
    assert genai.log_question_set(tracker, back) == {"name": first["name"], "dataset_id": first["dataset_id"], "created": False}
    tracker.end()
    with pytest.raises(DataError, match=rf"dataset.name=nope: no MLflow evaluation dataset of that name .*\(there: {first['name']}\)"):
        MlflowQuestions(name="nope", corpus=str(corpus), tracking_uri=uri).load()
    with pytest.raises(DataError, match="dataset.corpus=nowhere: not a folder, a .jsonl file or a dataset option"):
        MlflowQuestions(name=first["name"], corpus="nowhere", tracking_uri=uri).load()


def test_a_missing_mlflow_feature_is_one_warning_not_a_failed_run(caplog, monkeypatch):
    tracker = SimpleNamespace(enabled=True, run_id="r1", experiment_id="1")
    monkeypatch.setattr(genai, "_warned", set())
    monkeypatch.setitem(__import__("sys").modules, "mlflow.genai.datasets", None)  # as on an MLflow without them
    ds = Dataset("mini", DOCS, QUERIES)
    out = [genai.log_question_set(tracker, ds) for _ in range(3)]
    assert all("error" in o for o in out)
    assert sum("evaluation datasets" in r.message for r in caplog.records) == 1


def test_the_runs_table_view_shows_each_headline_metric_beside_its_interval():
    assert genai.view_columns(["ragchecker/overall/f1", "retrieval/recall@4"]) == [
        "attributes.`Dataset`", "metrics.`ragchecker/overall/f1`", "metrics.`ragchecker/overall/f1/ci_low`",
        "metrics.`ragchecker/overall/f1/ci_high`", "metrics.`retrieval/recall_at_4`", "metrics.`retrieval/recall_at_4/ci_low`",
        "metrics.`retrieval/recall_at_4/ci_high`"]
    assert genai.runs_view(None, ["ragchecker/overall/f1"]) is None


@pytest.mark.slow  # a fresh sqlite MLflow store
def test_a_sweeps_view_is_an_experiment_tag_its_parent_links(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, str(tmp_path / "art"), "view")
    rid = tracker.start("sweep-view")
    path = genai.runs_view(tracker, ["ragchecker/overall/f1"])
    tracker.end()
    key = path.split(f"{genai.VIEW_PARAM}=")[1]
    assert path == f"#/experiments/{tracker.experiment_id}/runs?{genai.VIEW_PARAM}={key}"
    state = json.loads(tracker.client.get_experiment(tracker.experiment_id).tags[genai.VIEW_TAG + key])
    assert state["selectedColumns"] == genai.view_columns(["ragchecker/overall/f1"])
    assert path in tracker.client.get_run(rid).data.tags["mlflow.note.content"]
