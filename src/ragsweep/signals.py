"""Interrupts (Ctrl-C, SIGTERM) win over everything they cause.

When a run is interrupted, the model server is stopped at once (``generator.server``'s handler),
so the requests in flight fail. Those failures are a consequence of the interrupt, not a finding:
the run must end KILLED with exit status 130/143, never FAILED with "N generations failed".
:func:`mark` records the first interrupt (called first thing by every signal handler);
:func:`raise_if_interrupted` turns any later code path that carried on (a gather that returned
failed results, a retry loop) back into the interrupt, whatever the timing.
"""

from __future__ import annotations

import signal
import threading

_received: int | None = None
_lock = threading.Lock()


def mark(signum: int) -> None:
    """Remember that ``signum`` arrived (the first one wins)."""
    global _received
    with _lock:
        if _received is None:
            _received = int(signum)


def received() -> int | None:
    return _received


def reset() -> None:
    global _received
    with _lock:
        _received = None


def interrupt_error(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt(f"signal {int(signum)}")


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt("signal N") when an interrupt arrived earlier in this process."""
    if _received is not None:
        raise interrupt_error(_received)


class Interrupts:
    """Inside: SIGINT and SIGTERM raise KeyboardInterrupt("signal N") after :func:`mark`, so a run is
    marked KILLED, its servers stop, and the CLI exits 130 / 143."""

    def __enter__(self) -> "Interrupts":
        self.prev: dict[int, object] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.prev[sig] = signal.signal(sig, self._raise)
            except ValueError:  # not in the main thread
                pass
        return self

    @staticmethod
    def _raise(signum, frame):  # noqa: ANN001
        mark(signum)
        raise interrupt_error(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, prev in self.prev.items():
            signal.signal(sig, prev)  # type: ignore[arg-type]



class DropInterrupts:
    """Logging filter for the terminal: a record carrying a KeyboardInterrupt (asyncio's "Task
    exception was never retrieved" for a task the interrupt landed in) is the interrupt's echo,
    not a failure; the run's log file keeps it. Used by conf/hydra/job_logging/ragsweep.yaml."""

    def filter(self, record: object) -> bool:
        exc = getattr(record, "exc_info", None)
        return not (exc and isinstance(exc[1], KeyboardInterrupt))
