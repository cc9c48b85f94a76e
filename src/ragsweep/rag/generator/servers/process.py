"""Processes under a managed server: ports, pids, process groups, the pid-file registry, the
stop of every live server at interpreter exit and on SIGINT/SIGTERM/SIGHUP, and how a process ended
(``describe_exit``: the signal by name and number, or the exit status).

Every running server is written to ``<state_dir>/servers/<pid>.json`` and removed when
stopped; ``find_orphans`` lists entries whose owner died without stopping them (SIGKILL, OOM).
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)


def default_state_dir() -> Path:
    env = os.environ.get("RAGSWEEP_STATE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ragsweep" / "state"


# --------------------------------------------------------------------------------------------
# ports and processes
# --------------------------------------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on ``host:port`` now (SO_REUSEADDR, as servers bind)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
        return True


def pid_alive(pid: int) -> bool:
    """True when ``pid`` is a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def tail(path: str | os.PathLike | None, lines: int = 20) -> str:
    """The last ``lines`` lines of a (log) file, "" when there is none."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def exit_signal(returncode: int | None) -> int | None:
    """The signal that ended a process: ``-N`` from Popen, or a shell's ``128+N`` exit status."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode <= 128 + 64:
        return returncode - 128
    return None


def signal_name(signum: int) -> str | None:
    """``"SIGSEGV"`` for 11; None for a number that names no signal here."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return None


def describe_exit(returncode: int) -> str:
    """How a process ended: ``"killed by SIGSEGV (signal 11)"``, ``"exit status 3"``, or for a
    shell's ``128+N`` status ``"exit status 139 (128+11: a process under it killed by SIGSEGV?)"``."""
    if returncode < 0:
        name = signal_name(-returncode)
        return f"killed by {name} (signal {-returncode})" if name else f"killed by signal {-returncode}"
    sig = exit_signal(returncode)
    if sig is not None and signal_name(sig):
        return f"exit status {returncode} (128+{sig}: a process under it killed by {signal_name(sig)}?)"
    return f"exit status {returncode}"


# --------------------------------------------------------------------------------------------
# stop live servers on exit and on SIGINT / SIGTERM / SIGHUP
# --------------------------------------------------------------------------------------------
class Stoppable(Protocol):
    def stop(self) -> None: ...


_LIVE: set[Stoppable] = set()
_LIVE_LOCK = threading.RLock()
_PREVIOUS: dict[int, Any] = {}
_ATEXIT_DONE = False


def track(server: Stoppable) -> None:
    """Stop ``server`` at interpreter exit and on SIGINT/SIGTERM/SIGHUP (until ``untrack``)."""
    with _LIVE_LOCK:
        _LIVE.add(server)
    _install_handlers()


def untrack(server: Stoppable) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(server)


def stop_all() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for srv in servers:
        try:
            srv.stop()
        except Exception:  # pragma: no cover - best effort at exit
            log.exception("could not stop %s", srv)


def _on_signal(signum: int, frame: Any) -> None:
    from ragsweep import signals

    signals.mark(signum)  # before the servers stop: the requests they fail are the interrupt's doing
    stop_all()
    prev = _PREVIOUS.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # e.g. default_int_handler -> KeyboardInterrupt
        return
    if prev == signal.SIG_IGN:
        return
    # SIG_DFL (or unknown, set from C): die by the signal, the conventional 128+N status
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _ATEXIT_DONE
    with _LIVE_LOCK:
        if not _ATEXIT_DONE:
            atexit.register(stop_all)
            _ATEXIT_DONE = True
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; atexit still holds
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
            current = signal.getsignal(sig)
            if current is _on_signal:
                continue
            _PREVIOUS[sig] = current
            signal.signal(sig, _on_signal)


# --------------------------------------------------------------------------------------------
# pid-file registry
# --------------------------------------------------------------------------------------------
def registry_dir(state_dir: str | os.PathLike | None = None) -> Path:
    return Path(state_dir) if state_dir else default_state_dir()


def register(state_dir: Path, entry: dict[str, Any]) -> Path | None:
    """Write ``<state_dir>/servers/<pid>.json``; None (and a warning) when it cannot."""
    folder = state_dir / "servers"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{entry['pid']}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry, indent=1))
        os.replace(tmp, path)
        return path
    except OSError as exc:  # the registry is a convenience; never fail a run for it
        log.warning("could not write the server registry entry: %s", exc)
        return None


