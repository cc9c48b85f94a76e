"""A server's start shown on the terminal while it lasts: what starts (kind, model), its log's
path and the seconds so far, with the log's last line (a first vLLM start downloads the model for
minutes and says so only in its log).

On stderr, beside the run's stage bars: nothing for a start that is over within ``delay_s``; then
one status line redrawn every second on a terminal, or a line every ``every_s`` seconds elsewhere (a
log file, CI); one closing line when it is up. Off with ``ragsweep -q`` (which sets ``TQDM_DISABLE``,
as for the stage bars).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any


def last_line(path: str | Path | None, limit: int = 100) -> str:
    """The log's last non-empty line, shortened ("" without one)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = [x.strip() for x in f.read().decode("utf-8", "replace").replace("\r", "\n").splitlines() if x.strip()]
    except OSError:
        return ""
    text = lines[-1] if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class StartProgress:
    """``with StartProgress("vllm", model, log_path) as p: ... p.tick() ...; p.done()``"""

    def __init__(self, kind: str, model: str, log_path: Any, delay_s: float = 2.0, every_s: float = 30.0,
                 file: Any = None):
        self.what = f"the {kind} server for {model}"
        self.log_path = log_path
        self.delay_s, self.every_s = delay_s, every_s
        self.file = file or sys.stderr
        self.enabled = os.environ.get("TQDM_DISABLE", "").lower() not in ("1", "true")
        self.tty = bool(getattr(self.file, "isatty", lambda: False)())
        self._t0 = time.monotonic()
        self._shown = 0.0
        self.shown = False

    def __enter__(self) -> "StartProgress":
        self._t0 = time.monotonic()
        return self

    def _write(self, text: str, final: bool = False) -> None:
        try:
            if self.tty:
                self.file.write("\r\033[K" + text + ("\n" if final else ""))
            else:
                self.file.write(text + "\n")
            self.file.flush()
        except (OSError, ValueError):  # a closed or broken stderr must not fail the start
            self.enabled = False

    def tick(self) -> None:
        """Called while waiting: the status line, when it is time."""
        now = time.monotonic()
        if not self.enabled or now - self._t0 < self.delay_s or now - self._shown < (1.0 if self.tty else self.every_s):
            return
        self._shown, self.shown = now, True
        said = last_line(self.log_path)
        self._write(f"starting {self.what}: {now - self._t0:.0f}s (log: {self.log_path})" + (f" | {said}" if said else ""))

    def done(self) -> None:
        """The closing line, once the server answers (only after a status line was shown)."""
        if self.enabled and self.shown:
            self._write(f"{self.what} is up after {time.monotonic() - self._t0:.0f}s", final=True)
            self.shown = False

    def __exit__(self, *exc: Any) -> None:
        if self.enabled and self.shown and self.tty:
            self._write("", final=False)  # clear the status line; the error that follows says why
