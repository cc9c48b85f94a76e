"""Issues 38 and 51 in a real browser: the open-source MLflow UI (the installed MLflow 3) over one
small sweep (2 systems x 4 questions, answers from a fake OpenAI-compatible server, the offline
judge), its label sample's review queue and one ``mlflow.genai.evaluate`` of ragsweep's scorers.
``experiments/ui_checks/mlflow_genai_ui.py`` makes the store and drives Chromium in one session, raising
CheckError on the first page that does not show what it should:

- the Datasets page lists the question set, and both systems' runs show it with one digest (each
  run had logged another: the first the digest before its records were merged);
- the Evaluation runs page leads with the headline metrics, and the runs table opens at the sweep's
  saved view with the headline metrics and their intervals as columns (MLflow's default: none);
- a trace's Assessments pane names every metric once (``faithfulness (RAGChecker)`` beside
  ``faithfulness (RAGAS)``, where both read ``faithfulness``), values rounded to their scale, and
  RAGChecker's per-question values on 0-100 as the run's metric (they were on 0-1);
- the evaluation run's overview says how many traces it scanned (it said "Scanned NaN traces");
- the review queue names each trace's system, and its form shows the ground truth and the
  retrieved chunks beside the question and the answer (it showed those two only).
"""

from __future__ import annotations

import re

import pytest

from fake_openai_server import FakeOpenAIServer, ok
from support.browser import MISSING, load_script

KEY_ENV = "RAGSWEEP_TEST_GENAI_UI_KEY"


def answer_from_context(body: dict, index: int):
    """The first sentence of the prompt's context: an answer its chunks support."""
    text = (body.get("messages") or [{}])[-1].get("content", "")
    docs = text.split("\n\n", 1)[-1].split("Question:")[0].strip()
    return ok(re.split(r"(?<=[.!?])\s", docs)[0][:200] or "I do not know.")


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING))
def test_mlflow_genai_pages_show_what_a_person_compares_and_labels(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(KEY_ENV, "test-key")
    ui = load_script("mlflow_genai_ui")
    with FakeOpenAIServer(responder=answer_from_context, max_seconds=900) as fake:
        store = ui.make_store(tmp_path / "store", generator=[
            "generator=external", f"generator.server.base_url={fake.base_url}", "generator.server.model=fake",
            f"generator.server.api_key_env={KEY_ENV}", "generator.name=fake"])
    assert store.dataset.startswith("clapnq-4q-") and store.eval_run and store.answers
    assert len(store.systems) == 2 and store.review
    seen = ui.shoot(store, tmp_path / "shots")  # each page is checked inside (CheckError otherwise)
    assert set(seen) == {"datasets", "evaluation_runs", "runs_view", "trace", "evaluation_run_overview", "review_form"}
    assert "ragchecker/overall/precision" in seen["evaluation_runs"].split("]")[0]  # a headline metric leads
    assert seen["evaluation_run_overview"] == f"Scanned {store.eval_traces} traces" and store.eval_traces == 4
    for name in ui.SHOTS:
        assert (tmp_path / "shots" / name).stat().st_size > 10_000
