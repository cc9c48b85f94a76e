"""experiments/mlflow_ui_check.py: the MLflow UI over a sweep's store shows the parent run with its
three children. A tiny store (a parent, three FINISHED children with RAGChecker and TRACe metrics,
plus a FAILED child and an older sweep that must be ignored) is served by ``mlflow server`` on
127.0.0.1; the REST check runs always, the screenshots only where Debian's chromium is installed."""

from __future__ import annotations

import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "mlflow_ui_check.py"
CHROMIUM = "/usr/bin/chromium"
EXPERIMENT = "ragchecker_topk"
METRICS = ("ragchecker/overall/f1", "ragchecker/retriever/claim_recall", "trace/relevance", "retrieval/recall_at_k")


def _load():
    spec = importlib.util.spec_from_file_location("mlflow_ui_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    return mod


ui = _load()


def _param(key, value):
    from mlflow.entities import Param

    return Param(key, str(value))


def _metric(key, value):
    from mlflow.entities import Metric

    return Metric(key, float(value), int(time.time() * 1000), 0)


def _build_store(root: Path) -> tuple[str, str, list[str]]:
    """Store with an older sweep (1 child) and the latest sweep (3 FINISHED children, 1 FAILED)."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment(EXPERIMENT, artifact_location=(root / "artifacts").as_uri())

    def sweep(name: str, ks: list[int], failed: bool = False) -> tuple[str, list[str]]:
        tags = {"ragsweep.role": "parent", "ragsweep.experiment": EXPERIMENT}
        parent = client.create_run(eid, run_name=name, tags=tags).info.run_id
        children = []
        for i, k in enumerate(ks):
            run = client.create_run(eid, run_name=f"top_k={k}",
                                    tags={"mlflow.parentRunId": parent, "ragsweep.role": "child"}).info.run_id
            client.log_batch(run, params=[_param("top_k", k), _param("retriever", "bm25")],
                             metrics=[_metric(m, 0.4 + 0.1 * i + 0.01 * j) for j, m in enumerate(METRICS)])
            client.set_terminated(run, "FINISHED")
            children.append(run)
        if failed:
            run = client.create_run(eid, run_name="top_k=40", tags={"mlflow.parentRunId": parent, "ragsweep.role": "child"}).info.run_id
            client.set_terminated(run, "FAILED")
        client.set_terminated(parent, "FINISHED")
        return parent, children

    sweep("old-sweep", [1])
    parent, children = sweep("ragchecker_topk-sweep", [5, 10, 20], failed=True)
    return uri, parent, children


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow_ui")
    uri, parent, children = _build_store(root)
    with ui.mlflow_server(uri, timeout=150) as base:
        yield base, parent, children
    port = int(base.rsplit(":", 1)[1])
    with socket.socket() as s:  # the server is gone with its context
        assert s.connect_ex(("127.0.0.1", port)) != 0, "mlflow server still listening after its context"


def test_rest_finds_latest_parent_and_three_children(served):
    base, parent, children = served
    check = ui.rest_check(base, EXPERIMENT, expect_children=3, metrics=METRICS)
    assert check.parent.run_id == parent
    assert sorted(c.run_id for c in check.children) == sorted(children)
    assert all(c.status == "FINISHED" and set(METRICS) <= set(c.metrics) for c in check.children)
    assert [c.status for c in check.others] == ["FAILED"]
    table = check.table()
    for name in ("ragchecker_topk-sweep", "top_k=5", "top_k=10", "top_k=20", "ragchecker/overall/f1", "trace/relevance"):
        assert name in table


def test_rest_failures_are_one_line_reasons(served, tmp_path):
    base, _, _ = served
    with pytest.raises(ui.CheckError, match=r"3 FINISHED child run\(s\), expected 4"):
        ui.rest_check(base, EXPERIMENT, expect_children=4)
    with pytest.raises(ui.CheckError, match=r"lack metrics: top_k=5: ragas/faithfulness"):
        ui.rest_check(base, EXPERIMENT, metrics=("ragchecker/overall/f1", "ragas/faithfulness"))
    with pytest.raises(ui.CheckError, match=r"experiment 'nope' not found .*ragchecker_topk"):
        ui.rest_check(base, "nope")
    with pytest.raises(ui.CheckError, match="no MLflow store at"):
        ui.resolve_store_uri(f"sqlite:///{tmp_path / 'missing.db'}")


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (apt-get install chromium)")
def test_screenshots_show_parent_with_children(served, tmp_path):
    base, _, _ = served
    check = ui.rest_check(base, EXPERIMENT, metrics=METRICS)
    lines = []
    shots = ui.take_screenshots(check, tmp_path / "ui", CHROMIUM, timeout=60, log=lines.append)
    assert [s.name for s in shots] == ["runs.png", "charts.png"]
    assert all(s.stat().st_size > 10_000 for s in shots)
    assert "parent and 3 child rows shown" in lines[0]
    assert "charts of 4 metrics shown" in lines[1]


def test_check_png_rejects_a_blank_page(tmp_path):
    from PIL import Image

    blank = tmp_path / "blank.png"
    Image.new("RGB", (1600, 1000), "white").save(blank)
    blank.write_bytes(blank.read_bytes() + b"\0" * 20_000)  # big enough on disk, still blank
    with pytest.raises(ui.CheckError, match="looks blank"):
        ui.check_png(blank)
