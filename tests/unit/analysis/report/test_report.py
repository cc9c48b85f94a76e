"""ragsweep-report against a small MLflow sqlite store built directly with MlflowClient."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from ragsweep.analysis.report import check_direction, main

BASE_PARAMS = {
    "dataset": "clapnq", "limit": "None", "retriever": "bm25", "top_k": "20", "chunk_size": "300",
    "chunk_overlap": "0.2", "prompt": "ragchecker_default", "generator": "smollm2", "evaluator": "offline",
}
TOPK_SWEEP = {
    "layout": "ragchecker",
    "params": ["top_k"],
    "directions": [
        {"metric": "ragchecker/retriever/claim_recall", "param": "top_k", "expect": "increasing", "paper": "Fig. 6"},
        {"metric": "ragchecker/retriever/context_precision", "param": "top_k", "expect": "decreasing", "paper": "Fig. 6"},
        {"metric": "ragchecker/generator/faithfulness", "param": "top_k", "expect": "increasing", "paper": "Fig. 6"},
        {"metric": "ragchecker/overall/f1", "param": "top_k", "expect": "increasing", "paper": "Sec. 4.4"},
    ],
}
N_Q = 30


def per_question(mean: float, shift_sd: float = 0.0, seed: int = 0, base_seed: int = 7, spread: float = 15.0) -> list[float]:
    """N_Q per-question values with exactly ``mean``: a question effect shared by every system
    (``base_seed``) plus this system's own noise (``shift_sd``), as paired data look."""
    import numpy as np

    base = np.random.default_rng(base_seed).normal(0, spread, N_Q)
    own = np.random.default_rng(seed).normal(0, shift_sd, N_Q) if shift_sd else np.zeros(N_Q)
    v = base + own
    return list(v - v.mean() + mean)


# (name, scale, higher is better?) as RAGChecker Table 3 and RAGBench state them; registered here only
# where the metric registry does not describe them yet (the report reads scale and direction there)
_DESCRIBED = [
    *[(f"ragchecker/overall/{m}", 100, True) for m in ("precision", "recall", "f1")],
    ("ragchecker/overall/n_response_claims", 1, None),
    *[(f"ragchecker/retriever/{m}", 100, True) for m in ("claim_recall", "context_precision")],
    *[(f"ragchecker/generator/{m}", 100, True) for m in ("context_utilization", "faithfulness")],
    *[(f"ragchecker/generator/{m}", 100, False) for m in ("noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant",
                                                          "hallucination", "self_knowledge")],
    *[(f"trace/{m}", 1, True) for m in ("relevance", "utilization", "completeness", "adherence_rate")],
]


@pytest.fixture(scope="module", autouse=True)
def described_metrics():
    from ragsweep.judge.metrics.registry import Metric, find, register

    for name, scale, better in _DESCRIBED:
        if find(name) is None:
            register(Metric(name, scale, better, needs_gt=True, per_question=None, family=name.split("/")[0]))


def _metrics(cr: float, cp: float) -> dict[str, float]:
    return {
        "ragchecker/overall/precision": 50.0, "ragchecker/overall/recall": 40.0, "ragchecker/overall/f1": 44.4,
        "ragchecker/overall/n_response_claims": 3.0,
        "ragchecker/retriever/claim_recall": cr, "ragchecker/retriever/context_precision": cp,
        "ragchecker/generator/context_utilization": 60.0, "ragchecker/generator/noise_sensitivity_in_relevant": 20.0,
        "ragchecker/generator/noise_sensitivity_in_irrelevant": 5.0, "ragchecker/generator/hallucination": 10.0,
        "ragchecker/generator/self_knowledge": 2.0,
        # faithfulness deliberately missing: NOT TESTABLE
    }


