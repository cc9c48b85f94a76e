"""Issue 37, item 5: people check a generated set. ``ragsweep-label sample`` on a sweep over a synthetic
set asks, once per sampled question, whether it is valid and its reference answer correct; the
estimate shows the valid share with its interval and each system's metric over the valid questions
(the human label's PPI ratio over validity)."""

from __future__ import annotations

import csv
import json
import math
import time

import numpy as np
import pytest

from ragsweep.analysis import ppi
from ragsweep.analysis.labels import Label, by_question, by_run, read_file, resolve_systems, validity
from ragsweep.analysis.labels.estimate import estimate, markdown, question_shares

CR = "ragchecker/retriever/claim_recall"


def test_question_labels_are_read_kept_apart_from_the_systems_and_combined():
    labels = [Label("questions", "q1", "valid", 1.0), Label("questions", "q1", "reference_correct", 0.0),
              Label("questions", "q2", "valid", 1.0), Label("run-a", "q2", "valid", 0.0),  # two people, two traces
              Label("run-a", "q1", "retrieved", 1.0)]
    assert by_question(labels) == {"valid": {"q1": 1.0, "q2": 0.5}, "reference_correct": {"q1": 0.0}}
    assert validity(labels) == {"q1": 0.0, "q2": 0.5}
    assert by_run(labels) == {"run-a": {"retrieved": {"q1": 1.0}}}  # question labels are no system's
    kept, unknown = resolve_systems(labels, {"rid-a": "run-a"})
    assert unknown == [] and [lab.system for lab in kept if lab.name == "valid"] == ["questions", "questions", "run-a"]


