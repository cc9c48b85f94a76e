"""Human labels and prediction-powered intervals (issue 25): the PPI++ arithmetic against a hand
computation, the minimum label counts, the labels file, the seeded sample, and the whole path on a
real MLflow store: ``ragsweep-label sample`` marks the traces, labels come back (file and HUMAN
assessments), ``ragsweep-label estimate`` logs ``<metric>/ppi_*``, and ``ragsweep-report`` decides
the verdict from the PPI interval where the judge alone gets it wrong."""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ragsweep.analysis import ppi
from ragsweep.analysis import labels as L

METRIC = "ragchecker/overall/precision"  # the judge metric whose human counterpart is "correct"


# -- the arithmetic ---------------------------------------------------------------------------------
def _hand_ppi(y, f, fu, lam):
    """PPI++ for a mean, written out from Angelopoulos, Duchi & Zrnic (2023), eq. for the mean:
    theta = lam * mean(f_unlabelled) + mean(y - lam * f), var = lam^2 var(f_u)/N + var(y - lam f)/n."""
    n, N = len(y), len(fu)
    theta = lam * sum(fu) / N + sum(yi - lam * fi for yi, fi in zip(y, f)) / n
    r = [yi - lam * fi for yi, fi in zip(y, f)]
    var_r = sum((x - sum(r) / n) ** 2 for x in r) / n
    mu = sum(fu) / N
    var_u = sum((lam * (x - mu)) ** 2 for x in fu) / N
    se = math.sqrt(var_u / N + var_r / n)
    return theta, theta - 1.959963984540054 * se, theta + 1.959963984540054 * se


def _hand_lambda(y, f, fu):
    """PPI++'s optimal lambda for a mean: cov(y, f) / ((1 + n/N) var(f over all)), clipped to [0, 1]
    (ppi_py computes the covariances around the lam=1 PPI estimate; a shift does not change them)."""
    n, N = len(y), len(fu)
    my, mf = sum(y) / n, sum(f) / n
    cov = sum((a - my) * (b - mf) for a, b in zip(y, f)) / n
    allf = list(f) + list(fu)
    m = sum(allf) / len(allf)
    var = sum((x - m) ** 2 for x in allf) / (len(allf) - 1)
    return min(1.0, max(0.0, cov / ((1 + n / N) * var)))


Y = [1, 0, 1, 1, 0.5, 1, 0, 1, 0.5, 1]
F = [0.9, 0.2, 0.7, 0.8, 0.6, 0.6, 0.4, 0.9, 0.3, 0.7]
FU = [0.8, 0.1, 0.5, 0.9, 0.7, 0.3, 0.6, 0.2, 0.9, 0.4, 0.5, 0.7]


def test_ppi_mean_matches_the_hand_computed_ppi_plus_plus():
    lam = _hand_lambda(Y, F, FU)
    assert 0 < lam < 1
    e = ppi.mean(Y, F, FU, minimum=2)
    assert e.lam == pytest.approx(lam, rel=1e-9)
    theta, lo, hi = _hand_ppi(Y, F, FU, lam)
    assert (e.mean, e.low, e.high) == pytest.approx((theta, lo, hi), rel=1e-9)
    # lam = 1 is the original PPI: judge mean over the unlabelled plus the mean rectifier
    e1 = ppi.mean(Y, F, FU, lam=1.0, minimum=2)
    assert e1.mean == pytest.approx(np.mean(FU) + np.mean(np.subtract(Y, F)), rel=1e-12)
    assert (e1.low, e1.high) == pytest.approx(_hand_ppi(Y, F, FU, 1.0)[1:], rel=1e-9)
    assert e.n_labels == 10 and e.n_unlabelled == 12 and e.method == ppi.METHOD
    assert ppi.p_value(e) < 0.05  # the mean is far from 0


