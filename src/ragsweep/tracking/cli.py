"""Commands over a :class:`~ragsweep.tracking.tracker.Tracker` from outside a run: the background
spool sender (``python -m ragsweep.tracking.cli replay URI DIR``) and the doctor's store check."""

from __future__ import annotations

import logging

from ragsweep.tracking.tracker import Tracker


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



def main(argv: list[str] | None = None) -> int:
    """``python -m ragsweep.tracking.cli replay TRACKING_URI SPOOL_DIR``: send a spool (the
    background sender a run starts for its traces); exit 0 when nothing is left."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 3 or args[0] != "replay":
        print("usage: python -m ragsweep.tracking.cli replay TRACKING_URI SPOOL_DIR", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    for name in ("mlflow", "alembic", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)
    tracker = Tracker.for_replay(args[1], args[2])
    res = tracker.replay(wait=600.0)
    return 0 if not res["left"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