def test_a_labels_file_takes_question_labels(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("system,question_id,label,value\nquestions,q1,valid,yes\nquestions,q2,reference_correct,no\n"
                 "questions,q3,valid,\n", encoding="utf-8")
    assert [(lab.question_id, lab.name, lab.value) for lab in read_file(p)] == [("q1", "valid", 1.0),
                                                                                ("q2", "reference_correct", 0.0)]
    p.write_text("system,question_id,label,value\nquestions,q1,validity,yes\n", encoding="utf-8")
    with pytest.raises(ValueError, match="known labels: .*valid, reference_correct"):
        read_file(p)


def test_the_valid_share_has_a_betting_interval_that_covers_it():
    labels = [Label("questions", f"q{i}", "valid", float(i % 4 != 0)) for i in range(40)]  # 30 of 40
    (share,) = question_shares(labels)
    assert share.label == "valid" and share.n == 40 and share.share == pytest.approx(0.75)
    assert 0.5 < share.low < 0.75 < share.high < 0.95


def _population(rng, n, p_valid, m_valid, m_invalid, judge_noise):
    valid = rng.random(n) < p_valid
    m = np.where(valid, rng.random(n) < m_valid, rng.random(n) < m_invalid).astype(float)
    judge = np.clip(m + rng.normal(0, judge_noise, n), 0, 1)  # an informative, noisy judge
    return valid.astype(float), m, judge


def test_valid_mean_estimates_the_metric_over_valid_questions_not_over_all():
    rng = np.random.default_rng(0)
    v, m, j = _population(rng, 2000, 0.7, 0.8, 0.2, 0.3)
    lab = rng.choice(2000, 300, replace=False)
    judge = {f"q{i}": float(j[i]) for i in range(2000)}
    human = {f"q{i}": float(m[i]) for i in lab}
    valid = {f"q{i}": float(v[i]) for i in lab}
    est = ppi.valid_mean(judge, human, valid)
    truth = m[v == 1].mean()
    assert est is not None and est.low <= truth <= est.high and est.method == ppi.VALID_METHOD
    assert not (est.low <= m.mean() <= est.high)  # the mean over every question (invalid ones too) is another number
    assert est.n_labels == 300 and est.n_unlabelled == 1700
    few = {q: valid[q] for q in list(valid)[:50]}
    assert ppi.valid_mean(judge, human, few) is None  # yes/no labels: no interval below 100


def test_valid_mean_covers_at_about_the_nominal_rate():
    """A small simulation (the full one is experiments/simulations/sim_ppi_valid.py): 200 draws of 150 labels."""
    rng = np.random.default_rng(1)
    v, m, j = _population(rng, 1500, 0.75, 0.7, 0.3, 0.35)
    truth = m[v == 1].mean()
    judge = {f"q{i}": float(j[i]) for i in range(1500)}
    hits = 0
    for _ in range(200):
        lab = rng.choice(1500, 150, replace=False)
        est = ppi.valid_mean(judge, {f"q{i}": float(m[i]) for i in lab}, {f"q{i}": float(v[i]) for i in lab})
        hits += est.low <= truth <= est.high
    assert 0.88 <= hits / 200 <= 1.0


def test_estimate_reports_the_valid_share_and_the_systems_over_valid_questions():
    rng = np.random.default_rng(2)
    v, m, j = _population(rng, 400, 0.8, 0.6, 0.1, 0.2)
    recs = [{"query_id": f"q{i}", "scores": {CR: 100 * float(j[i])}} for i in range(400)]
    labels = [Label("rid", f"q{i}", "retrieved", float(m[i])) for i in range(150)]
    labels += [Label("questions", f"q{i}", "valid", float(v[i])) for i in range(150)]
    res = estimate([("rid", "bm25")], {"rid": recs}, labels, [f"q{i}" for i in range(400)])
    (row,) = res.systems
    assert row.valid is not None and row.estimate is not None
    assert res.questions[0].label == "valid" and res.questions[0].n == 150
    metrics = res.metrics_by_run()["rid"]
    assert math.isclose(metrics[f"{CR}/ppi_valid_mean"], row.valid.mean * 100)
    md = markdown(res)
    assert "## The generated questions (human labels)" in md and "over the valid questions only" in md
    assert "| valid | 150 |" in md


@pytest.fixture(scope="module")
def synthetic_sweep(tmp_path_factory):
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    tmp = tmp_path_factory.mktemp("synth")
    qfile = tmp / "set.jsonl"
    qfile.write_text("".join(json.dumps({"query_id": f"q{i}", "query": f"Where is thing {i}?", "gt_answer": f"In box {i}.",
                                         "evidence": [{"doc_id": "d.md", "quote": f"Thing {i} is in box {i}.", "start": 0,
                                                       "end": 20}], "synthetic": True}) + "\n" for i in range(6)))
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    cl = MlflowClient(tracking_uri=uri)
    exp = cl.create_experiment("synth", artifact_location=(tmp / "artifacts").as_uri())
    t0 = int(time.time() * 1000) - 100_000
    parent = cl.create_run(exp, start_time=t0, tags={"ragsweep.role": "parent"}).info.run_id
    cl.set_terminated(parent, "FINISHED")
    for k in (2, 4):
        rid = cl.create_run(exp, start_time=t0 + k, run_name=f"bm25-k{k}-retrieval_only",
                            tags={"mlflow.parentRunId": parent, "ragsweep.role": "child", "ragsweep.mode": "retrieval_only",
                                  "ragsweep.questions": "synthetic", "ragsweep.questions.file": str(qfile)}).info.run_id
        cl.log_batch(rid, params=[Param("retriever.top_k", str(k))])
        cl.log_dict(rid, {"results": [{"query_id": f"q{i}", "query": f"Where is thing {i}?", "gt_answer": f"In box {i}.",
                                       "gt_answer_claims": [f"thing {i} is in box {i}"],
                                       "retrieved_context": [{"doc_id": "d.md", "text": "..."}], "scores": {CR: 50.0}}
                                      for i in range(6)]}, "records.json")
        cl.set_terminated(rid, "FINISHED")
    return uri


def test_sample_on_a_synthetic_sweep_asks_for_each_question_once(synthetic_sweep, tmp_path, capsys):
    from ragsweep.analysis.labels.cli import main

    tpl = tmp_path / "t.csv"
    assert main(["sample", "--experiment", "synth", "--tracking-uri", synthetic_sweep, "--n", "4", "--out", str(tpl)]) == 0
    out = capsys.readouterr().out
    rows = list(csv.DictReader(tpl.open()))
    qrows = [r for r in rows if r["system"] == "questions"]
    assert len(qrows) == 4 * 2 and {r["label"] for r in qrows} == {"valid", "reference_correct"}
    assert all(r["evidence"].startswith("d.md: Thing ") for r in qrows)
    assert {r["label"] for r in rows if r["system"] != "questions"} == {"retrieved"}
    assert "generated questions (synthetic set)" in out and "valid (yes/no)" in out
    # filled in: the estimate shows the valid share
    filled = tmp_path / "f.csv"
    with filled.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in qrows:
            w.writerow({**r, "value": "no" if r["question_id"] == qrows[0]["question_id"] and r["label"] == "valid" else "yes"})
    assert main(["estimate", "--experiment", "synth", "--tracking-uri", synthetic_sweep, "--labels", str(filled),
                 "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "ppi.md").read_text()
    assert "| valid | 4 | 0.750 [" in md and "| valid_and_correct | 4 | 0.750 [" in md
