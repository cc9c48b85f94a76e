"""Process helpers the system tests share."""

from __future__ import annotations

import time

from ragsweep.generator.server import pid_alive


def wait_gone(pid: int, timeout: float = 10) -> bool:
    """Whether process ``pid`` has exited within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False
