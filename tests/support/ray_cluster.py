"""A real two-node Ray cluster on 127.0.0.1 for the system tests that need one.

``ray start --head`` and ``ray start --address`` (one CPU each) in a short temp dir of their own
(Ray's unix sockets live there); on exit the test stops exactly the cluster's processes (found by
its port and temp dir, never ``ray stop``) and checks none is left."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from ragsweep.rag.generator.server import free_port
from support.processes import pids_matching, stop_pids


@contextlib.contextmanager
def local_cluster(cwd: Path, env: dict[str, str], prefix: str = "rg-ray-") -> Iterator[str]:
    """Start the cluster (its processes in ``cwd``, with ``env``), yield its ``HOST:PORT``. ``env``
    loses ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` in place: the processes that join use it too."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.skip("the ray command is not installed next to the interpreter")
    port = free_port("127.0.0.1")
    temp = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: Ray's unix sockets live here
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)  # =0 refuses a second node
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats"]
    marks = [str(temp), f":{port}"]
    try:
        for args in (["--head", "--port", str(port), "--include-dashboard=false", "--temp-dir", str(temp)],
                     ["--address", f"127.0.0.1:{port}"]):
            proc = subprocess.run([str(ray_bin), "start", *args, *common], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=180)
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        yield f"127.0.0.1:{port}"
    finally:
        stop_pids(pids_matching(marks))
        shutil.rmtree(temp, ignore_errors=True)
    assert not pids_matching(marks), "processes of the Ray cluster still running"
