"""The ``ragsweep`` command as a user runs it: a subprocess in a scratch directory."""

import json
import os
import subprocess
import sys
import time

import pytest

from test_launchers import tiny_dataset

PY = sys.executable


def ragsweep(tmp_path, *args, timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([PY, "-m", "ragsweep.pipeline.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


def runs(tmp_path, experiment="default"):
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    exp = client.get_experiment_by_name(experiment)
    return client, ([] if exp is None else client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]))


@pytest.mark.parametrize(
    "args, field",
    [
        (["chunker.size=100", "chunker.overlap=100"], "chunker.overlap"),
        (["retriever=nonexistent"], "retriever"),
        (["+retriever.topk=2"], "retriever.topk"),
    ],
)
def test_bad_config_fails_fast_and_leaves_no_run(tmp_path, args, field):
    t0 = time.monotonic()
    proc = ragsweep(tmp_path, *args, timeout=60)
    assert proc.returncode != 0
    assert field in proc.stderr
    assert time.monotonic() - t0 < 30
    _, found = runs(tmp_path)
    assert not [r for r in found if r.info.status == "FINISHED"]


@pytest.mark.slow
def test_one_system_end_to_end_then_fully_cached(tmp_path):
    args = [*tiny_dataset(tmp_path), "retriever.top_k=2", "generator.max_tokens=24"]
    first = ragsweep(tmp_path, *args)
    assert first.returncode == 0, first.stderr[-3000:]
    client, found = runs(tmp_path)
    assert [r.info.status for r in found] == ["FINISHED"]
    run = found[0]
    # the terminal: a summary, not a raw dict; no library chatter; the server's log kept with the run
    out = first.stdout
    assert out.startswith("ragsweep: bm25-k2-c300o0.2-ragbench_generation-smollm2  FINISHED in "), out
    assert "questions: 2 attempted, 2 answered, 0 failed generation" in out
    assert "retrieval/recall_at_k" in out and "time: " in out and "generate " in out
    assert f"MLflow run {run.info.run_id} in experiment 'default'" in out
    assert "mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db" in out
    assert f"/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}" in out
    assert "records: " in out and out.split("records: ")[1].strip().endswith("records.json")
    for chatter in ("n_ctx_seq", "Loading weights", "INFO mlflow", "Creating initial MLflow", "done: {", "Traceback"):
        assert chatter not in first.stderr + out, chatter
    assert all(f"{stage} " in first.stderr for stage in ("index", "retrieve", "generate", "evaluate"))  # progress bars
    logs = [a.path for a in client.list_artifacts(run.info.run_id, "server")]
    # one log per llama.cpp process (generator.server.replicas: one per core, up to 4)
    from ragsweep.rag.generator.server import LlamaCppServer

    assert len(logs) == LlamaCppServer().replicas, logs
    assert all(p.startswith("server/llamacpp-") and p.endswith(".log") for p in logs), logs
    p, m = run.data.params, run.data.metrics
    assert p["retriever"] == "bm25" and p["top_k"] == "2" and p["chunk_size"] == "300" and p["chunk_overlap"] == "0.2"
    for name in ("retrieval/recall_at_k", "retrieval/mrr_at_k", "retrieval/ndcg_at_k"):
        assert 0.0 <= m[name] <= 1.0
    assert m["retrieval/recall_at_k"] == 1.0  # the tiny corpus is easy for BM25
    assert m["generator/calls"] == 2 and m["generator/cache_hits"] == 0
    path = client.download_artifacts(run.info.run_id, "records.json", str(tmp_path / "dl1"))
    records = json.load(open(path))["results"]
    assert [r["query_id"] for r in records] == ["q1", "q2"]
    assert all(r["response"].strip() for r in records)
    assert all(len(r["retrieved_context"]) == 2 and {"doc_id", "text"} <= set(r["retrieved_context"][0]) for r in records)

    second = ragsweep(tmp_path, "-q", *args)  # -q: only the summary
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.startswith("ragsweep: bm25-k2") and "MLflow run " in second.stdout
    assert second.stderr.strip() == "", second.stderr
    _, found = runs(tmp_path)
    again = found[-1]
    assert again.info.status == "FINISHED"
    assert again.data.metrics["generator/calls"] == 0
    assert again.data.metrics["generator/cache_hits"] == 2
    path = client.download_artifacts(again.info.run_id, "records.json", str(tmp_path / "dl2"))
    def same(recs):  # the cached run's answers, claims and scores; only its call timings differ
        return [{k: v for k, v in r.items() if k not in ("generation", "timings")} for r in recs]

    again_records = json.load(open(path))["results"]
    assert same(again_records) == same(records)
    assert all(r["generation"]["cached"] for r in again_records) and not any(r["generation"]["cached"] for r in records)
