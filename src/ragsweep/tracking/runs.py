"""Finding and reading runs: a sweep's parent, its children, a resumed sweep's finished systems.

The sweep (to resume), the pipeline (to skip a finished system) and the report (to read a sweep
back) all find runs here, with one notion of "the same system" (:func:`run_system_key`).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.tracking.identity import PARENT_TAG, ROLE_TAG, SIGNATURE_TAG, SYSTEM_KEY_TAG, run_system_key

log = logging.getLogger(__name__)

DEFAULT_TRACKING_URI = "sqlite:///mlruns/mlflow.db"


class TrackingError(Exception):
    """A run or experiment that is not there, or not what was asked for; one line for the user."""


@dataclass
class SweepRuns:
    """A sweep read back: its parent run and its FINISHED children, one per system."""

    experiment: str
    experiment_id: str
    parent_id: str
    parent_name: str
    children: list[Any]  # mlflow Run objects: FINISHED, one per system (the latest)
    n_not_finished: int = 0
    n_duplicates: int = 0
    parent_params: dict[str, str] | None = None
    parent: Any = None  # the parent's mlflow Run
    others: list[Any] = field(default_factory=list)  # children not kept: other states, superseded


def resolve_tracking_uri(uri: str | None) -> str:
    """``uri``, else $MLFLOW_TRACKING_URI, else the default store; a local store must exist."""
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
        if not path.exists():
            raise TrackingError(f"no MLflow store at {path} ({uri}); run a sweep first or pass --tracking-uri")
    return uri


def client(tracking_uri: str):
    """An MlflowClient for reading (MLflow's own chatter quietened)."""
    for name in ("mlflow", "alembic", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def search_all(cl, experiment_id: str, filter_string: str, order_by: list[str] | None = None) -> list[Any]:
    """Every active run of the experiment matching ``filter_string`` (all pages)."""
    from mlflow.entities import ViewType

    runs: list[Any] = []
    token = None
    while True:
        page = cl.search_runs(
            [experiment_id], filter_string=filter_string, run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000, order_by=order_by, page_token=token,
        )
        runs.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return runs


def key_of(run) -> str:
    """The system a logged run ran (see :func:`ragsweep.tracking.identity.run_system_key`)."""
    return run_system_key(run.data.tags, run.data.params, run.info.run_name)


def latest_parent(cl, experiment_id: str, signature: str | None = None):
    """The latest parent run of the experiment (of the sweep with ``signature`` when given), or None."""
    filt = f"tags.`{ROLE_TAG}` = 'parent'" + (f" and tags.`{SIGNATURE_TAG}` = '{signature}'" if signature else "")
    found = cl.search_runs([experiment_id], filter_string=filt, order_by=["attributes.start_time DESC"], max_results=1)
    return found[0] if found else None


def children(cl, experiment_id: str, parent_id: str, key: str | None = None) -> list[Any]:
    """The child runs of ``parent_id`` (of system ``key`` when given), newest first."""
    filt = f"tags.`{PARENT_TAG}` = '{parent_id}'" + (f" and tags.`{SYSTEM_KEY_TAG}` = '{key}'" if key else "")
    found = search_all(cl, experiment_id, filt, order_by=["attributes.start_time DESC"])
    return [r for r in found if r.data.tags.get(ROLE_TAG) != "parent"]


def finished_child(tracker: Any, parent_run_id: str, key: str) -> Any:
    """The FINISHED child of ``parent_run_id`` for system ``key``; stale RUNNING ones are marked KILLED."""
    finished = None
    for r in children(tracker.client, tracker.experiment_id, parent_run_id, key):
        if r.info.status == "FINISHED" and finished is None:
            finished = r
        elif r.info.status == "RUNNING":
            tracker.client.set_terminated(r.info.run_id, status="KILLED")
    return finished


#: the tag of a run its budget stopped (KILLED: neither FAILED nor complete); see ragsweep.pipeline.spend
STATUS_TAG, BUDGET_REACHED = "ragsweep.status", "budget reached"


def children_status(tracker: Any, parent_run_id: str) -> str:
    """FINISHED when every system of the sweep has a FINISHED child; KILLED when the others were
    stopped by the budget (and none failed), so a rerun with a higher budget resumes the sweep; else FAILED."""
    done: dict[str, str] = {}
    for r in children(tracker.client, tracker.experiment_id, parent_run_id):
        key = key_of(r)
        if done.get(key) != "FINISHED":
            budget = r.info.status == "KILLED" and r.data.tags.get(STATUS_TAG) == BUDGET_REACHED
            done[key] = "BUDGET" if budget else r.info.status
    if done and all(s == "FINISHED" for s in done.values()):
        return "FINISHED"
    return "KILLED" if done and all(s in ("FINISHED", "BUDGET") for s in done.values()) else "FAILED"


def children_rows(tracker: Any, parent_run_id: str) -> list[tuple[str, str, dict[str, float]]]:
    """(run name, status, metrics) of the latest child per system of a sweep, in start order."""
    runs = _latest_per_system(list(children(tracker.client, tracker.experiment_id, parent_run_id)))
    return [(r.info.run_name or r.info.run_id, r.info.status, dict(r.data.metrics)) for r in runs]


def _latest_per_system(runs: list[Any]) -> list[Any]:
    """One run per system, the one that started (then ended) last; in start order."""
    latest: dict[str, Any] = {}
    for r in runs:
        key = key_of(r)
        cur = latest.get(key)
        if cur is None or (r.info.start_time or 0, r.info.end_time or 0) > (cur.info.start_time or 0, cur.info.end_time or 0):
            latest[key] = r
    return sorted(latest.values(), key=lambda r: r.info.start_time or 0)


def _experiment(cl, name: str):
    exp = cl.get_experiment_by_name(name)
    if exp is None or exp.lifecycle_stage == "deleted":
        names = sorted(e.name for e in cl.search_experiments())
        raise TrackingError(f"experiment '{name}' not found (experiments in this store: {', '.join(names) if names else 'none'})")
    return exp


def _parent_run(cl, exp, run_id: str, experiment: str | None):
    from mlflow.exceptions import MlflowException

    try:
        parent = cl.get_run(run_id)
    except MlflowException:
        raise TrackingError(f"run '{run_id}' not found") from None
    if exp is not None and parent.info.experiment_id != exp.experiment_id:
        other = cl.get_experiment(parent.info.experiment_id).name
        raise TrackingError(f"run '{run_id}' belongs to experiment '{other}', not '{experiment}'")
    if parent.data.tags.get(ROLE_TAG) == "child":
        pid = parent.data.tags.get(PARENT_TAG, "?")
        raise TrackingError(f"run '{run_id}' is a child run; pass its parent run ({pid})")
    return parent


def experiment_runs(cl, experiment: str, children_only: bool = False) -> list[Any]:
    """Every active run of ``experiment`` (only the children of sweeps with ``children_only``)."""
    exp = _experiment(cl, experiment)
    runs = search_all(cl, exp.experiment_id, "")
    return [r for r in runs if PARENT_TAG in r.data.tags] if children_only else runs


def load_sweep_runs(cl, experiment: str | None, run_id: str | None, require_finished: bool = True) -> SweepRuns:
    """The parent run ``run_id`` (default: the experiment's latest) and its FINISHED children,
    the latest run per system (a resumed sweep may have run one twice); TrackingError when it has
    none (unless ``require_finished`` is false)."""
    exp = _experiment(cl, experiment) if experiment else None
    if run_id:
        parent = _parent_run(cl, exp, run_id, experiment)
        exp = exp or cl.get_experiment(parent.info.experiment_id)
    else:
        parent = latest_parent(cl, exp.experiment_id)
        if parent is None:
            raise TrackingError(f"experiment '{exp.name}' has no parent run (tag ragsweep.role=parent); run `ragsweep -m +experiment={exp.name}` first")
    pid = parent.info.run_id
    found = children(cl, exp.experiment_id, pid)
    finished = [r for r in found if r.info.status == "FINISHED"]
    if not finished and require_finished:
        raise TrackingError(
            f"parent run {pid} of experiment '{exp.name}' has no FINISHED child runs "
            f"({len(found)} child run(s) in other states)"
        )
    kept = _latest_per_system(finished)
    return SweepRuns(
        experiment=exp.name, experiment_id=exp.experiment_id, parent_id=pid,
        parent_name=parent.info.run_name or pid, children=kept,
        n_not_finished=len(found) - len(finished), n_duplicates=len(finished) - len(kept),
        parent_params=dict(parent.data.params), parent=parent,
        others=[r for r in found if r not in kept],
    )


def read_json_artifact(cl, run_id: str, name: str) -> tuple[bool, Any]:
    """(found, value) of the JSON artifact ``name`` of a run; (False, None) when it has none.
    Raises TrackingError when it is there but not valid JSON."""
    try:
        names = {a.path for a in cl.list_artifacts(run_id)}
    except Exception as exc:  # noqa: BLE001 - an unreachable artifact store is not fatal here
        log.warning("cannot list the artifacts of run %s: %s", run_id, exc)
        return False, None
    if name not in names:
        return False, None
    with tempfile.TemporaryDirectory() as tmp:
        path = cl.download_artifacts(run_id, name, tmp)
        try:
            return True, json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TrackingError(f"{name} of run {run_id} is not valid JSON ({exc})") from None


def log_files(cl, run_id: str, files: list[Path], artifact_dir: str) -> None:
    """Log ``files`` to run ``run_id`` under ``artifact_dir``."""
    for f in files:
        cl.log_artifact(run_id, str(f), artifact_dir)
