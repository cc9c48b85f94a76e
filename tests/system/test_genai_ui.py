"""Issue 38 in a real browser: the open-source MLflow UI (the installed MLflow 3) shows a ragsweep
sweep inside its GenAI evaluation pages: the question set on the Datasets page, each system's run
on the Evaluation runs page with that set as its dataset and the headline metrics (with interval
and n) as its first metric columns, and a question's trace with its expectations and the
assessments of ragsweep's scorers (``mlflow.genai.evaluate`` with ``ragsweep.mlflow_scorers``).
``experiments/mlflow_genai_ui.py`` makes the store (a retrieval-only sweep of 2 systems x 4
questions) and drives Chromium; this test runs it into a temporary folder."""

from __future__ import annotations

import pytest

from support.browser import MISSING, load_script


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING))
def test_datasets_evaluation_runs_and_a_trace_with_expectations_in_the_mlflow_ui(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    ui = load_script("mlflow_genai_ui")
    store = ui.make_store(tmp_path / "store")
    assert store.dataset.startswith("clapnq-4q-") and store.eval_run
    seen = ui.shoot(store, tmp_path / "shots")  # each page is checked inside (CheckError otherwise)
    assert set(seen) == {"datasets", "evaluation_runs", "trace"}
    assert "ragchecker/retriever/claim_recall" in seen["evaluation_runs"].split("]")[0]  # a headline metric leads
    for name in ui.SHOTS:
        assert (tmp_path / "shots" / name).stat().st_size > 10_000
