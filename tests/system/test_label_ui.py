"""Issue 25, item 2, in a real browser: the open-source MLflow UI (the installed MLflow 3) lets a
person add a feedback assessment with a HUMAN source on a ragsweep trace, and ragsweep reads it
back as a label. ``mlflow server`` on 127.0.0.1 (free port, stopped by the test) over a small store
whose traces ``ragsweep-label``'s marking tagged; Playwright drives the system Chromium: filter the
Traces view to the marked questions (Filters: Tag ragsweep.label = sample), open one, Assess -> Add feedback -> Human
feedback, name ``supported``, value False, Create; then :func:`ragsweep.tracking.labels.human_labels`
returns that label."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from support.browser import CHROMIUM, MISSING, load_script


@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING))
def test_a_person_adds_a_human_label_in_the_mlflow_ui_and_ragsweep_reads_it(tmp_path):
    from mlflow.tracking import MlflowClient
    from playwright.sync_api import sync_playwright

    from ragsweep.analysis import labels as L
    from ragsweep.tracking import labels as TL
    from ragsweep.tracking.traces import send_traces

    ui = load_script("mlflow_ui_check")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cl = MlflowClient(tracking_uri=uri)
    exp = cl.create_experiment("label_ui", artifact_location=(tmp_path / "art").as_uri())
    rid = cl.create_run(exp, run_name="bm25").info.run_id
    recs = [{"query_id": f"q{i}", "query": f"which question is number {i}?", "response": f"answer {i}",
             "metrics": {"trace/adherence_rate": 1.0}} for i in range(4)]
    assert send_traces(SimpleNamespace(enabled=True, tracking_uri=uri, experiment_id=exp), recs, judge="offline",
                       run_id=rid, spool=False)["traces"] == 4
    assert TL.mark_sample(cl, exp, [rid], ["q1", "q3"]) == {rid: 2}
    cl.set_terminated(rid, "FINISHED")
    shots = tmp_path / "shots"
    shots.mkdir()

    rows = "[data-component-id='web-shared.traces-table.row-select']"
    t0 = time.perf_counter()
    with ui.mlflow_server(uri, timeout=240) as base, sync_playwright() as p:
        print(f"server up {time.perf_counter() - t0:.1f}s")
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/#/experiments/{exp}/traces")
            ui._wait(lambda: page.locator(rows).count() == 4, 60, "4 trace rows")
            ui._dismiss(page)
            print(f"rows {time.perf_counter() - t0:.1f}s")
            # the questions to label: the marked traces, by their tag
            page.get_by_label("Filters").click()
            page.get_by_label("Filter field").click()
            page.get_by_role("option", name="Tag", exact=True).click()
            page.locator("[data-component-id='web-shared.traces-table.filter.key']").fill(L.SAMPLE_TAG)
            page.locator("[data-component-id='web-shared.traces-table.filter.value']").fill(L.SAMPLE_TAG_VALUE)
            page.locator("[data-component-id='web-shared.traces-table.filter.apply']").click()
            ui._wait(lambda: page.locator(rows).count() == 2, 30, "the 2 marked traces after filtering on the tag")
            assert "which question is number 0?" not in page.inner_text("body")
            page.get_by_text("which question is number 3?").first.click()
            page.get_by_role("button", name="Assess").first.click()
            page.locator("[data-component-id='shared.model-trace-explorer.add-feedback']").first.click()
            page.locator("[data-component-id='mlflow.model-trace-explorer.add-human-feedback']").first.click()
            page.locator("[data-component-id='shared.model-trace-explorer.assessment-name-typeahead.input']").fill("supported")
            page.locator("[data-component-id='shared.model-trace-explorer.assessment-value-boolean-input']").get_by_text("False").click()
            page.locator("[data-component-id='shared.model-trace-explorer.assessment-rationale-input']").fill("answer 3 is not in the context")
            page.locator("[data-component-id='shared.model-trace-explorer.assessment-create-button']", has_text="Create").click()

            got: list = []

            def labelled() -> bool:
                got[:] = TL.human_labels(cl, exp, [rid])[0]
                return bool(got)

            print(f"created {time.perf_counter() - t0:.1f}s")
            ui._wait(labelled, 20, "the HUMAN assessment in the store")
            print(f"read back {time.perf_counter() - t0:.1f}s")
            page.screenshot(path=str(shots / "label_added.png"))
        finally:
            browser.close()
    assert [(x.system, x.question_id, x.name, x.value, x.source) for x in got] == [(rid, "q3", "supported", 0.0, "mlflow")]
    assert got[0].labeller  # the UI's user name is the assessment's source id
    assert (shots / "label_added.png").stat().st_size > 10_000
