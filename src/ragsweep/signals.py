"""Interrupts (Ctrl-C, SIGTERM, SIGHUP: a closed terminal) win over everything they cause.

When a run is interrupted, the model server is stopped at once (``generator.server``'s handler),
so the requests in flight fail. Those failures are a consequence of the interrupt, not a finding:
the run must end KILLED with exit status 130/143, never FAILED with "N generations failed".
:func:`mark` records the first interrupt (called first thing by every signal handler);
:func:`raise_if_interrupted` turns any later code path that carried on (a gather that returned
failed results, a retry loop) back into the interrupt, whatever the timing. An interrupt that
lands inside a library can come out as another exception (pydantic-core turns one raised while it
builds a schema into a ``SchemaError`` whose message ends in "KeyboardInterrupt: signal 2", with
no chain): :class:`Interrupts` turns any exception that leaves its block after an interrupt, or
that carries one (:func:`interrupt_in`), back into the interrupt.
"""

from __future__ import annotations

import signal
import threading

#: the signals that interrupt a run: Ctrl-C, a kill, and a closed terminal (ssh dropped)
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

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


def interrupt_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The interrupt ``exc`` is, or carries: itself, one in its ``__cause__``/``__context__`` chain,
    or one that pydantic-core wrapped into its own error (a ``SchemaError`` whose message ends in
    "KeyboardInterrupt: signal 2"; only pydantic's errors are read so, not a server log's tail)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt):
            return exc
        said = str(exc).rstrip().splitlines() if type(exc).__module__.startswith("pydantic") else []
        if said and said[-1].strip().startswith("KeyboardInterrupt"):
            return KeyboardInterrupt(said[-1].strip().partition(":")[2].strip())
        exc = exc.__cause__ or exc.__context__
    return None


class Interrupts:
    """Inside: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt("signal N") after :func:`mark`, so
    a run is marked KILLED, its servers stop, and the CLI exits 130 / 143 / 129. Any exception that
    leaves the block after an interrupt arrived, or that carries one, leaves it as that interrupt."""

    def __enter__(self) -> "Interrupts":
        self.prev: dict[int, object] = {}
        for sig in SIGNALS:
            try:
                self.prev[sig] = signal.signal(sig, self._raise)
            except ValueError:  # not in the main thread
                pass
        return self

    @staticmethod
    def _raise(signum, frame):  # noqa: ANN001
        mark(signum)
        raise interrupt_error(signum)

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        for sig, prev in self.prev.items():
            signal.signal(sig, prev)  # type: ignore[arg-type]
        if exc is None or isinstance(exc, KeyboardInterrupt):
            return
        carried = interrupt_in(exc)
        if carried is None and _received is not None:
            carried = interrupt_error(_received)  # what failed after an interrupt failed because of it
        if carried is not None:
            raise carried from exc



class DropInterrupts:
    """Logging filter for the terminal: a record carrying a KeyboardInterrupt (asyncio's "Task
    exception was never retrieved" for a task the interrupt landed in) is the interrupt's echo,
    not a failure; the run's log file keeps it. Used by conf/hydra/job_logging/ragsweep.yaml."""

    def filter(self, record: object) -> bool:
        exc = getattr(record, "exc_info", None)
        return not (exc and isinstance(exc[1], KeyboardInterrupt))
