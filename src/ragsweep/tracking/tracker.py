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

log = logging.getLogger(__name__)

_BAD_CHARS = re.compile(r"[^0-9A-Za-z_\-. /:]")
MAX_PARAM_LEN = 6000


def metric_name(name: str) -> str:
    """MLflow accepts letters, digits, ``_ - . space / :``; ``recall@4`` becomes ``recall_at_4``."""
    return _BAD_CHARS.sub("_", name.replace("@", "_at_"))


def _local_path(uri_or_path: str) -> Path | None:
    if uri_or_path.startswith("sqlite:///"):
        return Path(uri_or_path[len("sqlite:///") :])
    return None


def _create_sqlite_store(db: Path, artifact_root: str) -> None:
    """Create a new MLflow sqlite store in a temporary file and link it into place.

    MLflow builds a new database by running its migrations in place, which takes seconds; a
    process killed meanwhile (a SIGKILLed sweep) left a half-made store on which every later run
    failed ("table _alembic_tmp_metrics already exists"). ``os.link`` publishes the finished file
    only if no other process (a parallel job) published one first.
    """
    if db.exists():
        return
    import uuid

    for stale in db.parent.glob(f".{db.name}.*.tmp*"):  # left by a process killed while creating
        pid = stale.name[len(db.name) + 2 :].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.unlink(missing_ok=True)

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    tmp = db.with_name(f".{db.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        store = SqlAlchemyStore(f"sqlite:///{tmp}", Path(artifact_root).resolve().as_uri() if "://" not in artifact_root else artifact_root)
        store.engine.dispose()
        try:
            os.link(tmp, db)
        except FileExistsError:
            pass  # a parallel job was first: use its store
    finally:
        for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            p.unlink(missing_ok=True)


class Tracker:
    """A thin wrapper over ``MlflowClient`` (explicit run ids: safe with parallel jobs)."""

    def __init__(self, tracking_uri: str, artifact_location: str, experiment_name: str, enabled: bool = True):
        self.enabled = enabled
        self.run_id: str | None = None
        self.experiment_id: str | None = None
        if not enabled:
            return
        import mlflow
        from mlflow.tracking import MlflowClient

        db = _local_path(tracking_uri)
        if db is not None:
            db.parent.mkdir(parents=True, exist_ok=True)
            _create_sqlite_store(db, artifact_location)
        self.tracking_uri = tracking_uri
        mlflow.set_tracking_uri(tracking_uri)
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.experiment_id = self._experiment(experiment_name, artifact_location)

    def _experiment(self, name: str, artifact_location: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                self.client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        loc = artifact_location
        if "://" not in loc:
            loc = (Path(loc).resolve() / re.sub(r"[^0-9A-Za-z_.-]", "_", name)).as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=loc)
        except Exception:  # noqa: BLE001 - created meanwhile by a parallel job
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
        run = self.client.create_run(self.experiment_id, run_name=run_name, tags=tags)
        self.run_id = run.info.run_id
        return self.run_id

    def reopen(self, run_id: str) -> str:
        """Continue the existing run ``run_id`` (a resumed sweep's parent): RUNNING again."""
        self.run_id = run_id
        self.client.update_run(run_id, status="RUNNING")
        return run_id

    def end(self, status: str = "FINISHED") -> None:
        if self.enabled and self.run_id:
            self.client.set_terminated(self.run_id, status=status)

    # -- logging -------------------------------------------------------------------------------
    def log_params(self, params: dict[str, Any]) -> None:
        if not (self.enabled and self.run_id):
            return
        from mlflow.entities import Param

        items = []
        for k, v in params.items():
            value = "None" if v is None else str(v)
            if len(value) > MAX_PARAM_LEN:
                value = value[: MAX_PARAM_LEN - 3] + "..."
            items.append(Param(metric_name(k), value))
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

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
            items.append(Metric(metric_name(k), value, now, step))
        for i in range(0, len(items), 500):
            self.client.log_batch(self.run_id, metrics=items[i : i + 500])

    def set_tags(self, tags: dict[str, str]) -> None:
        if self.enabled and self.run_id:
            for k, v in tags.items():
                self.client.set_tag(self.run_id, k, v)

    def log_json(self, obj: Any, name: str) -> None:
        if not (self.enabled and self.run_id):
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            from ragsweep.evaluator.schema import jsonable  # NaN -> null: strict JSON for any reader

            path.write_text(json.dumps(jsonable(obj), indent=1, ensure_ascii=False, allow_nan=False), encoding="utf-8")
            self.client.log_artifact(self.run_id, str(path))

    def log_text(self, text: str, name: str) -> None:
        if not (self.enabled and self.run_id):
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_text(text, encoding="utf-8")
            self.client.log_artifact(self.run_id, str(path))

    def artifact_uri(self, name: str = "") -> str | None:
        """Where this run's artifact ``name`` is stored (a local path for a file store)."""
        if not (self.enabled and self.run_id):
            return None
        root = self.client.get_run(self.run_id).info.artifact_uri
        if root.startswith("file://"):
            from urllib.parse import unquote, urlparse

            root = unquote(urlparse(root).path)
        return f"{root}/{name}" if name else root

    def log_file(self, path: str | os.PathLike, artifact_path: str | None = None) -> None:
        if self.enabled and self.run_id:
            self.client.log_artifact(self.run_id, str(path), artifact_path)


def check_store(tracking_uri: str, artifact_location: str) -> str:
    """Log a run with a metric and an artifact to the store, then delete it; returns where the
    artifacts went. Raises what MLflow raises when the store cannot be written."""
    tracker = Tracker(tracking_uri, artifact_location, "ragsweep-doctor")
    tracker.start("doctor-check")
    try:
        tracker.log_metrics({"doctor/ok": 1.0})
        tracker.log_text("ragsweep-doctor wrote this and deleted its run\n", "doctor.txt")
        where = tracker.client.get_run(tracker.run_id).info.artifact_uri
    finally:
        tracker.end("FINISHED")
        tracker.client.delete_run(tracker.run_id)
    return where


def finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
