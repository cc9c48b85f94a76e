"""The evaluation table of a run (``mlflow.log_table``): one row per question, every metric a column."""

from __future__ import annotations

import json
import math
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragsweep.records import as_record

log = logging.getLogger(__name__)

TABLE_FILE = "eval_table.json"
ID_PREFIX = "#"  # see table_id
RESPONSE_COLUMN = "response"
MODE_ENV = "RAGSWEEP_MLFLOW_TRACES"  # background (default) | sync | off


def table_id(query_id: Any) -> str:
    """A question id as the evaluation table shows it: ``#6401197308716204890``. MLflow's table view
    reads a cell that looks like a number as a JavaScript number, so a 19-digit id appeared rounded
    (6401197308716205000) and two ids could look the same; the ``#`` keeps it text, every digit."""
    return f"{ID_PREFIX}{query_id}"


def table_rows(records: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    """Columns of the evaluation table: id (:func:`table_id`), question, ground truth, response,
    every metric, failure."""
    recs = [as_record(r) for r in records]  # typed: a renamed field is found by a type checker
    names = sorted({name for r in recs for name in r.metrics})
    cols: dict[str, list[Any]] = {"query_id": [], "question": [], "ground_truth": [], RESPONSE_COLUMN: []}
    cols.update({n: [] for n in names})
    cols["failure"] = []
    for r in recs:
        cols["query_id"].append(table_id(r.query_id))
        cols["question"].append(r.query)
        cols["ground_truth"].append(r.gt_answer or "")
        cols[RESPONSE_COLUMN].append(r.response)
        for n in names:
            v = r.metrics.get(n)
            cols[n].append(v if v is not None and math.isfinite(v) else None)
        f = r.failed
        cols["failure"].append(f"{f.stage}: {f.reason}" if f else "")
    return cols


def log_eval_table(tracker: Any, records: Sequence[dict[str, Any]], artifact_file: str = TABLE_FILE) -> dict[str, Any]:
    """Log the evaluation table (one row per question) to the tracker's run with ``mlflow.log_table``;
    with ``$RAGSWEEP_MLFLOW_TRACES=background`` (default) through the background sender, like the
    traces. Never raises (returns ``{"rows", "errors", "seconds"}``)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"rows": 0, "errors": 0, "seconds": 0.0}
    if not records or tracker is None or not getattr(tracker, "enabled", False) or not getattr(tracker, "run_id", None):
        return out
    cols = table_rows(records)
    mode = os.environ.get(MODE_ENV, "background").strip().lower()
    try:
        if mode == "background" and hasattr(tracker, "spool"):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "table.json"
                path.write_text(json.dumps(cols, ensure_ascii=False, default=str), encoding="utf-8")
                tracker.spool.put(tracker.run_id, "table", {"artifact_file": artifact_file}, {"data": path})
            out["sender_pid"] = tracker.send_spool_in_background()
        elif hasattr(tracker, "log_table"):
            tracker.log_table(cols, artifact_file)
        else:
            tracker.client.log_table(tracker.run_id, data=cols, artifact_file=artifact_file)
        out["rows"] = len(records)
    except Exception as exc:  # noqa: BLE001 - never fail a run for its table
        out["errors"] += 1
        log.warning("MLflow evaluation table not logged: %s: %s", type(exc).__name__, exc)
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out