def test_no_ppi_interval_below_the_minimum_label_count():
    rng = np.random.default_rng(0)
    binary = rng.integers(0, 2, 99).astype(float)
    assert ppi.min_labels(binary) == ppi.MIN_LABELS_BINARY == 100
    with pytest.raises(ppi.PPIError, match="needs at least 100 \\(yes/no labels\\)"):
        ppi.mean(binary, binary, rng.random(50))
    graded = rng.random(ppi.MIN_LABELS)
    assert ppi.min_labels(graded) == 50
    assert ppi.mean(graded, graded, rng.random(50)).n_labels == 50
    with pytest.raises(ppi.PPIError, match="needs at least 50"):
        ppi.mean(graded[:49], graded[:49], rng.random(50))
    judge = {f"q{i}": float(v) for i, v in enumerate(rng.random(200))}
    assert ppi.system_estimate(judge, {f"q{i}": 1.0 for i in range(60)}) is None  # 60 yes/no labels: too few
    assert ppi.system_estimate(judge, {f"q{i}": 0.5 for i in range(60)}) is not None
    # a paired difference of yes/no labels (-1, 0, 1) needs as many as the yes/no labels themselves
    yes = {f"q{i}": float(i % 2) for i in range(60)}
    no = {f"q{i}": float(i % 3 == 0) for i in range(60)}
    assert ppi.paired(judge, yes, judge, no) is None
    more_yes = {f"q{i}": float(i % 2) for i in range(100)}
    more_no = {f"q{i}": float(i % 3 == 0) for i in range(100)}
    res, est = ppi.paired(judge, more_yes, judge, more_no)
    assert est.n_labels == 100 and res.n == 100
    assert res.diff == pytest.approx(np.mean(list(more_no.values())) - np.mean(list(more_yes.values())), abs=1e-12)


def test_labels_file_csv_jsonl_and_errors(tmp_path):
    p = tmp_path / "labels.csv"
    p.write_text("system,question_id,label,value,labeller\nbm25,q1,correct,yes,ann\nbm25,q2,human/supported,0,ann\n"
                 "tfidf,q1,faithful,0.75,\ntfidf,q2,correct,,\n", encoding="utf-8")
    got = L.read_file(p)
    assert [(x.system, x.question_id, x.name, x.value) for x in got] == [
        ("bm25", "q1", "correct", 1.0), ("bm25", "q2", "supported", 0.0), ("tfidf", "q1", "faithful", 0.75)]
    j = tmp_path / "labels.jsonl"
    j.write_text(json.dumps({"run": "r1", "question_id": 3, "label": "complete", "value": 0.5}) + "\n", encoding="utf-8")
    assert L.read_file(j)[0] == L.Label("r1", "3", "complete", 0.5, "", "file")
    bad = tmp_path / "bad.csv"
    for body, msg in (("system,question_id,label,value\nbm25,q1,correctness,1\n", "field 'label' is 'correctness'; known labels"),
                      ("system,question_id,label,value\nbm25,q1,correct,1.5\n", "outside \\[0, 1\\]"),
                      ("system,question_id,label,value\nbm25,q1,correct,maybe\n", "field 'value': 'maybe' is not a label value"),
                      ("question_id,label,value\nq1,correct,1\n", "field 'system' \\(or 'run'\\) is missing")):
        bad.write_text(body, encoding="utf-8")
        with pytest.raises(L.LabelError, match=msg):
            L.read_file(bad)


def test_sample_is_seeded_uniform_and_order_free():
    ids = [f"q{i}" for i in range(100)]
    s = L.draw_sample(ids, 20, seed=3)
    assert len(s) == len(set(s)) == 20 and s == L.draw_sample(list(reversed(ids)), 20, seed=3)
    assert s != L.draw_sample(ids, 20, seed=4)
    counts = np.zeros(100)
    for seed in range(400):
        for q in L.draw_sample(ids, 20, seed=seed):
            counts[int(q[1:])] += 1
    assert counts.min() > 40 and counts.max() < 125  # each id about 80 times: uniform
    assert L.n_for_width(0.5, 0.2) == 97  # (2 * 1.96 * 0.5 / 0.2)^2


