"""Where MLflow keeps runs: making a local sqlite store safely (parallel jobs, killed processes)."""

from __future__ import annotations

import os
from pathlib import Path


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