def _cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22): with the pid,
    it names one process for good (a reused pid has another start time); None without /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def is_registered_process(entry: dict[str, Any]) -> bool:
    """Whether the registry ``entry`` still names a running process (not a reused pid).

    The entry's ``start_time`` decides when it has one: a server may rewrite its command line
    (vLLM names its processes), and a console script's command line starts with the interpreter
    (``python /venv/bin/vllm serve ...``), so the argv it was started with is only a fallback,
    matched at the start of the command line or right after the interpreter."""
    pid = int(entry.get("pid", -1))
    if pid <= 0 or not pid_alive(pid):
        return False
    started = entry.get("start_time")
    if started is not None:
        now = start_time(pid)
        return now is None or now == int(started)
    argv = list(entry.get("argv") or [])
    cmd = _cmdline(pid)
    if not cmd or not argv:
        return False
    return cmd[: len(argv)] == argv or cmd[1 : 1 + len(argv)] == argv


def hostname() -> str:
    return socket.gethostname()


def live_servers(state_dir: str | os.PathLike | None = None, clean_stale: bool = True) -> list[dict]:
    """The registry's entries of servers still running (each with ``entry``: its file);
    entries of servers that are gone are deleted (when ``clean_stale``)."""
    folder = registry_dir(state_dir) / "servers"
    out = []
    for f in sorted(folder.glob("*.json")):
        try:
            entry = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if entry.get("host") not in (None, hostname()):
            continue  # another node's server (a shared home): neither ours to judge nor on our GPUs
        if not is_registered_process(entry):
            if clean_stale:
                f.unlink(missing_ok=True)
            continue
        out.append({**entry, "entry": str(f)})
    return out


def find_orphans(state_dir: str | os.PathLike | None = None, clean_stale: bool = True) -> list[dict]:
    """Registered servers still running although the process that started them is gone.

    Entries of servers that are no longer running are deleted (when ``clean_stale``). A
    server counts only if it is the very process registered (``is_registered_process``).
    """
    return [e for e in live_servers(state_dir, clean_stale) if not pid_alive(int(e.get("owner_pid", -1)))]


def stop_orphans(state_dir: str | os.PathLike | None = None, grace_s: float = 10.0) -> list[int]:
    """Stop the process groups of ``find_orphans``; returns their pids."""
    stopped = []
    for entry in find_orphans(state_dir):
        kill_group(int(entry["pgid"]), int(entry["pid"]), None, grace_s)
        Path(entry["entry"]).unlink(missing_ok=True)
        stopped.append(int(entry["pid"]))
    return stopped


# --------------------------------------------------------------------------------------------
# process groups
# --------------------------------------------------------------------------------------------
def kill_group(pgid: int, pid: int, proc: subprocess.Popen | None, grace_s: float,
               again_after_s: float | None = None) -> None:
    """SIGTERM the group, SIGKILL it after ``grace_s``; reap ``proc`` when given. ``again_after_s``:
    a second SIGTERM after that long, for a server that leaves at once only on a second interrupt
    (llama-server waits for its requests in flight, which its stopped task loop never answers)."""
    steps = [(signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)]
    if again_after_s is not None and again_after_s < grace_s:
        steps[:1] = [(signal.SIGTERM, again_after_s), (signal.SIGTERM, grace_s - again_after_s)]
    for i, (sig, wait) in enumerate(steps):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # pragma: no cover
            log.warning("not allowed to signal process group %d", pgid)
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None and not group_alive(pgid):
                    return
            elif not pid_alive(pid) and not group_alive(pgid):
                return
            time.sleep(0.05)
        if sig == signal.SIGTERM and steps[i + 1][0] == signal.SIGKILL:
            log.warning("server pid %d did not stop within %.0fs of SIGTERM; sending SIGKILL", pid, grace_s)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            log.error("server pid %d survived SIGKILL", pid)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    # zombies still count for killpg; look for a live member
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                    if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                        return True
                except (OSError, IndexError, ValueError):
                    continue
        return False
    except OSError:  # pragma: no cover - no /proc
        return True


# the old private names (server.py before it became a package)
_tail = tail
_kill_group = kill_group
_group_alive = group_alive
