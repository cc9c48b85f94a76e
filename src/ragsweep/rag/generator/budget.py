"""A budget in USD that model calls draw on: ``budget_usd`` (one run) and ``sweep.budget_usd``
(every job of a sweep together).

Before each call the client reserves what the call could cost at most (its prompt, counted
generously, and ``max_tokens`` of completion, at the model's price). A call that could pass the
budget on top of what was spent is not sent (:data:`NO`), and from that moment the budget is
*reached*: every later reservation is refused too, also a cheaper one, so a run stops at one clean
point instead of picking the small calls that still fit. A call that fits what was spent but not
beside the calls in flight waits for them (:data:`WAIT`): their reservations are worst cases, and
what they really cost may leave room. After the call its reservation is settled with what the
server reports it used.

:class:`Budget` lives in one process; :class:`SharedBudget` is a small JSON file guarded by a
file lock (``filelock``), so the jobs of a sweep, in one process or in several (the joblib
launcher), draw on one amount. A reservation held by a process that died is ignored.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Sequence

#: what a reservation answers: held, not now (calls in flight hold the room), never (the budget is reached)
OK, WAIT, NO = "ok", "wait", "no"


def _decide(spent: float, held: float, usd: float, limit: float, reached: bool) -> str:
    if reached or spent + usd > limit + 1e-12:
        return NO
    return WAIT if spent + held + usd > limit + 1e-12 else OK


class Budget:
    """USD that calls may spend, in this process (thread-safe)."""

    def __init__(self, limit_usd: float, label: str = "budget_usd"):
        if isinstance(limit_usd, bool) or not isinstance(limit_usd, (int, float)) or limit_usd < 0:
            raise ValueError(f"{label} must be a number >= 0 (USD), got {limit_usd!r}")
        self.limit = float(limit_usd)
        self.label = label
        self._spent = 0.0
        self._held = 0.0
        self._reached = False
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        return self._spent

    @property
    def reached(self) -> bool:
        return self._reached

    def reserve(self, usd: float) -> str:
        """Hold ``usd`` for one call: :data:`OK`, :data:`WAIT` or :data:`NO` (the budget reached)."""
        with self._lock:
            answer = _decide(self._spent, self._held, usd, self.limit, self._reached)
            self._reached = answer == NO
            if answer == OK:
                self._held += usd
            return answer

    def settle(self, reserved: float, actual: float) -> None:
        """The call that held ``reserved`` cost ``actual`` (0 for a call that failed)."""
        with self._lock:
            self._held = max(0.0, self._held - reserved)
            self._spent += actual

    def why(self) -> str:
        return f"{self.label}={self.limit:g} {'reached' if self._reached else 'set'} (${self._spent:.4f} spent)"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process: alive
        return True
    return True


class SharedBudget:
    """A budget shared by processes through ``path`` (JSON: limit, spent, held per pid, reached)."""

    def __init__(self, path: str | os.PathLike, limit_usd: float, label: str = "sweep.budget_usd"):
        from filelock import FileLock

        Budget(limit_usd, label)  # the same validation
        self.path = Path(path)
        self.limit = float(limit_usd)
        self.label = label
        self._lock = FileLock(str(self.path) + ".lock")
        self._local = threading.Lock()
        with self._lock:
            if not self.path.exists():
                self._write({"limit": self.limit, "spent": 0.0, "held": {}, "reached": False})

    def _read(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text())
        except (OSError, ValueError):
            state = {}
        state.setdefault("spent", 0.0)
        state.setdefault("held", {})
        state.setdefault("reached", False)
        state["limit"] = self.limit
        return state

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.path)

    def _update(self, change: Any) -> Any:
        with self._local, self._lock:
            state = self._read()
            state["held"] = {p: v for p, v in state["held"].items() if int(p) == os.getpid() or _alive(int(p))}
            out = change(state)
            self._write(state)
            return out

    @property
    def spent(self) -> float:
        return float(self._read()["spent"])

    @property
    def reached(self) -> bool:
        return bool(self._read()["reached"])

    def reserve(self, usd: float) -> str:
        me = str(os.getpid())

        def change(state: dict[str, Any]) -> str:
            answer = _decide(state["spent"], sum(state["held"].values()), usd, self.limit, state["reached"])
            state["reached"] = answer == NO
            if answer == OK:
                state["held"][me] = state["held"].get(me, 0.0) + usd
            return answer

        return self._update(change)

    def settle(self, reserved: float, actual: float) -> None:
        me = str(os.getpid())

        def change(state: dict[str, Any]) -> None:
            state["held"][me] = max(0.0, state["held"].get(me, 0.0) - reserved)
            state["spent"] += actual

        self._update(change)

    def why(self) -> str:
        state = self._read()
        return (f"{self.label}={self.limit:g} {'reached' if state['reached'] else 'set'} "
                f"(${float(state['spent']):.4f} spent by the sweep)")


class Budgets:
    """Several budgets at once (a run's and its sweep's): a call is sent only when all hold it."""

    def __init__(self, budgets: Sequence[Any]):
        self.budgets = [b for b in budgets if b is not None]

    @property
    def reached(self) -> bool:
        return any(b.reached for b in self.budgets)

    def reserve(self, usd: float) -> str:
        held = []
        for b in self.budgets:
            answer = b.reserve(usd)
            if answer != OK:
                for h in held:
                    h.settle(usd, 0.0)
                return answer
            held.append(b)
        return OK

    def settle(self, reserved: float, actual: float) -> None:
        for b in self.budgets:
            b.settle(reserved, actual)

    def why(self) -> str:
        """Each budget with what was spent of it (those reached first)."""
        return "; ".join(b.why() for b in sorted(self.budgets, key=lambda b: not b.reached))


def combine(*budgets: Any) -> Budgets | None:
    """One budget object over the given ones (None where none is set)."""
    found = [b for b in budgets if b is not None]
    return Budgets(found) if found else None


__all__ = ["NO", "OK", "WAIT", "Budget", "Budgets", "SharedBudget", "combine"]