class Store:
    def __init__(self, tmp: Path):
        from mlflow.tracking import MlflowClient

        self.uri = f"sqlite:///{tmp / 'mlflow.db'}"
        self.client = MlflowClient(tracking_uri=self.uri)
        self.artifacts = (tmp / "artifacts").as_uri()
        self.t0 = int(time.time() * 1000) - 100_000

    def experiment(self, name: str) -> str:
        return self.client.create_experiment(name, artifact_location=f"{self.artifacts}/{name}")

    def parent(self, exp_id: str, name: str, sweep: dict | None, offset: int = 0) -> str:
        run = self.client.create_run(exp_id, start_time=self.t0 + offset, run_name=f"{name}-sweep",
                                     tags={"ragsweep.role": "parent", "ragsweep.experiment": name})
        if sweep is not None:
            self.client.log_dict(run.info.run_id, sweep, "sweep.json")
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    def child(self, exp_id: str, parent: str, params: dict, metrics: dict, status: str = "FINISHED", offset: int = 0,
              scores: dict | None = None) -> str:
        from mlflow.entities import Metric, Param

        run = self.client.create_run(exp_id, start_time=self.t0 + offset,
                                     tags={"mlflow.parentRunId": parent, "ragsweep.role": "child"})
        rid = run.info.run_id
        self.client.log_batch(
            rid,
            metrics=[Metric(k, float(v), self.t0, 0) for k, v in metrics.items()],
            params=[Param(k, str(v)) for k, v in {**params, "run_name": f"r{offset}"}.items()],
        )
        if scores:  # the per-question values, as the pipeline writes them into records.json
            records = [{"query_id": f"q{i}", "scores": {m: vals[i] for m, vals in scores.items()}} for i in range(N_Q)]
            self.client.log_dict(rid, {"results": records}, "records.json")
        self.client.set_terminated(rid, status)
        return rid


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mlflow")
    s = Store(tmp)
    # ragchecker_topk: k=5,10,20; claim recall rises (REPRODUCED), context precision rises too
    # (paper: falls -> NOT REPRODUCED), faithfulness not logged (NOT TESTABLE)
    exp = s.experiment("ragchecker_topk")
    s.old_parent = s.parent(exp, "old", TOPK_SWEEP, offset=0)  # an older parent: must not be picked
    pid = s.parent(exp, "ragchecker_topk", TOPK_SWEEP, offset=1000)
    s.child(exp, pid, {**BASE_PARAMS, "top_k": "10"}, _metrics(99.0, 99.0), offset=1100)  # superseded duplicate
    for i, (k, cr, cp, f1) in enumerate([("5", 41.2, 30.0, 44.0), ("10", 47.9, 35.0, 44.5), ("20", 52.3, 40.0, 45.0)]):
        scores = {"ragchecker/retriever/claim_recall": per_question(cr, 2.0, seed=i),
                  "ragchecker/retriever/context_precision": per_question(cp, 2.0, seed=10 + i),
                  "ragchecker/overall/f1": per_question(f1, 20.0, seed=20 + i)}
        ci = {"ragchecker/retriever/claim_recall/ci_low": cr - 5.0, "ragchecker/retriever/claim_recall/ci_high": cr + 5.0,
              "ragchecker/retriever/claim_recall/n": N_Q}
        s.child(exp, pid, {**BASE_PARAMS, "top_k": k}, {**_metrics(cr, cp), "ragchecker/overall/f1": f1, **ci},
                offset=1200 + 100 * i, scores=scores)
    s.child(exp, pid, {**BASE_PARAMS, "top_k": "20"}, _metrics(1.0, 1.0), status="FAILED", offset=1500)  # resumed-sweep leftover
    s.child(exp, pid, {**BASE_PARAMS, "top_k": "5"}, _metrics(1.0, 1.0), status="KILLED", offset=1600)
    s.topk_parent = pid
    s.topk_child = s.child(exp, pid, {**BASE_PARAMS, "top_k": "5"}, _metrics(1.0, 1.0), status="RUNNING", offset=1700)

    # ragbench layout: retriever x k, no sweep.json (spec comes from the packaged experiment config)
    exp2 = s.experiment("ragbench_case_study")
    pid2 = s.parent(exp2, "ragbench_case_study", None, offset=2000)
    vals = {("tfidf", 2): 0.60, ("tfidf", 4): 0.45, ("dense", 2): 0.80, ("dense", 4): 0.55}
    for i, ((ret, k), rel) in enumerate(vals.items()):
        for j, prompt in enumerate(("no_context", "long_cot")):
            m = {"trace/relevance": rel, "trace/utilization": 0.3 + 0.1 * j, "trace/completeness": 0.5 + 0.1 * j,
                 "trace/adherence_rate": 0.1 if prompt == "no_context" else 0.9}
            scores = {name: per_question(v, 0.01, seed=100 + 10 * i + j, spread=0.05) for name, v in m.items()}
            s.child(exp2, pid2, {**BASE_PARAMS, "retriever": ret, "top_k": k, "prompt": prompt}, m, offset=2100 + 10 * i + j,
                    scores=scores)
    s.ragbench_parent = pid2

    s.experiment("empty_children")
    s.empty_parent = s.parent(s.client.get_experiment_by_name("empty_children").experiment_id, "empty_children", TOPK_SWEEP)
    s.child(s.client.get_experiment_by_name("empty_children").experiment_id, s.empty_parent, BASE_PARAMS, _metrics(1, 1), status="FAILED")
    return s


