"""MLflow logging: one run per RAG system, params = the resolved config flattened with secrets
redacted, metrics under grouped names, artifacts = records file and resolved config.

A run is created only after the config validated, and it ends FINISHED only when everything was
logged; any exception (or Ctrl-C) ends it FAILED (KILLED for a signal), never FINISHED.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from ragsweep.tracking.spool import (  # re-exported: the import paths of before the split
    DEFAULT_RETRY_S,
    RETRY_ENV,
    SPOOL_ENV,
    Spool,
    TrackingUnavailable,
    default_spool_dir,
    transient,
)
from ragsweep.tracking.identity import metric_name  # noqa: F401 - re-exported
from ragsweep.tracking.store import _create_sqlite_store, _local_path  # noqa: F401 - re-exported

log = logging.getLogger(__name__)

MAX_PARAM_LEN = 6000


class Tracker:
    """A thin wrapper over ``MlflowClient`` (explicit run ids: safe with parallel jobs).

    Nothing is lost when the tracking server is away: every call is retried with backoff for up
    to ``$RAGSWEEP_MLFLOW_RETRY_S`` seconds (default 30); what still fails once the run exists
    (params, metrics, tags, artifacts, tables, traces, the final status) is written to a local
    spool (:class:`Spool`) and sent by the next Tracker started on the same store (the next run,
    the resumed sweep) before it does anything else, so a resumed sweep sees the run complete
    and skips it. A run that cannot be created, or a store that cannot be reached at start,
    raises :class:`TrackingUnavailable`: the job stops with that message, nothing half-logged.
    """

    def __init__(self, tracking_uri: str, artifact_location: str, experiment_name: str, enabled: bool = True,
                 spool_dir: str | os.PathLike | None = None, retry_s: float | None = None):
        self.enabled = enabled
        self.run_id: str | None = None
        self.run_name: str | None = None
        self.experiment_id: str | None = None
        self.spooled = 0
        if not enabled:
            return
        self.tracking_uri = tracking_uri
        self.retry_s = float(os.environ.get(RETRY_ENV, DEFAULT_RETRY_S) if retry_s is None else retry_s)
        self.spool = Spool(Path(spool_dir) if spool_dir else default_spool_dir(tracking_uri))
        if tracking_uri.startswith(("http://", "https://")):
            # MLflow's own HTTP retries wait minutes on a refused connection; ours are bounded
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        import mlflow
        from mlflow.tracking import MlflowClient

        db = _local_path(tracking_uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
            _create_sqlite_store(db, artifact_location)
        mlflow.set_tracking_uri(tracking_uri)
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.experiment_id = self._call("reach the tracking store", self._experiment, experiment_name, artifact_location)
        self.replay()

    @classmethod
    def for_replay(cls, tracking_uri: str, spool_dir: str | os.PathLike, retry_s: float = 5.0) -> "Tracker":
        """A tracker that only sends a spool (no experiment): the background sender's."""
        from mlflow.tracking import MlflowClient

        self = cls.__new__(cls)
        self.enabled, self.run_id, self.run_name, self.experiment_id, self.spooled = True, None, None, None, 0
        self.tracking_uri, self.retry_s, self.spool = tracking_uri, retry_s, Spool(Path(spool_dir))
        self.client = MlflowClient(tracking_uri=tracking_uri)
        return self

    # -- retries and the spool -------------------------------------------------------------------
    def _call(self, what: str, fn, *args, **kwargs):
        """``fn(*args)``, retried with backoff while the failure is transient; then
        :class:`TrackingUnavailable` (non-transient errors are raised as they are)."""
        deadline = time.monotonic() + self.retry_s
        delay = 0.5
        while True:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below
                if not transient(exc):
                    raise
                if time.monotonic() + delay > deadline:
                    raise TrackingUnavailable(
                        f"MLflow tracking store {self.tracking_uri} unreachable for {self.retry_s:.0f}s ({what}): "
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                    ) from exc
                log.warning("MLflow unreachable (%s); retrying in %.1fs", what, delay)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _send(self, what: str, op: str, payload: dict[str, Any], fn, *args, files: dict[str, Path] | None = None, **kwargs) -> bool:
        """Send now (with retries), or keep ``op`` in the spool for the next start; True when sent."""
        try:
            self._call(what, fn, *args, **kwargs)
            return True
        except TrackingUnavailable as exc:
            self.spool.put(self.run_id, op, payload, files)
            self.spooled += 1
            log.warning("%s; kept %s in %s, sent when the store is back (next run or resumed sweep)", exc, op, self.spool.root)
            return False

    def replay(self, wait: float = 0.0) -> dict[str, int]:
        """Send what earlier processes spooled, in order; stop at the first transient failure.
        Returns counts (``sent``, ``left``, ``bad``)."""
        out = {"sent": 0, "left": 0, "bad": 0}
        pending = self.spool.pending()
        if not pending:
            return out
        with self.spool.locked(wait) as got:
            if not got:
                out["left"] = len(pending)
                return out
            seen: set[Path] = set()
            while True:  # files spooled while we send (this run's table, then its traces) too
                pending = [p for p in self.spool.pending() if p not in seen]
                if not pending:
                    break
                for i, path in enumerate(pending):
                    seen.add(path)
                    if not self._replay_one(path, out):
                        out["left"] = len(self.spool.pending())
                        log.warning("MLflow still unreachable: %d spooled operation(s) wait in %s", out["left"], self.spool.root)
                        return out
        if out["sent"]:
            log.info("sent %d spooled MLflow operation(s) from %s", out["sent"], self.spool.root)
        return out

    def _replay_one(self, path: Path, out: dict[str, int]) -> bool:
        """Send one spooled operation; False when the store is (still) away."""
        try:
            if not path.exists():  # sent by another sender meanwhile
                return True
            self._apply(json.loads(path.read_text(encoding="utf-8")))
        except Exception as exc:  # noqa: BLE001
            if transient(exc) or isinstance(exc, TrackingUnavailable):
                return False
            bad = self.spool.root / "failed" / path.parent.name
            bad.mkdir(parents=True, exist_ok=True)
            os.replace(path, bad / path.name)
            out["bad"] += 1
            log.warning("spooled %s could not be sent (%s: %s); moved to %s", path.name, type(exc).__name__, exc, bad)
            return True
        self.spool.done(path)
        out["sent"] += 1
        return True

    def _apply(self, op: dict[str, Any]) -> None:
        from mlflow.entities import Metric, Param

        run_id, kind = op["run_id"], op["op"]
        c = self.client
        if kind == "params":
            items = [Param(k, v) for k, v in op["params"].items()]
            for i in range(0, len(items), 100):
                self._call("replay params", c.log_batch, run_id, params=items[i : i + 100])
        elif kind == "metrics":
            items = [Metric(k, v, ts, step) for k, v, ts, step in op["metrics"]]
            for i in range(0, len(items), 500):
                self._call("replay metrics", c.log_batch, run_id, metrics=items[i : i + 500])
        elif kind == "tags":
            for k, v in op["tags"].items():
                self._call("replay tags", c.set_tag, run_id, k, v)
        elif kind == "artifact":
            self._call("replay artifact", c.log_artifact, run_id, op["files"]["file"], op.get("artifact_path"))
        elif kind == "table":
            data = json.loads(Path(op["files"]["data"]).read_text(encoding="utf-8"))
            self._call("replay table", c.log_table, run_id, data=data, artifact_file=op["artifact_file"])
        elif kind == "traces":
            from ragsweep.tracking.traces import send_traces

            records = json.loads(Path(op["files"]["records"]).read_text(encoding="utf-8"))
            prev = self.experiment_id
            self.experiment_id = op["experiment_id"]
            try:
                # the op stays until every trace is in: a resend skips those already sent
                res = send_traces(self, records, judge=op.get("judge") or "", run_id=run_id, skip_logged=True, spool=False,
                                  system=op.get("system"))
            finally:
                self.experiment_id = prev
            if res["errors"]:
                raise TrackingUnavailable(f"{res['errors']} of {len(records)} trace(s) of run {run_id} not sent")
        elif kind == "terminate":
            self._call("replay status", c.set_terminated, run_id, status=op["status"], end_time=op.get("end_time"))
        else:
            raise ValueError(f"unknown spooled operation {kind!r}")

    def spool_traces(self, run_id: str, records: list[dict[str, Any]], judge: str, system: str | None = None) -> Path:
        """Keep ``records`` in the spool to be sent as traces of ``run_id`` (see :mod:`.traces`)."""
        from ragsweep.judge.schema import jsonable

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "records.json"
            path.write_text(json.dumps(jsonable(records), ensure_ascii=False, allow_nan=False), encoding="utf-8")
            return self.spool.put(run_id, "traces", {"judge": judge, "experiment_id": self.experiment_id, "system": system},
                                  {"records": path})

    def send_spool_in_background(self) -> int | None:
        """Start a detached process that sends the spool, unless this tracker's is still running
        (it keeps sending until the spool is empty); returns its pid, None when nothing waits."""
        import subprocess
        import sys

        sender = getattr(self, "_sender", None)
        if sender is not None and sender.poll() is None:
            return sender.pid
        if not self.spool.pending():
            return None
        src = str(Path(__file__).resolve().parents[2])  # src/ragsweep/tracking/ -> src
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
        self.spool.root.mkdir(parents=True, exist_ok=True)
        with open(self.spool.root / "sender.log", "ab") as err:
            self._sender = subprocess.Popen(
                [sys.executable, "-c", "import sys; from ragsweep.tracking.cli import main; sys.exit(main())", "replay",
                 self.tracking_uri, str(self.spool.root)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True,
            )
        return self._sender.pid

    # -- experiments ---------------------------------------------------------------------------
    def _experiment(self, name: str, artifact_location: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        loc = artifact_location
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:", loc):  # a path, not a URI (mlflow-artifacts:/x, s3://...)
            loc = (Path(loc).resolve() / re.sub(r"[^0-9A-Za-z_.-]", "_", name)).as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=loc)
        except Exception as exc:  # noqa: BLE001 - created meanwhile by a parallel job
            if transient(exc):
                raise
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    # -- runs ----------------------------------------------------------------------------------
    def start(self, run_name: str | None, tags: dict[str, str] | None = None, parent_run_id: str | None = None) -> str | None:
        if not self.enabled:
            return None
        tags = dict(tags or {})
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = self._call("create a run", self.client.create_run, self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        self.run_name = run.info.run_name  # the system's name: a tag on each of its traces
        return self.run_id

    def reopen(self, run_id: str) -> str:
        """Continue the existing run ``run_id`` (a resumed sweep's parent): RUNNING again."""
        self.run_id = run_id
        self._call("reopen a run", self.client.update_run, run_id, status="RUNNING")
        return run_id

    def end(self, status: str = "FINISHED") -> None:
        if self.enabled and self.run_id:
            now = int(time.time() * 1000)
            self._send("end the run", "terminate", {"status": status, "end_time": now},
                       self.client.set_terminated, self.run_id, status=status, end_time=now)

    # -- logging -------------------------------------------------------------------------------
    def log_params(self, params: dict[str, Any]) -> None:
        if not (self.enabled and self.run_id):
            return
        from mlflow.entities import Param

        items = {}
        for k, v in params.items():
            value = "None" if v is None else str(v)
            if len(value) > MAX_PARAM_LEN:
                value = value[: MAX_PARAM_LEN - 3] + "..."
            items[metric_name(k)] = value
        keys = list(items)
        for i in range(0, len(keys), 100):
            chunk = {k: items[k] for k in keys[i : i + 100]}
            self._send("log params", "params", {"params": chunk},
                       self.client.log_batch, self.run_id, params=[Param(k, v) for k, v in chunk.items()])

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        if not (self.enabled and self.run_id):
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = []
        for k, v in metrics.items():
            if v is None:
                continue
            try:
                value = float(v)
            except (TypeError, ValueError):
                continue
            items.append((metric_name(k), value, now, step))
        for i in range(0, len(items), 500):
            chunk = items[i : i + 500]
            self._send("log metrics", "metrics", {"metrics": chunk},
                       self.client.log_batch, self.run_id, metrics=[Metric(*m) for m in chunk])

    def set_tags(self, tags: dict[str, str]) -> None:
        if self.enabled and self.run_id:
            def send() -> None:
                for k, v in tags.items():
                    self.client.set_tag(self.run_id, k, v)

            self._send("set tags", "tags", {"tags": dict(tags)}, send)

    def log_json(self, obj: Any, name: str) -> None:
        if not (self.enabled and self.run_id):
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            from ragsweep.judge.schema import jsonable  # NaN -> null: strict JSON for any reader

            path.write_text(json.dumps(jsonable(obj), indent=1, ensure_ascii=False, allow_nan=False), encoding="utf-8")
            self.log_file(path)

    def log_text(self, text: str, name: str) -> None:
        if not (self.enabled and self.run_id):
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text, encoding="utf-8")
            self.log_file(path)

    def log_table(self, data: dict[str, list[Any]], artifact_file: str) -> None:
        """``mlflow.log_table`` for this run (the UI's evaluation / artifact views)."""
        if not (self.enabled and self.run_id):
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "table.json"
            path.write_text(json.dumps(data, ensure_ascii=False, default=str), encoding="utf-8")
            self._send("log a table", "table", {"artifact_file": artifact_file}, self.client.log_table, self.run_id,
                       data=data, artifact_file=artifact_file, files={"data": path})

    def artifact_uri(self, name: str = "") -> str | None:
        """Where this run's artifact ``name`` is stored (a local path for a file store)."""
        if not (self.enabled and self.run_id):
            return None
        try:
            root = self._call("read the run", self.client.get_run, self.run_id).info.artifact_uri
        except TrackingUnavailable as exc:
            log.warning("%s", exc)
            return None
        if root.startswith("file://"):
            from urllib.parse import unquote, urlparse

            root = unquote(urlparse(root).path)
        return f"{root}/{name}" if name else root

    def log_file(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        if self.enabled and self.run_id:
            self._send(f"log {Path(path).name}", "artifact", {"artifact_path": artifact_path},
                       self.client.log_artifact, self.run_id, str(path), artifact_path, files={"file": Path(path)})


def finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
