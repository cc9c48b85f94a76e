"""What could not be sent to MLflow waits here: :class:`Spool` (one JSON file per operation,
replayed in order) and :func:`transient` (which failures are worth retrying)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from ragsweep.errors import RagsweepError
from ragsweep.tracking.store import _local_path


RETRY_ENV = "RAGSWEEP_MLFLOW_RETRY_S"  # how long one MLflow call is retried before it is spooled
SPOOL_ENV = "RAGSWEEP_SPOOL_DIR"  # where what could not be sent waits (default: beside the store)
DEFAULT_RETRY_S = 30.0
_TRANSIENT = re.compile(
    r"Max retries exceeded|Connection ?(refused|reset|aborted|error)|Failed to establish|timed? ?out|"
    r"database is locked|Temporarily Unavailable|Service Unavailable|Bad Gateway|RemoteDisconnected|"
    r"API request to .* failed|status code 50[0234]",
    re.IGNORECASE,
)


class TrackingUnavailable(RagsweepError):
    """The tracking server cannot be reached (after retries) where a run cannot go on without it."""


def transient(exc: BaseException) -> bool:
    """A failure that may pass when the server is back (refused connection, timeout, 5xx, lock)."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return bool(_TRANSIENT.search(f"{type(exc).__name__}: {exc}"))


def default_spool_dir(tracking_uri: str) -> Path:
    """``$RAGSWEEP_SPOOL_DIR/<uri hash>``, else ``.ragsweep_spool`` beside a sqlite store, else
    ``./.ragsweep_spool/<uri hash>``."""
    import hashlib

    tag = hashlib.sha1(tracking_uri.encode()).hexdigest()[:12]
    if os.environ.get(SPOOL_ENV):
        return Path(os.environ[SPOOL_ENV]) / tag
    db = _local_path(tracking_uri)
    if db is not None:
        return db.parent / ".ragsweep_spool"
    return Path(".ragsweep_spool") / tag


class Spool:
    """Operations on runs that could not be sent, one JSON file each, replayed in order.

    ``<root>/<run_id>/<time_ns>-<pid>-<op>.json`` (files to upload under ``<root>/<run_id>/files/``);
    a replay holds ``<root>/.lock`` so two processes never send the same operation twice, and
    deletes each file once MLflow accepted it.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def put(self, run_id: str, op: str, payload: dict[str, Any], files: dict[str, Path] | None = None) -> Path:
        import shutil

        d = self.root / run_id
        stem = f"{time.time_ns():020d}-{os.getpid()}-{op}"
        kept = {}
        for key, src in (files or {}).items():
            dst = d / "files" / stem / Path(src).name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            kept[key] = str(dst)
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"{stem}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"op": op, "run_id": run_id, **payload, "files": kept}, default=str), encoding="utf-8")
        os.replace(tmp, path)  # a reader never sees half an operation
        return path

    def pending(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob("*/*.json"), key=lambda p: p.name)

    def runs(self) -> set[str]:
        return {p.parent.name for p in self.pending()}

    @contextlib.contextmanager
    def locked(self, wait: float = 0.0):
        """Yield True holding the spool's lock (False when another process holds it past ``wait``)."""
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as fh:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.2)
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def done(self, path: Path) -> None:
        import shutil

        shutil.rmtree(path.parent / "files" / path.stem, ignore_errors=True)
        path.unlink(missing_ok=True)
        d = path.parent
        if not any(d.glob("*.json")):
            shutil.rmtree(d, ignore_errors=True)
