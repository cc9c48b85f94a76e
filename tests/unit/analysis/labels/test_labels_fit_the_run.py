"""Issue 34, item 4: ``ragsweep-label sample`` asks for the labels a run's metrics use, on its
systems only. The issue's case: a retrieval-only top-k sweep (BM25 at k = 5/10/20 plus the oracle
bound) got 60 rows per system and label for all six runs, asking for complete / correct / faithful /
supported with an empty response column."""

from __future__ import annotations

import csv
import json
import time

import pytest

CR = "ragchecker/retriever/claim_recall"
N_Q = 12


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    tmp = tmp_path_factory.mktemp("fit")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    cl = MlflowClient(tracking_uri=uri)
    exp = cl.create_experiment("topk_retrieval", artifact_location=(tmp / "artifacts").as_uri())
    t0 = int(time.time() * 1000) - 100_000
    parent = cl.create_run(exp, start_time=t0, run_name="topk-sweep",
                           tags={"ragsweep.role": "parent", "ragsweep.experiment": "topk_retrieval"}).info.run_id
    cl.log_dict(parent, {"layout": "ragchecker", "params": ["top_k"],
                         "directions": [{"metric": CR, "param": "top_k", "expect": "increasing"}]}, "sweep.json")
    cl.set_terminated(parent, "FINISHED")
    i = 0
    for ret in ("bm25", "oracle"):
        for k in (5, 10, 20):
            i += 1
            rid = cl.create_run(exp, start_time=t0 + 100 * i, run_name=f"{ret}-k{k}-c300o0.2-retrieval_only",
                                tags={"mlflow.parentRunId": parent, "ragsweep.role": "child",
                                      "ragsweep.mode": "retrieval_only"}).info.run_id
            cl.log_batch(rid, metrics=[Metric(CR, 50.0 + k, t0, 0)],
                         params=[Param("retriever", ret), Param("retriever.top_k", str(k)), Param("top_k", str(k))])
            recs = [{"query_id": f"q{q}", "query": f"who wrote book {q}?", "gt_answer": f"A wrote book {q} in 1990.",
                     "gt_answer_claims": [f"A wrote book {q}", f"book {q} appeared in 1990"],
                     "retrieved_context": [{"doc_id": f"d{q}", "text": f"chunk about book {q}"}] * (k // 5),
                     "scores": {CR: float(50 * (q % 3))}} for q in range(N_Q)]
            cl.log_dict(rid, {"results": recs}, "records.json")
            cl.set_terminated(rid, "FINISHED")
    return uri


def test_a_retrieval_only_sweep_asks_only_for_retrieved_points_on_its_systems(store, tmp_path, capsys):
    from ragsweep.analysis.labels.cli import main

    tpl = tmp_path / "t.csv"
    assert main(["sample", "--experiment", "topk_retrieval", "--tracking-uri", store, "--n", "5", "--out", str(tpl)]) == 0
    out = capsys.readouterr().out
    rows = list(csv.DictReader(tpl.open()))
    assert {r["system"] for r in rows} == {f"bm25-k{k}-c300o0.2-retrieval_only" for k in (5, 10, 20)}  # no oracle
    assert {r["label"] for r in rows} == {"retrieved"}
    assert "response" not in rows[0] and {"claim", "retrieved_context"} <= set(rows[0])
    assert len(rows) == 3 * 5 * 2  # systems x questions x ground-truth points
    assert {r["claim"] for r in rows if r["question_id"] == rows[0]["question_id"]} == {
        f"A wrote book {rows[0]['question_id'][1:]}", f"book {rows[0]['question_id'][1:]} appeared in 1990"}
    assert "not sampled (bounds, not systems: nothing to label): oracle-k5" in out and "retrieved (yes/no per" in out
    assert "correct" not in out.split("named one of:")[1]


def test_width_says_how_many_labels_each_system_needs(store, tmp_path, capsys):
    from ragsweep.analysis.labels import n_for_width
    from ragsweep.analysis.labels.cli import main

    assert main(["sample", "--experiment", "topk_retrieval", "--tracking-uri", store, "--width", "0.3",
                 "--out", str(tmp_path / "t.csv")]) == 0
    out = capsys.readouterr().out
    need = n_for_width(0.5, 0.3)  # claim recall 0 / 50 / 100: spread about 0.43 -> capped at 0.5 is not reached
    lines = [ln for ln in out.splitlines() if "labels for a 95% interval of width 0.3" in ln]
    assert len(lines) == 3 and all("oracle" not in ln for ln in lines)
    got = {int(ln.split(": ")[1].split()[0]) for ln in lines}
    assert len(got) == 1 and 0 < got.pop() <= need
    assert "drew" in out and "for a 95% interval of width about 0.3" in out


def test_labels_of_points_become_the_questions_claim_recall(tmp_path):
    from ragsweep.analysis import labels as L

    f = tmp_path / "l.csv"
    f.write_text("system,question_id,label,value,labeller\nbm25,q1,retrieved,yes,a\nbm25,q1,retrieved,no,a\n"
                 "bm25,q2,retrieved,yes,a\n", encoding="utf-8")
    per = L.by_run(L.read_file(f))
    assert per == {"bm25": {"retrieved": {"q1": 0.5, "q2": 1.0}}}
    recs = {"bm25": [{"query_id": "q1"}, {"query_id": "q2"}]}
    assert L.attach(recs, L.read_file(f)) == 2
    assert [r["human"][CR] for r in recs["bm25"]] == [50.0, 100.0]  # on claim recall's 0-100 scale
    json.dumps(recs)
