"""``mlflow server`` over a store on 127.0.0.1 (a free port, stopped at the end), for
``mlflow_ui_check.py``: making a local store URI absolute and checking that it exists."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator


class CheckError(RuntimeError):
    """A failed check; its message is the one-line reason."""


# -- the MLflow server ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_store_uri(uri: str, cwd: Path | None = None) -> str:
    """Make a local store URI absolute (the server runs in a scratch directory) and make sure it
    exists: ``mlflow server`` would otherwise create an empty store and the check would say
    'experiment not found' instead of 'no store here'."""
    cwd = Path(cwd or os.getcwd())
    if uri.startswith("sqlite:///"):
        raw = uri[len("sqlite:///"):]
        path = Path(raw) if raw.startswith("/") else (cwd / raw)
        if not path.is_file():
            raise CheckError(f"no MLflow store at {path} (from --tracking-uri {uri})")
        return "sqlite:///" + str(path.resolve())
    if uri.startswith("file:"):
        path = Path(urllib.parse.urlparse(uri).path)
    elif "://" not in uri:
        path = Path(uri) if Path(uri).is_absolute() else cwd / uri
    else:
        return uri  # a remote or database store: passed as is
    if not path.is_dir():
        raise CheckError(f"no MLflow store at {path} (from --tracking-uri {uri})")
    return path.resolve().as_uri()


def _mlflow_command() -> list[str]:
    exe = Path(sys.executable).with_name("mlflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mlflow"]


def _stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # the leader may be gone while workers of its group live on
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def _tail(path: Path, n: int = 3) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


@contextlib.contextmanager
def mlflow_server(tracking_uri: str, port: int = 0, timeout: float = 180.0,
                  log_path: Path | None = None) -> Iterator[str]:
    """Run ``mlflow server`` over the store on 127.0.0.1; yield its base URL."""
    uri = resolve_store_uri(tracking_uri)
    port = port or free_port()
    work = Path(tempfile.mkdtemp(prefix="mlflow-ui-check-"))
    log_path = log_path or work / "server.log"
    cmd = _mlflow_command() + [
        "server", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1", "--default-artifact-root", str(work / "mlartifacts"),
    ]
    # a read-only viewer: no background job runner (its worker processes cost seconds on a small
    # machine), no telemetry
    env = dict(os.environ, PYTHONUNBUFFERED="1", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise CheckError(f"mlflow server exited with status {proc.returncode}: {_tail(log_path)}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise CheckError(f"mlflow server on {base} not healthy after {timeout:.0f} s: {_tail(log_path)}")
            time.sleep(0.5)
        yield base
    finally:
        _stop_group(proc)
        shutil.rmtree(work, ignore_errors=True)
