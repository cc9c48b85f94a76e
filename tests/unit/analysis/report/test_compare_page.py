"""ragsweep-report --compare A B: a self-contained HTML page, questions sorted by the change in the
metric with its paired interval, claims coloured by label, relevant spans marked, hallucinations
that appear or disappear; logged to the runs' parent. Built over a real sqlite MLflow store."""

from __future__ import annotations

import copy
import json
import re

import pytest

from support import FIXTURES
from ragsweep.analysis.report import compare_page as cp
from ragsweep.analysis.report.cli import main
from ragsweep.tracking.traces import claims_view

FIXTURE = FIXTURES / "ragchecker" / "examples_checking_outputs.json"
METRIC = "ragchecker/overall/f1"


def _records() -> list[dict]:
    recs = json.loads(FIXTURE.read_text())["results"]
    out = []
    for i, r in enumerate(recs):
        r = copy.deepcopy(r)
        pos = 0
        for c in r["retrieved_context"]:
            c.update(chunk_id=f"{c['doc_id']}-0", start=pos, end=pos + len(c["text"]), score=1.0)
        r["relevant_spans"] = [{"doc_id": r["retrieved_context"][0]["doc_id"], "start": 0, "end": 20}]
        r["scores"] = {METRIC: 50.0 + i}  # each question's value, as the pipeline writes it
        out.append(r)
    # a third question without claims, failed in B only
    out.append({"query_id": "q3", "query": "third?", "gt_answer": "x", "response": "y", "retrieved_context": [],
                "scores": {METRIC: 10.0}})
    return out


def _variant_b(recs: list[dict]) -> list[dict]:
    b = copy.deepcopy(recs)
    # q0: claim 0 loses its support everywhere -> a new hallucination; F1 drops by 20
    b[0]["answer2response"][0] = "Neutral"
    b[0]["retrieved2response"][0] = ["Neutral"] * len(b[0]["retrieved2response"][0])
    b[0]["scores"][METRIC] = 30.0
    # ... and its one hallucinated claim in A is entailed by the ground truth in B -> gone
    gone = next(i for i, c in enumerate(claims_view(recs[0])["response_claims"]) if c["hallucination"])
    b[0]["answer2response"][gone] = "Entailment"
    # q1: F1 up by 10
    b[1]["scores"][METRIC] = 61.0
    b[2]["failure"] = {"stage": "judge", "reason": "judge timed out"}
    b[2]["scores"][METRIC] = None  # what the failed judge call leaves: undefined, not scored
    return b


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from mlflow.tracking import MlflowClient

    tmp_path = tmp_path_factory.mktemp("cmp")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cl = MlflowClient(tracking_uri=uri)
    eid = cl.create_experiment("cmp", artifact_location=(tmp_path / "art").as_uri())
    parent = cl.create_run(eid, run_name="sweep", tags={"ragsweep.role": "parent"}).info.run_id
    recs = _records()
    ids = []
    for name, rr in (("sys-a", recs), ("sys-b", _variant_b(recs))):
        rid = cl.create_run(eid, run_name=name, tags={"mlflow.parentRunId": parent, "ragsweep.role": "child"}).info.run_id
        p = tmp_path / "records.json"
        p.write_text(json.dumps({"results": rr}))
        cl.log_artifact(rid, str(p))
        cl.set_terminated(rid, "FINISHED")
        ids.append(rid)
    cl.set_terminated(parent, "FINISHED")
    return uri, cl, parent, ids


def test_hallucination_is_ragchecker_definition():
    r = _records()[0]
    view = claims_view(r)
    for i, c in enumerate(view["response_claims"]):
        supported = r["answer2response"][i] == "Entailment" or "Entailment" in r["retrieved2response"][i]
        assert c["hallucination"] is (not supported)
        assert c["vs_chunks"] == r["retrieved2response"][i]
    assert [c["vs_response"] for c in view["gt_answer_claims"]] == r["response2answer"]


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_compare_cli_writes_and_logs_page(store, tmp_path, capsys):
    uri, cl, parent, (a, b) = store
    out = tmp_path / "out"
    assert main(["--compare", a, b, "--tracking-uri", uri, "--out", str(out)]) == 0
    assert f"logged to run {parent} under compare/" in capsys.readouterr().out
    pages = list(out.glob("*.html"))
    assert len(pages) == 1
    assert [f.path for f in cl.list_artifacts(parent, "compare")] == [f"compare/{pages[0].name}"]
    page = pages[0].read_text()
    # self-contained: inline CSS, no script, no external asset
    assert "<style>" in page and "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    # the paired interval over the 2 questions both scored (q3 failed in B)
    assert f"{METRIC}: B − A = -5 [" in page and "n = 2 questions both runs scored" in page
    # sorted by the change: q0 (-20) first, then q1 (+10), then q3 (not in both)
    order = [page.index(f'id="q-{q}"') for q in ("0", "1", "q3")]
    assert order == sorted(order)
    # claims coloured by label, hallucinations flagged, their changes listed
    assert 'class="claim ent' in page and 'class="claim neu' in page and 'class="lab con"' in page
    assert "became a hallucination in B" in page and "no longer a hallucination in B" in page
    recs = _records()
    first_claim = claims_view(recs[0])["response_claims"][0]["claim"]
    new_block = page[page.index('id="q-0"'):page.index('id="q-1"')]
    assert f"became a hallucination in B: {first_claim}" in new_block.replace("&#x27;", "'")
    assert "no longer a hallucination in B (was in A): Amazon River length" in new_block
    # the relevant span of the first chunk is marked
    assert '<mark class="rel">' in page
    assert "failed (judge): judge timed out" in page


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_compare_pages_for_sweep_one_per_child(store, tmp_path):
    from ragsweep import tracking

    uri, cl, parent, (a, b) = store
    runs = tracking.load_sweep_runs(cl, None, parent)
    pages = cp.compare_pages_for_sweep(cl, runs, tmp_path / "pages")
    assert [rid for rid, _ in pages] == [b]
    assert pages[0][1].exists()
    assert len(cl.list_artifacts(parent, "compare")) == 1


@pytest.mark.slow  # a fresh sqlite MLflow store: 10-40 s on 2 busy cores
def test_compare_errors_are_one_line(store, tmp_path, capsys):
    uri, cl, parent, (a, b) = store
    assert main(["--compare", a, "nope", "--tracking-uri", uri, "--no-log", "--out", str(tmp_path)]) == 1
    assert "run 'nope' not found" in capsys.readouterr().err
    assert main(["--compare", a, b, "--metric", "ragas/none", "--tracking-uri", uri, "--no-log", "--out", str(tmp_path)]) == 1
    assert "no question has ragas/none in both runs" in capsys.readouterr().err


def test_marked_text_clips_spans_to_chunk():
    chunk = {"doc_id": "d", "text": "abcdefghij", "start": 100, "end": 110}
    spans = [{"doc_id": "d", "start": 95, "end": 102}, {"doc_id": "d", "start": 105, "end": 107}, {"doc_id": "x", "start": 0, "end": 200}]
    assert cp.marked_text(chunk, spans) == '<mark class="rel">ab</mark>cde<mark class="rel">fg</mark>hij'