@pytest.fixture(scope="module")
def topk_report(store, tmp_path_factory):
    import contextlib
    import io

    out = tmp_path_factory.mktemp("report") / "topk"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["--experiment", "ragchecker_topk", "--tracking-uri", store.uri, "--out", str(out)])
    return rc, out, buf.getvalue()


def test_table(topk_report):
    rc, out, stdout = topk_report
    assert rc == 0
    md = (out / "table.md").read_text()
    for header in ("Prec.↑", "Rec.↑", "F1↑", "CR↑", "CP↑", "CU↑", "NS(I)↓", "NS(II)↓", "Hallu.↓", "SK↓", "Faith.↑", "#Claim"):
        assert f"| {header} |" in md or f"| {header}" in md
    rows = [line for line in md.splitlines() if line.startswith("| bm25_smollm2")]
    assert [r.split(" | ")[1] for r in rows] == ["5", "10", "20"]  # sorted numerically
    assert "| 41.2 ± 5.0 (30) | 30.0 |" in rows[0] and "| 52.3 ± 5.0 (30) | 40.0 |" in rows[2]  # mean ± half-width (n)
    assert "99.0" not in md and "| 1.0 | 1.0 |" not in md  # superseded and FAILED/KILLED children ignored
    assert "n/a" in rows[0]  # faithfulness not logged
    with open(out / "table.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [r["k"] for r in table] == ["5", "10", "20"]
    assert [float(r["CR"]) for r in table] == [41.2, 47.9, 52.3]
    assert table[0]["RAG system"] == "bm25_smollm2" and table[0]["Faith."] == ""
    assert "| CR↑ |" in stdout  # the table goes to stdout too


def test_directions(topk_report):
    rc, out, stdout = topk_report
    md = (out / "directions.md").read_text()
    verdicts = {v["metric"]: v for v in json.loads((out / "directions.json").read_text())}
    cr = verdicts["ragchecker/retriever/claim_recall"]
    assert cr["verdict"] == "REPRODUCED" and cr["n"] == N_Q and cr["p"] < 0.05
    assert cr["observed"] == "k=5 41.2 -> k=10 47.9 -> k=20 52.3"
    assert [round(st["diff"], 1) for st in cr["steps"]] == [6.7, 4.4]
    assert all(st["p_holm"] >= st["p"] for st in cr["steps"])
    cp = verdicts["ragchecker/retriever/context_precision"]
    assert cp["verdict"] == "CONTRADICTED"  # rises significantly where the paper says it falls
    f1 = verdicts["ragchecker/overall/f1"]  # +0.5 per step under noise of sd 20: no evidence either way
    assert f1["verdict"] == "SAME DIRECTION, NOT SIGNIFICANT" and f1["p"] > 0.05 and f1["n_needed"] > N_Q
    assert verdicts["ragchecker/generator/faithfulness"]["verdict"] == "NO DATA"
    assert "k=5 41.2 [" in md and "**CONTRADICTED**" in md and "### Steps" in md
    assert "1 reproduced, 1 same direction, not significant, 0 opposite direction, not significant, 0 no difference, not significant, 1 contradicted, 0 not testable, 1 no data" in md
    assert "Judge: evaluator=offline" in md
    line = next(x for x in stdout.splitlines() if "claim_recall" in x and "REPRODUCED" in x)
    assert line.startswith("  ragchecker/retriever/claim_recall: k=5 41.2 -> k=10 47.9 -> k=20 52.3: increasing — REPRODUCED (p=")
    comp = (out / "comparisons.md").read_text()
    assert "baseline `k=5`" in comp and "| k=5 → k=20 |" in comp and "p (Holm)" in comp


def test_a_sweep_on_too_few_questions_is_not_significant(store, tmp_path):
    """The issue's case: three questions cannot show a direction, however the means line up."""
    import pandas as pd

    from ragsweep.analysis.report.directions import decide
    from ragsweep.analysis.report.paired import adjust

    metric = "ragchecker/retriever/context_precision"
    recs = {f"r{k}": [{"query_id": f"q{i}", "scores": {metric: v}} for i, v in enumerate(vals)]
            for k, vals in ((5, [20.0, 25.0, 15.0]), (10, [10.0, 12.5, 7.5]), (20, [5.0, 6.25, 3.75]))}
    df = pd.DataFrame({"run_id": list(recs), "run_name": list(recs), "top_k": [5, 10, 20], metric: [20.0, 10.0, 5.0]})
    v = check_direction(df, {"metric": metric, "param": "top_k", "expect": "decreasing"}, recs)
    adjust(v.comparisons)
    decide(v)
    assert v.verdict == "SAME DIRECTION, NOT SIGNIFICANT" and v.n == 3
    assert v.p >= 0.25  # exact sign-flip p with n = 3 can be no smaller than 2/8
def test_figures_and_artifacts(topk_report, store):
    import matplotlib.image as mpimg

    rc, out, _ = topk_report
    png = out / "fig_top_k.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(png)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    logged = {Path(a.path).name for a in store.client.list_artifacts(store.topk_parent, "report")}
    assert {"table.md", "table.csv", "directions.md", "directions.json", "fig_top_k.png"} <= logged


def test_ragbench_layout_from_packaged_spec(store, tmp_path, capsys):
    rc = main(["--experiment", "ragbench_case_study", "--tracking-uri", store.uri, "--out", str(tmp_path), "--no-log"])
    assert rc == 0
    with open(tmp_path / "table.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0])[:8] == ["retriever", "k", "prompt version", "generation model", "ave relevance",
                                  "ave utilization", "ave completeness", "pc hallucinated"]
    assert [(r["retriever"], r["k"], r["prompt version"]) for r in table][:3] == [("tfidf", "2", "no_context"), ("tfidf", "2", "long_cot"), ("tfidf", "4", "no_context")]
    assert float(table[0]["pc hallucinated"]) == pytest.approx(90.0)
    verdicts = {(v["metric"], v["param"]): v["verdict"] for v in json.loads((tmp_path / "directions.json").read_text())}
    assert verdicts[("trace/relevance", "retriever")] == "REPRODUCED"
    assert verdicts[("trace/relevance", "top_k")] == "REPRODUCED"
    assert verdicts[("trace/adherence_rate", "prompt")] == "REPRODUCED"
    assert verdicts[("trace/utilization", "prompt")] == "REPRODUCED"
    assert verdicts[("ragchecker/generator/hallucination", "prompt")] == "NO DATA"
    for p in ("retriever", "top_k", "prompt", "generator"):
        assert (tmp_path / f"fig_{p}.png").stat().st_size > 1000
    assert store.client.list_artifacts(store.ragbench_parent, "report") == []  # --no-log


@pytest.mark.parametrize(
    "args, message",
    [
        (["--experiment", "nope"], "experiment 'nope' not found"),
        (["--experiment", "ragchecker_topk", "--run", "0123456789abcdef"], "run '0123456789abcdef' not found"),
        (["--experiment", "empty_children"], "no FINISHED child runs"),
    ],
)
def test_errors(store, tmp_path, capsys, args, message):
    rc = main([*args, "--tracking-uri", store.uri, "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert rc != 0
    assert err.startswith("ragsweep-report: error:") and message in err and "\n" not in err


def test_run_option_and_env_uri(store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)
    assert main(["--experiment", "ragchecker_topk", "--run", store.old_parent, "--out", str(tmp_path)]) == 1
    assert f"parent run {store.old_parent} of experiment 'ragchecker_topk' has no FINISHED child runs" in capsys.readouterr().err
    assert main(["--run", store.topk_child, "--out", str(tmp_path)]) == 1
    assert f"is a child run; pass its parent run ({store.topk_parent})" in capsys.readouterr().err
    assert main(["--experiment", "ragbench_case_study", "--run", store.topk_parent, "--out", str(tmp_path)]) == 1
    assert "belongs to experiment 'ragchecker_topk'" in capsys.readouterr().err
    assert main(["--run", store.topk_parent, "--out", str(tmp_path), "--no-log"]) == 0
    assert "ragchecker_topk: parent run" in capsys.readouterr().out


def test_missing_store(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert main(["--experiment", "x"]) == 1
    assert "no MLflow store at mlruns/mlflow.db" in capsys.readouterr().err
    assert not (tmp_path / "mlruns").exists()


def _rules_frame():
    """Three runs (overlap 0 / 0.2 / 0.4 = prompts a / b / c) with per-question values."""
    import pandas as pd

    means = {"ragchecker/retriever/claim_recall": [78.0, 78.1, 77.9], "trace/utilization": [0.3, 0.5, 0.4],
             "ragchecker/retriever/context_precision": [60.0, 65.0, 70.0]}
    sd = {"ragchecker/retriever/claim_recall": 0.3, "trace/utilization": 0.02, "ragchecker/retriever/context_precision": 1.0}
    recs = {}
    for j in range(3):
        vals = {m: per_question(ms[j], sd[m], seed=j, spread=10.0 if m != "trace/utilization" else 0.1) for m, ms in means.items()}
        recs[f"r{j}"] = [{"query_id": f"q{i}", "scores": {m: v[i] for m, v in vals.items()}} for i in range(N_Q)]
    df = pd.DataFrame({"run_id": list(recs), "run_name": list(recs), "chunk_overlap": [0.0, 0.2, 0.4], "prompt": ["a", "b", "c"],
                       **{m: ms for m, ms in means.items()}})
    return df, recs


def _verdict(df, recs, d):
    from ragsweep.analysis.report.directions import decide
    from ragsweep.analysis.report.paired import adjust

    v = check_direction(df, d, recs)
    adjust(v.comparisons)
    return decide(v)


def test_direction_rules():
    df, recs = _rules_frame()
    cr = {"metric": "ragchecker/retriever/claim_recall", "param": "chunk_overlap"}
    flat = _verdict(df, recs, {**cr, "expect": "flat"})
    # steps of 0.1 / 0.2 (paired sd 0.3) over 30 questions: on a 0-100 range, 30 questions cannot rule out
    # a rare large change (issue 34: the betting interval is about +-15 here), so "barely moves" is not shown
    assert flat.verdict == "SAME DIRECTION, NOT SIGNIFICANT" and flat.expected == "barely moves (|step| <= 2)"
    assert flat.n_needed and flat.n_needed > N_Q and flat.steps[0]["ci_low"] < -2 < 2 < flat.steps[0]["ci_high"]
    assert _verdict(df, recs, {**cr, "expect": "flat", "tol": 0.01}).verdict == "OPPOSITE DIRECTION, NOT SIGNIFICANT"
    cp = {"metric": "ragchecker/retriever/context_precision", "param": "chunk_overlap"}
    assert _verdict(df, recs, {**cp, "expect": "increasing"}).verdict == "REPRODUCED"
    assert _verdict(df, recs, {**cp, "expect": "decreasing"}).verdict == "CONTRADICTED"
    assert _verdict(df, recs, {**cp, "expect": "flat"}).verdict == "OPPOSITE DIRECTION, NOT SIGNIFICANT"
    ut = {"metric": "trace/utilization", "param": "prompt"}
    assert _verdict(df, recs, {**ut, "expect": {"higher_for": "b"}}).verdict == "REPRODUCED"
    assert _verdict(df, recs, {**ut, "expect": {"higher_for": "c", "than": "a"}}).verdict == "REPRODUCED"
    assert _verdict(df, recs, {**ut, "expect": {"lower_for": "c"}}).verdict == "CONTRADICTED"
    assert _verdict(df, recs, {**ut, "expect": {"higher_for": "z"}}).verdict == "NO DATA"
    assert _verdict(df, {}, {**ut, "expect": {"higher_for": "b"}}).verdict == "NO DATA"  # no per-question values


def test_check_against_expected_results(store, tmp_path, capsys):
    """--write-expected prints a block; --check passes on the same runs and names what moved otherwise."""
    import yaml

    from ragsweep.analysis.report import cli as report_cli

    rep = report_cli.build_report(store.uri, "ragchecker_topk", None, str(tmp_path), log_to_parent=False)
    block = yaml.safe_load(report_cli.expected.block(rep.df, rep.params, rep.spec))["sweep"]["expected"]
    problems, _ = report_cli.expected.check(rep.df, rep.params, {"expected": block})
    assert problems == []
    moved = yaml.safe_load(yaml.safe_dump(block))
    entry = moved["None"]["systems"]["top_k=10"]["ragchecker/retriever/claim_recall"]
    entry.update(mean=60.0, ci_low=58.0, ci_high=62.0)
    problems, _ = report_cli.expected.check(rep.df, rep.params, {"expected": moved})
    assert len(problems) == 1 and problems[0].startswith("top_k=10 ragchecker/retriever/claim_recall: 47.9")
    assert report_cli.expected.check(rep.df, rep.params, {})[0] is None
    # the command: exit 2 when the config states nothing for this limit
    assert main(["--experiment", "ragchecker_topk", "--tracking-uri", store.uri, "--out", str(tmp_path), "--no-log", "--check"]) == 2
    assert "states no expected results" in capsys.readouterr().err


def test_check_of_a_metric_every_question_scored_alike_uses_the_rule_of_three():
    """A sparse metric recorded as 0 on all 20 questions has the interval [0, 0]; a fresh run with one
    question at 12.5 (mean 0.625) is no evidence of change: up to 1 - 0.05^(1/20) = 13.9% of the
    questions may differ, so the mean may reach 13.9 on a 0-100 metric. Beyond that it moved; an
    exact (retrieval) metric still has to match."""
    import pandas as pd

    from ragsweep.analysis.report import expected

    ns = "ragchecker/generator/noise_sensitivity_in_relevant"
    assert expected.same_value_interval(0.0, 20, 100.0)[:2] == pytest.approx((0.0, 13.91), abs=0.01)
    assert expected.same_value_interval(1.0, 20, 1.0)[:2] == pytest.approx((0.861, 1.0), abs=0.001)
    spec = {"expected": {"20": {"exact": ["retrieval/recall_at_k"], "systems": {"top_k=10": {
        ns: {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": 20},
        "retrieval/recall_at_k": {"mean": 0.9, "ci_low": 0.9, "ci_high": 0.9, "n": 20}}}}}}

    def run(value, recall=0.9):
        df = pd.DataFrame([{"top_k": "10", "limit": "20", ns: value, f"{ns}/n": 20,
                            "retrieval/recall_at_k": recall, "retrieval/recall_at_k/n": 20}])
        return expected.check(df, ["top_k"], spec)

    problems, lines = run(0.625)
    assert problems == [] and any("[0.000, 13.9]" in ln and "up to 13.9% of questions may differ" in ln for ln in lines), lines
    problems, _ = run(20.0)
    assert len(problems) == 1 and problems[0].startswith(f"top_k=10 {ns}: 20")
    problems, _ = run(0.0, recall=0.85)  # exact: no widening
    assert len(problems) == 1 and "recall_at_k" in problems[0]


def test_context_window_lines_name_the_systems_whose_prompts_lost_chunks():
    from types import SimpleNamespace as NS

    from ragsweep.analysis.report.cli import context_window_lines

    def run(name, k, dropped, attempted=20):
        return NS(info=NS(run_name=name), data=NS(params={"top_k": str(k)},
                                                  metrics={"prompt/chunks_dropped": dropped, "ledger/attempted": attempted}))

    lines = context_window_lines([run("c300", 20, 0), run("c600", 20, 139)])
    assert len(lines) == 2 and lines[0].startswith("context window (prompt.fit=drop_lowest")
    assert "c600 dropped 139 retrieved chunk(s)" in lines[1] and "about 13.1 of k=20 per question" in lines[1]
    assert context_window_lines([run("c300", 20, 0)]) == []


def test_comparisons_drop_metrics_no_system_scored_and_say_so():
    """A retrieval-only sweep's generator metrics have no scored question anywhere: one line names them,
    no table of empty rows; a metric scored by the systems keeps its rows."""
    from ragsweep.analysis.report import paired

    nan = float("nan")
    a = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    b = {"q1": 1.0, "q2": 1.0, "q3": 1.0}
    comps = [paired.compare("retrieval/recall_at_k", "A", a, "B", b),
             paired.compare("ragchecker/overall/f1", "A", dict.fromkeys(a, nan), "B", dict.fromkeys(b, nan))]
    md = paired.comparisons_markdown(comps, "B - A")
    assert "| retrieval/recall_at_k | A → B |" in md
    assert "| ragchecker/overall/f1 |" not in md
    assert "no question was scored on them by any system" in md and "ragchecker/overall/f1." in md
    kept, unscored = paired.drop_unscored(comps)
    assert [c.metric for c in kept] == ["retrieval/recall_at_k"] and unscored == ["ragchecker/overall/f1"]


def test_systems_the_short_params_cannot_tell_apart_are_named_by_the_config_key_that_differs(tmp_path, capsys):
    """A sweep over a knob without a short name (the weight format) used to print rows of one name."""
    s = Store(tmp_path)
    exp = s.experiment("formats")
    pid = s.parent(exp, "formats", {"layout": "ragchecker", "params": []}, offset=0)
    for i, (fmt_, f1) in enumerate([("q8_0", 40.0), ("f16", 50.0)]):
        scores = {"ragchecker/overall/f1": per_question(f1, 1.0, seed=30 + i)}
        s.child(exp, pid, {**BASE_PARAMS, "generator.server.model_format": fmt_, "generator.server.n_ctx": "8192",
                           "served/model_file": f"smollm2.{fmt_}.gguf"},
                {**_metrics(50.0, 30.0), "ragchecker/overall/f1": f1}, offset=100 * (i + 1), scores=scores)
    assert main(["--experiment", "formats", "--tracking-uri", s.uri, "--out", str(tmp_path / "out"), "--no-log"]) == 0
    table = (tmp_path / "out" / "table.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| bm25_")]
    # the differing config key is a column; the one both share and the served/* param are not
    assert "| generator.server.model_format |" in table and "n_ctx" not in table and "served/" not in table
    assert len(rows) == 2 and "| f16 |" in rows[0] and "| q8_0 |" in rows[1]
    comparisons = (tmp_path / "out" / "comparisons.md").read_text()
    assert "model_format=q8_0" in comparisons and "model_format=f16" in comparisons


def test_distinguishing_keys_leave_out_bookkeeping_cache_dirs_and_the_machine():
    from types import SimpleNamespace as NS

    from ragsweep.analysis.report.frame import distinguishing_keys

    def run(i, **extra):
        params = {**BASE_PARAMS, "seed": str(i), "run_name": f"r{i}", "generator.server.cache_dir": f"/c{i}",
                  "served/cpu_variant": f"v{i}", **extra}
        return NS(info=NS(run_id=f"id{i}", run_name=f"r{i}"), data=NS(params=params, metrics={}))

    assert distinguishing_keys([run(0), run(1)]) == ["seed"]  # a top-level knob counts too
    # runs the short params already tell apart need nothing more
    assert distinguishing_keys([run(0), run(1, top_k="5")]) == []
