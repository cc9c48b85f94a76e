"""``ManagedServer``: a local OpenAI-compatible server process that this process owns.

It runs a command on loopback in its own process group, logs its output to a file, waits for
``GET <health_path>`` to answer (``/v1/models``; vLLM: ``/health``, which no API key guards), and stops the whole group (SIGTERM, then SIGKILL after
``stop_grace_s``; a second SIGTERM after ``second_sigterm_s`` for servers that leave only on a second
interrupt, llama.cpp's) on ``stop()``, on context-manager exit, at interpreter exit, and when this
process gets SIGINT/SIGTERM/SIGHUP (the previous handlers are then called, so Ctrl-C still raises
KeyboardInterrupt and SIGTERM still ends the process with its conventional status).

With ``max_restarts`` > 0 a process that dies under a run is restarted on its port (``restart``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import httpx

from ragsweep.rag.generator.servers import process
from ragsweep.rag.generator.servers.errors import (
    ExecutableNotFoundError,
    PortInUseError,
    ServerError,
    ServerStartupError,
)
from ragsweep.rag.generator.servers.restart import Restarts
from ragsweep.rag.generator.servers.process import (
    describe_exit,
    exit_signal,
    free_port,
    port_is_free,
    registry_dir,
    tail,
)

log = logging.getLogger(__name__)


class ManagedServer(Restarts):
    """A local OpenAI-compatible server process that this process owns.

    ``command(port)`` gives the argv to run (pass a callable, or subclass and override
    ``command``). ``port=None`` picks a free port on ``host``.
    """

    kind = "managed"
    #: where its settings live in the config, for messages (the judge's server: evaluator.judge.server)
    config_key = "generator.server"
    #: show the start on the terminal while it lasts (``startup.StartProgress``): model, log, seconds
    announce_start = False
    #: a second SIGTERM this many seconds after the first, for servers that leave at once only on a
    #: second interrupt (None: one SIGTERM, then SIGKILL after ``stop_grace_s``)
    second_sigterm_s: float | None = None

    def __init__(
        self,
        command: Callable[[int], Sequence[str]] | None = None,
        *,
        model_name: str = "default",
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 120.0,
        health_path: str = "/v1/models",
        stop_grace_s: float = 10.0,
        env: Mapping[str, str] | None = None,
        log_dir: str | os.PathLike | None = None,
        state_dir: str | os.PathLike | None = None,
        max_restarts: int = 0,
        restart_backoff_s: float = 1.0,
    ):
        self._command = command
        self.model_name = model_name
        self.host = host
        self.configured_port = None if port is None else int(port)
        self.startup_timeout_s = float(startup_timeout_s)
        self.health_path = health_path
        self.stop_grace_s = float(stop_grace_s)
        self.env = dict(env or {})
        self.state_dir = registry_dir(state_dir)
        self.log_dir = Path(log_dir) if log_dir else self.state_dir / "servers" / "logs"
        self.port: int | None = None
        self.log_path: Path | None = None
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen | None = None
        self._log_file: Any = None
        self._pid_file: Path | None = None
        self._stopped = False
        self._lock = threading.RLock()
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"{self.config_key}.max_restarts must be an integer >= 0, got {max_restarts!r}")
        self.max_restarts = max_restarts
        self.restart_backoff_s = float(restart_backoff_s)
        #: processes restarted after they died under a run (the watcher's count)
        self.restarts = 0
        self._old_logs: list[Path] = []  # the logs of the processes that died and were restarted
        self._closing = threading.Event()  # stop() was called: no restart, a start in progress gives up
        self._watcher: threading.Thread | None = None
        self._gave_up: str | None = None  # death() once the watcher stopped restarting it

    # -- what to run (override in subclasses) -------------------------------------------------
    def command(self, port: int) -> list[str]:
        if self._command is None:
            raise NotImplementedError("pass command=... or override command()")
        return [str(a) for a in self._command(port)]

    def preflight(self) -> None:
        """Fast checks before anything starts (model files, packages)."""

    def check(self) -> None:
        """What can fail the start without starting anything: ``preflight`` and a configured
        port that is taken. Cheap: a run calls it before its data work, ``start`` again."""
        self.preflight()
        if self.configured_port is not None and not port_is_free(self.configured_port, self.host):
            raise PortInUseError(
                f"port {self.configured_port} on {self.host} is already in use (another server, or "
                f"a leftover one?); set generator.server.port to a free port, or to null to pick one"
            )

    def missing_executable_message(self, exe: str) -> str:
        return f"{self.kind} server executable {exe!r} was not found on PATH"

    # -- public properties ---------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def death(self) -> str | None:
        """Why a started server is no longer running (it died under us), else None.

        The first line is a summary: how it ended (``killed by SIGSEGV (signal 11)`` or
        ``exit status 3``) and the path of its log (``log_path``, kept after ``stop()``). The
        lines after it give the likely cause and its fix where one is known (``crash_hint``:
        for llama.cpp, a build for another CPU) and the last lines of the log."""
        if self._gave_up is not None:
            return self._gave_up
        rc = self._proc.poll() if self._proc is not None and not self._stopped else None
        if rc is None or self.restarting:
            return None
        return self.exit_report(rc, f"the {self.kind} server (pid {self._proc.pid}) died")

    def crash_hint(self, returncode: int) -> str | None:
        """The likely cause of this way of ending, and what to do; None when nothing useful is
        known. Subclasses add their own (llama.cpp: a build for another CPU)."""
        if exit_signal(returncode) == signal.SIGKILL:
            return (
                "likely cause: SIGKILL from outside, most often the kernel's out-of-memory killer "
                "(see `dmesg` or `journalctl -k`); a smaller model or context needs less memory"
            )
        return None

    def exit_report(self, returncode: int, what: str, details: Sequence[str] = (), lines: int = 20) -> str:
        """One summary line (``what``, how the process ended, the log's path), then ``details``,
        the ``crash_hint`` and the log's last ``lines`` lines."""
        out = [f"{what} ({describe_exit(returncode)}); its log: {self.log_path}", *self.diagnosis(), *details]
        hint = self.crash_hint(returncode)
        if hint:
            out.append(hint)
        last = tail(self.log_path, lines)
        if last:
            out.append("last lines of its log:")
            out.append(textwrap.indent(last, "  | ", lambda _line: True))
        else:
            out.append("(its log is empty)")
        return "\n".join(out)

    def diagnosis(self) -> list[str]:
        """Lines that say from its log why it failed and what to do (vLLM: the first root-cause
        error of its whole log and its fix); none by default."""
        return []

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError(f"the {self.kind} server is not started: call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def log_paths(self) -> list[Path]:
        """Every log this server writes (one per process), for a run's artifacts."""
        return [*self._old_logs, *([self.log_path] if self.log_path is not None else [])]

    @property
    def base_urls(self) -> list[str]:
        """Every endpoint that answers for this server (a client spreads requests over them)."""
        return [self.base_url]

    @property
    def api_key(self) -> str | None:
        return None

    @property
    def context_window(self) -> int | None:
        return None

    @property
    def cache_identity(self) -> Any:
        return {"backend": self.kind, "model": self.model_name}

    #: the attributes ``describe`` reports (safe to log, never a secret); empty: model, host, port
    DESCRIBED: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        if self.DESCRIBED:
            return {"backend": self.kind, **{name: getattr(self, name) for name in self.DESCRIBED}}
        return {"backend": self.kind, "model": self.model_name, "host": self.host, "port": self.configured_port}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pid={self.pid}, port={self.port})"

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> "ManagedServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _resolve_executable(self, argv: list[str]) -> list[str]:
        exe = argv[0]
        if os.sep in exe:
            if not os.access(exe, os.X_OK):
                raise ExecutableNotFoundError(self.missing_executable_message(exe))
            return argv
        found = shutil.which(exe)
        if found is None:
            raise ExecutableNotFoundError(self.missing_executable_message(exe))
        return [found] + argv[1:]

    def start(self) -> "ManagedServer":
        with self._lock:
            if self.running:
                return self
            self._closing.clear()
            self._gave_up = None
            self.check()
            attempts = 1 if self.configured_port is not None else 3
            for attempt in range(attempts):
                port = self.configured_port if self.configured_port is not None else free_port(self.host)
                try:
                    self._start_once(port)
                    self._supervise()
                    return self
                except ServerStartupError as exc:
                    # a free port picked by us can be taken by someone else before the server binds it
                    if attempt + 1 < attempts and "address already in use" in str(exc).lower():
                        log.warning("port %d was taken before the server bound it; trying another", port)
                        continue
                    raise
            raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, port: int) -> None:
        argv = self._resolve_executable(self.command(port))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = self.log_dir / f"{self.kind}-{stamp}-{os.getpid()}-{port}.log"
        self._log_file = open(self.log_path, "ab", buffering=0)
        self._log_file.write(f"# {' '.join(argv)}\n".encode())
        env = {**os.environ, **self.env}
        t0 = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                close_fds=True,
            )
        except FileNotFoundError as exc:
            self._close_log()
            raise ExecutableNotFoundError(self.missing_executable_message(argv[0])) from exc
        self.port = port
        self._stopped = False
        process.track(self)
        self._register(argv)
        log.info("started %s server pid %d on %s (log: %s)", self.kind, self._proc.pid, self.base_url, self.log_path)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self._halt()
            raise
        self.startup_seconds = time.monotonic() - t0
        log.info("%s server healthy after %.1fs", self.kind, self.startup_seconds)

    def _wait_healthy(self, t0: float) -> None:
        url = f"http://{self.host if ':' not in self.host else f'[{self.host}]'}:{self.port}{self.health_path}"
        deadline = t0 + self.startup_timeout_s
        last_error = "no answer yet"
        from ragsweep.rag.generator.servers.startup import StartProgress

        shown = StartProgress(self.kind, self.model_name, self.log_path) if self.announce_start else None
        with httpx.Client(timeout=2.0, trust_env=False) as http, shown or contextlib.nullcontext():
            while True:
                if shown is not None:
                    shown.tick()
                if self._closing.is_set():
                    raise ServerStartupError(f"the {self.kind} server was stopped while it started")
                rc = self._proc.poll() if self._proc else None
                if rc is not None:
                    raise ServerStartupError(self.exit_report(
                        rc, f"the {self.kind} server (pid {self._proc.pid}) ended during startup, "
                            f"before GET {self.health_path} answered",
                        [f"command: {' '.join(map(str, self._proc.args))}"],
                    ))
                try:
                    r = http.get(url)
                    if r.status_code == 200:
                        if shown is not None:
                            shown.done()
                        return
                    last_error = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last_error = f"{type(exc).__name__}"
                if time.monotonic() > deadline:
                    raise ServerStartupError("\n".join([
                        f"the {self.kind} server for {self.model_name} did not become healthy within "
                        f"{self.startup_timeout_s:g}s (GET {url}: {last_error}); raise "
                        f"{self.config_key}.startup_timeout_s if it is just slow (a first start downloads the model)",
                        *self.diagnosis(), f"last lines of {self.log_path}:", tail(self.log_path)]))
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server's whole process group (idempotent); ``pid`` keeps the old pid. A restart
        under way gives up; no process is restarted after this."""
        self._closing.set()
        watcher = self._watcher
        self._halt()
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=self.stop_grace_s + 15)

    def _halt(self) -> None:
        with self._lock:
            proc = self._proc
            if proc is not None and not self._stopped:
                if proc.poll() is None or process.group_alive(proc.pid):
                    process.kill_group(proc.pid, proc.pid, proc, self.stop_grace_s, self.second_sigterm_s)
                else:
                    proc.wait()
                log.info("stopped %s server pid %d", self.kind, proc.pid)
                self._stopped = True
                self.port = None
            self._unregister()
            self._close_log()
            process.untrack(self)

    def _close_log(self) -> None:
        if self._log_file is not None:
            try:
                self._log_file.close()
            finally:
                self._log_file = None

    def _register(self, argv: list[str]) -> None:
        self._pid_file = process.register(self.state_dir, {
            "pid": self._proc.pid,
            "pgid": self._proc.pid,
            "start_time": process.start_time(self._proc.pid),
            "host": process.hostname(),  # a registry in a shared home holds other nodes' servers too
            "owner_pid": os.getpid(),
            "kind": self.kind,
            "argv": argv,
            "base_url": self.base_url,
            "log_path": str(self.log_path),
            "started_at": time.time(),
            **self.registry_extra(),
        })

    def registry_extra(self) -> dict[str, Any]:
        """More fields for this server's registry entry (never a secret): vLLM adds its GPUs and
        memory share, which the next vLLM server started on those GPUs reads."""
        return {}

    def _unregister(self) -> None:
        if self._pid_file is not None:
            self._pid_file.unlink(missing_ok=True)
            self._pid_file = None