def test_human_labels_declared_in_the_metric_registry():
    from ragsweep.judge.metrics.registry import find, human_labels

    kinds = {h.name: h.metric for h in human_labels()}
    assert kinds == {"correct": "ragchecker/overall/precision", "complete": "ragchecker/overall/recall",
                     "faithful": "ragchecker/generator/faithfulness", "supported": "trace/adherence_rate",
                     "retrieved": "ragchecker/retriever/claim_recall"}  # the last for retrieval-only runs (issue 34)
    assert all(find(m) is not None for m in kinds.values())


# -- the whole path on a real store -----------------------------------------------------------------
N_Q = 80
N_LAB = 50


def _truth(seed: int):
    """Human correctness per question for systems A (bm25) and B (tfidf): B is better by 0.12 on
    average; the judge is biased for A (+0.15 on A, -0.05 on B) so it sees A ahead."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, N_Q)
    ha = np.clip(base + rng.normal(0, 0.05, N_Q), 0, 1).round(2)
    hb = np.clip(base + 0.12 + rng.normal(0, 0.05, N_Q), 0, 1).round(2)
    ja = np.clip(ha + 0.15 + rng.normal(0, 0.03, N_Q), 0, 1)
    jb = np.clip(hb - 0.05 + rng.normal(0, 0.03, N_Q), 0, 1)
    return ha, hb, ja, jb


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A 2-system sweep (retriever=bm25,tfidf) on N_Q questions with records.json, traces and a
    judge card, written the way ragsweep writes them."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from ragsweep.tracking.traces import send_traces

    tmp = tmp_path_factory.mktemp("ppi")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    cl = MlflowClient(tracking_uri=uri)
    exp = cl.create_experiment("ppi_demo", artifact_location=(tmp / "artifacts").as_uri())
    t0 = int(time.time() * 1000) - 100_000
    spec = {"layout": "ragchecker", "params": ["retriever"],
            "directions": [{"metric": METRIC, "param": "retriever", "expect": {"higher_for": "tfidf"}}]}
    parent = cl.create_run(exp, start_time=t0, run_name="ppi_demo-sweep",
                           tags={"ragsweep.role": "parent", "ragsweep.experiment": "ppi_demo"}).info.run_id
    cl.log_dict(parent, spec, "sweep.json")
    cl.set_terminated(parent, "FINISHED")
    ha, hb, ja, jb = _truth(0)
    runs = {}
    for i, (ret, judge) in enumerate((("bm25", ja), ("tfidf", jb))):
        rid = cl.create_run(exp, start_time=t0 + 100 * (i + 1), run_name=ret,
                            tags={"mlflow.parentRunId": parent, "ragsweep.role": "child"}).info.run_id
        cl.log_batch(rid, metrics=[Metric(METRIC, float(judge.mean() * 100), t0, 0)],
                     params=[Param("retriever", ret), Param("evaluator", "offline")])
        recs = [{"query_id": f"q{q}", "query": f"question {q}?", "gt_answer": "a", "response": f"{ret} answer {q}",
                 "metrics": {METRIC: float(judge[q] * 100)}, "scores": {METRIC: float(judge[q] * 100)}} for q in range(N_Q)]
        cl.log_dict(rid, {"results": recs}, "records.json")
        cl.log_dict(rid, {"judge_id": "offline", "statement": "offline judge", "agreement": None}, "judge_card.json")
        tracker = SimpleNamespace(enabled=True, tracking_uri=uri, experiment_id=exp)
        out = send_traces(tracker, recs, judge="offline", run_id=rid, spool=False)
        assert out["traces"] == N_Q, out
        cl.set_terminated(rid, "FINISHED")
        runs[ret] = rid
    return SimpleNamespace(uri=uri, client=cl, exp=exp, parent=parent, runs=runs, truth=(ha, hb, ja, jb), tmp=tmp)


def _label_cli(*args: str) -> int:
    from ragsweep.analysis.labels.cli import main

    return main(list(args))


@pytest.mark.slow
def test_sample_marks_the_same_questions_on_every_system(sweep, tmp_path, capsys):
    from ragsweep.tracking import labels as TL

    tpl = tmp_path / "template.csv"
    assert _label_cli("sample", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--n", str(N_LAB),
                      "--out", str(tpl)) == 0
    out = capsys.readouterr().out
    assert f"drew {N_LAB} of the {N_Q} questions" in out and "Filters: Tag ragsweep.label = sample" in out
    sample = TL.read_sample(sweep.client, sweep.parent)
    assert sample["n"] == N_LAB and sample["question_ids"] == L.draw_sample([f"q{i}" for i in range(N_Q)], N_LAB, 0)
    for rid in sweep.runs.values():
        marked = {TL.query_id(t) for t in TL.run_traces(sweep.client, sweep.exp, rid)
                  if (t.info.tags or {}).get(L.SAMPLE_TAG) == L.SAMPLE_TAG_VALUE}
        assert marked == set(sample["question_ids"])
    rows = list(csv.DictReader(tpl.open()))
    answer_labels = {"correct", "complete", "faithful", "supported"}  # a full run: every answer label, not 'retrieved'
    assert {r["label"] for r in rows} == answer_labels
    assert len(rows) == 2 * N_LAB * len(answer_labels) and {r["system"] for r in rows} == {"bm25", "tfidf"}
    # MLflow's review queue (issue 38): the sampled traces of both systems, one label schema per label;
    # an answer given on the Review page is HUMAN feedback named after the label, read back like any other
    import importlib.util

    import mlflow

    if importlib.util.find_spec("mlflow.genai.review_queues") is None:  # MLflow < 3.14: the Traces-view route only
        assert "Review page" not in out
        return
    import mlflow.genai.label_schemas as LS
    import mlflow.genai.review_queues as RQ

    queues = [q for q in RQ.list_review_queues(experiment_id=sweep.exp) if q.name.startswith("ragsweep-sample-")]
    assert len(queues) == 1 and f"Review page: queue {queues[0].name} ({2 * N_LAB} traces" in out
    items = RQ.list_review_queue_items(queues[0].queue_id)
    assert len(items) == 2 * N_LAB
    schemas = {LS.get_label_schema(n, experiment_id=sweep.exp).schema_id: n for n in answer_labels}
    assert set(queues[0].schema_ids) == set(schemas)
    assert mlflow.get_tracking_uri() == sweep.uri


def _write_labels(sweep, path: Path, sample: list[str]) -> None:
    ha, hb, _, _ = sweep.truth
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["system", "question_id", "label", "value", "labeller"])
        for q in sample:
            i = int(q[1:])
            w.writerow(["bm25", q, "correct", ha[i], "ann"])
            w.writerow(["tfidf", q, "correct", hb[i], "ann"])


@pytest.mark.slow
def test_report_verdict_comes_from_ppi_where_labels_exist(sweep, tmp_path, capsys):
    """The judge alone sees bm25 ahead (CONTRADICTED); with 50 labels the PPI interval shows what
    people see: tfidf ahead (REPRODUCED). The labels are logged as HUMAN assessments first, so the
    report reads them from MLflow, as it would after labelling in the UI."""
    from ragsweep.analysis.report.cli import main as report
    from ragsweep.tracking import labels as TL

    if TL.read_sample(sweep.client, sweep.parent) is None:
        assert _label_cli("sample", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--n", str(N_LAB),
                          "--out", str(tmp_path / "t.csv")) == 0
    before = tmp_path / "before"
    assert report(["--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--out", str(before), "--no-log"]) == 0
    v0 = json.loads((before / "directions.json").read_text())[0]
    assert v0["verdict"] == "CONTRADICTED" and v0["n"] == N_Q
    assert not (before / "ppi.md").exists()

    sample = TL.read_sample(sweep.client, sweep.parent)["question_ids"]
    lab = tmp_path / "labels.csv"
    _write_labels(sweep, lab, sample)
    assert _label_cli("import", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, str(lab)) == 0
    assert f"{2 * N_LAB} of {2 * N_LAB} label(s) logged as HUMAN feedback" in capsys.readouterr().out

    after = tmp_path / "after"
    assert report(["--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--out", str(after)]) == 0
    v = json.loads((after / "directions.json").read_text())[0]
    assert v["verdict"] == "REPRODUCED" and v["n"] == N_LAB, v
    ha, hb, _, _ = sweep.truth
    step = v["steps"][0]
    assert step["ci_low"] > 0 and step["ci_low"] <= 100 * (hb.mean() - ha.mean()) <= step["ci_high"]
    md = (after / "ppi.md").read_text()
    assert "PPI++ mean [95% CI]" in md and "judge-only mean" in md and "in-domain" in md
    # MLflow: the PPI metrics on each system's run, beside the judge-only metric
    for ret, h in (("bm25", ha), ("tfidf", hb)):
        m = sweep.client.get_run(sweep.runs[ret]).data.metrics
        assert m[f"{METRIC}/ppi_n_labels"] == N_LAB
        assert m[f"{METRIC}/ppi_ci_low"] <= m[f"{METRIC}/ppi_mean"] <= m[f"{METRIC}/ppi_ci_high"]
        assert m[f"{METRIC}/ppi_ci_low"] <= 100 * h.mean() <= m[f"{METRIC}/ppi_ci_high"]
        assert not (m[f"{METRIC}/ppi_ci_low"] <= m[METRIC] <= m[f"{METRIC}/ppi_ci_high"]) or ret == "tfidf"
    # the judge card gained the in-domain agreement, beside the shipped figures
    from ragsweep.tracking import read_json_artifact

    found, card = read_json_artifact(sweep.client, sweep.runs["bm25"], "judge_card.json")
    assert found and card["in_domain"] and card["in_domain"][0].startswith(f"in-domain vs your labels (correct, n={2 * N_LAB})")
    assert "ragsweep.judge.in_domain" in sweep.client.get_run(sweep.runs["bm25"]).data.tags


@pytest.mark.slow
def test_estimate_with_a_labels_file_and_errors(sweep, tmp_path, capsys):
    from ragsweep.tracking import labels as TL

    if TL.read_sample(sweep.client, sweep.parent) is None:
        assert _label_cli("sample", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--n", str(N_LAB),
                          "--out", str(tmp_path / "t.csv")) == 0
    sample = TL.read_sample(sweep.client, sweep.parent)["question_ids"]
    lab = tmp_path / "labels.csv"
    _write_labels(sweep, lab, sample)
    assert _label_cli("estimate", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--labels", str(lab),
                      "--out", str(tmp_path / "out")) == 0
    data = json.loads((tmp_path / "out" / "ppi.json").read_text())
    assert {r["system"] for r in data["systems"]} == {"bm25", "tfidf"}
    assert all(r["ppi"]["n_labels"] == N_LAB for r in data["systems"])
    assert data["pairs"][0]["ppi"]["low"] > 0  # tfidf - bm25 by PPI: positive
    assert data["pairs"][0]["judge"]["high"] < 0  # ... while the judge alone says negative
    bad = tmp_path / "bad.csv"
    bad.write_text("system,question_id,label,value\nbm42,q1,correct,1\n", encoding="utf-8")
    assert _label_cli("estimate", "--experiment", "ppi_demo", "--tracking-uri", sweep.uri, "--labels", str(bad)) == 2
    assert "field 'system' names no run of this sweep: bm42" in capsys.readouterr().err


def test_judge_card_shows_in_domain_agreement_beside_the_shipped_figures():
    from ragsweep.judge import card as judge_card

    c = judge_card.card({"name": "offline", "extractor": {"_target_": "OfflineExtractor"}, "checker": {"_target_": "OfflineChecker"}})
    md = judge_card.markdown(c)
    assert "In-domain" not in md
    c["in_domain"] = ["in-domain vs your labels (correct, n=100): Pearson r 0.62 [0.48, 0.73], bias +0.050 [+0.020, +0.080]"]
    md2 = judge_card.markdown(c)
    assert md2.startswith(md.rstrip("\n")) or "## Agreement with human labels" in md2
    head, tail = md2.split("In-domain, against your own human labels", 1)
    assert "## Agreement with human labels" in head and "Pearson r 0.62 [0.48, 0.73]" in tail and "n=100" in tail
