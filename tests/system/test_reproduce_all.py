"""``ragsweep-reproduce`` end to end on a retrieval-only sweep of a few questions (no model server):
the sweep runs through ``ragsweep -m``, is reported, lands on the page, and the same command again
skips it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_faults import mlflow_runs, seed_mlflow  # noqa: E402

# the lexical checker, no RAGAS: no model to load
FAST = ["evaluator.checker.model=none", "evaluator.ragas=false"]


def reproduce(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_STATE_DIR": str(tmp_path / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "ragsweep.pipeline.reproduce", "--only", "ragchecker_topk_retrieval", "--limit", "4",
           "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), "--store", str(tmp_path / "mlruns"),
           *args, *FAST]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # one 6-system retrieval-only sweep over 4 questions
def test_reproduce_runs_reports_and_resumes_a_retrieval_only_sweep(tmp_path):
    seed_mlflow(tmp_path)
    first = reproduce(tmp_path, "--retrieval-only")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "[1/1] ragchecker_topk_retrieval: 6 systems x 4 questions ... done in" in first.stdout
    out = tmp_path / "out"
    state = json.loads((out / "state.json").read_text())["sweeps"]
    entry = state["ragchecker_topk_retrieval dataset.limit=4 " + " ".join(FAST)]
    assert entry["status"] == "finished" and entry["wall_s"] > 0
    rows = entry["directions"]
    assert [r["metric"] for r in rows] == ["ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision",
                                           "retrieval/recall_at_k"]
    assert all(r["verdict"] and (r["n"] is None or r["n"] <= 4) for r in rows)
    page = (out / "reproduce.md").read_text()
    for r in rows:
        line = next(x for x in page.splitlines() if x.startswith(f"| ragchecker_topk_retrieval | {r['metric']} |"))
        assert f"**{r['verdict']}**" in line and "`ragsweep -m +experiment=ragchecker_topk_retrieval dataset.limit=4" in line
    assert (out / "reports" / "ragchecker_topk_retrieval" / "directions.md").is_file()
    assert (out / "logs" / "ragchecker_topk_retrieval.log").is_file()
    client, found = mlflow_runs(tmp_path, "ragchecker_topk_retrieval")  # the store --store named
    assert sum(1 for r in found if r.info.status == "FINISHED") == 7  # the parent and its 6 systems
    assert entry["parent_run_id"] in {r.info.run_id for r in found}

    t0 = time.monotonic()
    again = reproduce(tmp_path, "--retrieval-only")
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"finished before (parent run {entry['parent_run_id']}), skipped" in again.stdout
    assert len(mlflow_runs(tmp_path, "ragchecker_topk_retrieval")[1]) == len(found)  # nothing ran again
    assert time.monotonic() - t0 < 60
