"""The example under examples/ runs (issue 38): one system, a small sweep and a paired comparison
from Python, the per-question DataFrame shown; then ``ragsweep.results`` over that sweep is the
table ``ragsweep-report --export`` writes."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from support import ROOT, SRC


@pytest.mark.slow
def test_the_quickstart_example_runs_a_system_a_sweep_and_a_comparison(tmp_path):
    env = {**os.environ, "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(SRC),
           "RAGSWEEP_MLFLOW_TRACES": "sync", "RAGSWEEP_STATE_DIR": str(tmp_path / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "retrieval/recall_at_k" in text and "ragchecker/retriever/claim_recall" in text
    # the per-question DataFrame: one line per question (4), each with its id
    assert "6401197308716204890" in text
    # the comparison's rows
    assert "retrieval/ndcg_at_k" in text and "p_holm" in text

    import ragsweep
    from ragsweep.analysis.report import main as report

    uri = f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"
    df = ragsweep.results("quickstart", tracking_uri=uri)
    # the single bm25 run and the sweep's bm25 child are the same system: the latest is kept
    assert sorted(df["retriever"].unique()) == ["bm25", "tfidf"] and len(df) == 2 * 4
    assert (df.groupby("run_id").size() == 4).all() and not df["failed"].any()
    assert {"top_k", "chunk_size", "generator", "query_id", "question", "retrieval/recall_at_k"} <= set(df.columns)
    rc = report(["--experiment", "quickstart", "--tracking-uri", uri, "--out", str(tmp_path / "rep"), "--no-log",
                 "--export", "parquet"])
    assert rc == 0
    exported = pd.read_parquet(tmp_path / "rep" / "results.parquet")
    sweep_rows = df.sort_values(["run_id", "query_id"]).reset_index(drop=True)
    exported = exported.sort_values(["run_id", "query_id"]).reset_index(drop=True)
    assert list(exported.columns) == list(sweep_rows.columns)
    pd.testing.assert_frame_equal(exported[["run_id", "query_id", "retrieval/recall_at_k"]],
                                  sweep_rows[["run_id", "query_id", "retrieval/recall_at_k"]], check_dtype=False)
