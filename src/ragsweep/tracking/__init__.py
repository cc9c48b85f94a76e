"""Everything MLflow: logging a run (:class:`Tracker`), naming and identifying it (``identity``),
finding and reading runs back (``runs``). Only this package imports mlflow."""

from ragsweep.tracking.identity import (
    SHORT_PARAMS,
    SYSTEM_KEY_TAG,
    component_name,
    run_system_key,
    short_params,
    system_key,
    system_name,
)
from ragsweep.tracking.runs import (
    DEFAULT_TRACKING_URI,
    SweepRuns,
    TrackingError,
    children_rows,
    children_status,
    client,
    experiment_runs,
    finished_child,
    latest_parent,
    load_sweep_runs,
    log_files,
    read_json_artifact,
    resolve_tracking_uri,
)
from ragsweep.tracking.cli import check_store
from ragsweep.tracking.tracker import MAX_PARAM_LEN, Tracker, _create_sqlite_store, finite, metric_name

__all__ = [
    "DEFAULT_TRACKING_URI", "MAX_PARAM_LEN", "SHORT_PARAMS", "SYSTEM_KEY_TAG", "SweepRuns", "Tracker", "TrackingError",
    "_create_sqlite_store", "check_store", "children_rows", "children_status", "client", "component_name", "experiment_runs", "finished_child", "finite", "latest_parent",
    "load_sweep_runs", "log_files", "metric_name", "read_json_artifact", "resolve_tracking_uri", "run_system_key", "short_params",
    "system_key", "system_name",
]
