"""Nothing is lost when the tracking server goes away: a run logged to a real ``mlflow server``
that is stopped after the run started ends up complete (params, metrics, artifacts, evaluation
table, traces, FINISHED) once the server is back and the next Tracker starts; nothing is sent
twice; a store unreachable at start is one clear error."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from support import FIXTURES
from ragsweep.tracking import Tracker, finished_child
from ragsweep.tracking.tracker import TrackingUnavailable
from ragsweep.tracking.traces import log_eval_table, log_traces

pytestmark = pytest.mark.slow

FIXTURE = FIXTURES / "ragchecker" / "examples_checking_outputs.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``mlflow server`` on 127.0.0.1:port over a sqlite store, proxying artifacts."""

    def __init__(self, root: Path, port: int):
        self.root, self.port, self.proc = root, port, None
        self.url = f"http://127.0.0.1:{port}"

    def start(self, timeout: float = 180) -> None:
        exe = Path(sys.executable).with_name("mlflow")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "mlflow"]
        cmd += ["server", "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}", "--artifacts-destination",
                str(self.root / "artifacts"), "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"]
        env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
        env.pop("MLFLOW_TRACKING_URI", None)
        log = open(self.root / "server.log", "ab")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, (self.root / "server.log").read_text()[-2000:]
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            assert time.monotonic() < deadline, "mlflow server not healthy"
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None
        with socket.socket() as s:  # really gone: the port refuses
            assert s.connect_ex(("127.0.0.1", self.port)) != 0


@pytest.fixture()
def server(tmp_path):
    srv = Server(tmp_path, _free_port())
    srv.start()
    yield srv
    srv.stop()


def _records() -> list[dict]:
    recs = json.loads(FIXTURE.read_text())["results"]
    for r in recs:
        r["metrics"] = {f"ragchecker/overall/{k}": v for k, v in r["metrics"].items() if k in ("precision", "recall", "f1")}
    return recs


def test_run_completes_after_server_outage(server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_MLFLOW_TRACES", "sync")
    spool = tmp_path / "spool"
    kw = dict(spool_dir=spool, retry_s=1.0)
    tr = Tracker(server.url, "mlflow-artifacts:/outage", "outage", **kw)
    parent = tr.client.create_run(tr.experiment_id, run_name="sweep").info.run_id
    tr.start("sys", tags={"ragsweep.system_key": "k1"}, parent_run_id=parent)
    run_id = tr.run_id
    tr.log_params({"top_k": 4})

    server.stop()  # the server goes away in the middle of the run
    recs = _records()
    t0 = time.monotonic()
    tr.log_metrics({"ragchecker/overall/f1": 42.0})
    tr.log_json({"results": recs}, "records.json")
    assert log_eval_table(tr, recs)["rows"] == len(recs)
    res = log_traces(tr, recs, judge="offline", run_id=run_id)
    assert res["traces"] == 0 and res["spooled"] == len(recs)
    tr.end("FINISHED")
    assert time.monotonic() - t0 < 60, "retries must be bounded"
    assert tr.spooled >= 4 and len(list(spool.glob("*/*.json"))) >= 5  # results on disk, not only in memory

    with pytest.raises(TrackingUnavailable, match=r"unreachable for 1s \(reach the tracking store\)"):
        Tracker(server.url, "mlflow-artifacts:/outage", "outage", **kw)

    server.start()  # back: the next Tracker on this store sends the spool first
    tr2 = Tracker(server.url, "mlflow-artifacts:/outage", "outage", **kw)
    assert not list(spool.glob("*/*.json"))
    run = tr2.client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["top_k"] == "4" and run.data.metrics["ragchecker/overall/f1"] == 42.0
    assert {a.path for a in tr2.client.list_artifacts(run_id)} >= {"records.json", "eval_table.json"}
    # a resumed sweep sees the system finished and skips it
    assert finished_child(tr2, parent, "k1").info.run_id == run_id

    import mlflow

    traces = mlflow.search_traces(locations=[tr2.experiment_id], run_id=run_id, return_type="list")
    assert sorted(t.info.trace_metadata["ragsweep.query_id"] for t in traces) == sorted(str(r["query_id"]) for r in recs)
    from ragsweep.judge.metrics import registry
    from ragsweep.tracking.trace_build import assessment_name

    want = {assessment_name(registry.get(f"ragchecker/overall/{k}")) for k in ("precision", "recall", "f1")}
    assert want == {"precision (RAGChecker)", "recall (RAGChecker)", "f1 (RAGChecker)"}  # as MLflow's UI shows them
    from ragsweep.tracking.trace_build import question_values

    by_id = {str(r["query_id"]): r for r in recs}
    for t in traces:  # every per-question metric the record carries, each named once, on the run's scale
        names = [a.name for a in t.info.assessments if getattr(a, "feedback", None) is not None]
        rec = by_id[t.info.trace_metadata["ragsweep.query_id"]]
        assert sorted(names) == sorted(assessment_name(m) for m, _ in question_values(rec)) and want <= set(names)
    assert all({"expected_response", "expected_facts"} <= {a.name for a in t.info.assessments} for t in traces)
    # replaying the same traces again (a sender killed before it deleted its file) sends no duplicate
    tr2.spool_traces(run_id, recs, "offline")
    assert tr2.replay()["sent"] == 1
    traces = mlflow.search_traces(locations=[tr2.experiment_id], run_id=run_id, return_type="list")
    assert len(traces) == len(recs)
