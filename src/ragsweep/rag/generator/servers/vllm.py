"""vLLM, for a GPU: ``python -m vllm.entrypoints.cli.main serve MODEL`` on loopback, run as a
``ManagedServer``.

- Started with this interpreter (``sys.executable -m ...``), not the ``vllm`` console script:
  no ``vllm`` on PATH is needed (a non-activated venv's ``ragsweep`` works), and the registry
  finds the server again after a killed sweep (``process.is_registered_process``).
- Readiness is ``GET /health``, which vLLM never guards with a key. When ``VLLM_API_KEY`` is set
  in the server's environment vLLM requires it on every ``/v1/*`` request; ragsweep then sends that
  key (``api_key``), read from the environment only: ``--api-key`` in ``extra_args`` is refused,
  since the config is logged.
- ``--generation-config vllm``: vLLM's own sampling defaults, not the model's
  ``generation_config.json`` (a repetition penalty, a default temperature), so greedy answers stay
  comparable with llama.cpp's.
- ``gpu_memory_utilization: null`` (the default): the share of GPU memory ``gpu.resolve`` gives it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Iterable

import httpx

from ragsweep.errors import ConfigError
from ragsweep.rag.generator.servers import gpu
from ragsweep.rag.generator.servers.errors import ExecutableNotFoundError, ServerStartupError
from ragsweep.rag.generator.servers.managed import ManagedServer
from ragsweep.rag.generator.servers import gpu_memory, vllm_errors

VLLM_MISSING = "vLLM is not installed: pip install 'ragsweep[vllm]' on a machine with a CUDA GPU"
#: the module ``vllm``'s console script runs; ``python -m`` runs it as a script
VLLM_MODULE = "vllm.entrypoints.cli.main"
#: the environment variable with which vLLM requires an API key (its ``--api-key`` default)
VLLM_API_KEY_ENV = "VLLM_API_KEY"


class VLLMServer(ManagedServer):
    """``vllm serve MODEL`` on loopback."""

    kind = "vllm"
    announce_start = True  # a first start downloads the model: minutes that only its log shows
    DESCRIBED = ("model", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype")
    api_key_env = VLLM_API_KEY_ENV

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        dtype: str = "auto",
        host: str = "127.0.0.1",
        port: int | None = None,
        startup_timeout_s: float = 900,
        served_model_name: str | None = None,
        executable: str | None = None,
        generation_config: str = "vllm",
        extra_args: Iterable[Any] = (),
        **kw: Any,
    ):
        kw.setdefault("health_path", "/health")
        super().__init__(
            model_name=served_model_name or model, host=host, port=port, startup_timeout_s=startup_timeout_s, **kw
        )
        self.model = model
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.requested_utilization = None if gpu_memory_utilization is None else float(gpu_memory_utilization)
        if self.requested_utilization is not None and not 0 < self.requested_utilization < 1:
            raise ConfigError(
                f"generator.server.gpu_memory_utilization must be a number in (0, 1) or null (ragsweep picks it), "
                f"got {gpu_memory_utilization!r}"
            )
        self.gpu_memory_utilization = self.requested_utilization  # the share in use once started
        self.max_model_len = None if max_model_len is None else int(max_model_len)
        self.dtype = dtype
        self.served_model_name = served_model_name
        self.executable = executable or None
        self.generation_config = generation_config
        self.extra_args = [str(a) for a in (extra_args or [])]
        if any(a == "--api-key" or a.startswith("--api-key=") for a in self.extra_args):
            raise ConfigError(
                "generator.server.extra_args must not hold --api-key: the config is logged (MLflow params, "
                f"config.json); set the key in the environment variable {VLLM_API_KEY_ENV} instead, which vLLM "
                "reads and ragsweep sends"
            )
        self.structured_mode = "json_schema"

    # -- where it runs ------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    @property
    def devices(self) -> list[str]:
        return gpu.devices(self._env(), self.tensor_parallel_size)

    @property
    def api_key(self) -> str | None:
        """The key vLLM will require: ``VLLM_API_KEY`` of its environment (None when unset)."""
        return self._env().get(VLLM_API_KEY_ENV) or None

    def missing_executable_message(self, exe: str) -> str:
        return f"{VLLM_MISSING} ({exe!r} was not found on PATH)"

    def preflight(self) -> None:
        if self.executable is not None:
            self._resolve_executable([self.executable])
        elif importlib.util.find_spec("vllm") is None:
            raise ExecutableNotFoundError(f"{VLLM_MISSING} (no module 'vllm' for {sys.executable})")

    def check(self) -> None:
        super().check()
        # the share of the GPU's memory it starts with, beside the live vLLM servers on its GPUs
        self.gpu_memory_utilization = gpu.resolve(self.model, self.requested_utilization, self.devices, self.state_dir)

    def _start_once(self, port: int) -> None:
        # the share is decided and registered under one lock: a server started at the same instant
        # (a parallel job) reads the registry only once this one's entry is in it
        lock = gpu.registry_lock(self.state_dir)
        lock.__enter__()
        self._gpu_lock = lock
        try:
            self.gpu_memory_utilization = gpu.resolve(
                self.model, self.requested_utilization, self.devices, self.state_dir)
            # what the driver says is free, whoever holds the rest (this process, a worker, another user)
            gpu_memory.check_free(self.model, self.gpu_memory_utilization or gpu.TOTAL, self.devices,
                                  self.config_key, self.state_dir)
            super()._start_once(port)
        finally:
            self._release_gpu_lock()

    def _register(self, argv: list[str]) -> None:
        super()._register(argv)
        self._release_gpu_lock()  # before the (long) wait for /health

    def _release_gpu_lock(self) -> None:
        lock, self._gpu_lock = getattr(self, "_gpu_lock", None), None
        if lock is not None:
            lock.__exit__(None, None, None)

    def command(self, port: int) -> list[str]:
        head = [self.executable] if self.executable else [sys.executable, "-m", VLLM_MODULE]
        share = self.gpu_memory_utilization if self.gpu_memory_utilization is not None else gpu.TOTAL
        argv = head + [
            "serve", self.model,
            "--host", self.host,
            "--port", str(port),
            "--tensor-parallel-size", str(self.tensor_parallel_size),
            "--gpu-memory-utilization", f"{share:g}",
            "--dtype", self.dtype,
        ]
        if self.max_model_len is not None:
            argv += ["--max-model-len", str(self.max_model_len)]
        if self.served_model_name:
            argv += ["--served-model-name", self.served_model_name]
        if self.generation_config and not any(a.startswith("--generation-config") for a in self.extra_args):
            argv += ["--generation-config", str(self.generation_config)]
        return argv + self.extra_args

    def registry_extra(self) -> dict[str, Any]:
        return {"model": self.model, "devices": self.devices, "gpu_memory_utilization": self.gpu_memory_utilization}

    def _wait_healthy(self, t0: float) -> None:
        super()._wait_healthy(t0)
        # /health is open; the API is not when vLLM requires a key: check now that ours is the one
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            with httpx.Client(timeout=10.0, trust_env=False) as http:
                r = http.get(f"{self.base_url}/models", headers=headers)
        except httpx.HTTPError:
            return  # the first request retries and reports it
        if r.status_code == 401:
            raise ServerStartupError(
                f"the vLLM server answers 401 on {self.base_url}/models: it requires an API key "
                + (f"other than {VLLM_API_KEY_ENV} of its environment" if self.api_key else
                   f"although {VLLM_API_KEY_ENV} is not set")
                + f" (a --api-key in a config file vLLM reads?); set the key in {VLLM_API_KEY_ENV} only"
            )

    def diagnosis(self) -> list[str]:
        """The first root-cause error of its whole log with its fix (``vllm_errors``), and for a GPU
        that is not free enough, what holds it."""
        found = vllm_errors.explain(self.log_path, self.config_key, self.model)
        if found and "Free memory on device" in found[0]:
            found += gpu_memory.holders_lines(self.devices)
        return found

    @property
    def context_window(self) -> int | None:
        return self.max_model_len

    @property
    def cache_identity(self) -> Any:
        ident = {"backend": "vllm", "model": self.model, "dtype": self.dtype}
        if self.generation_config != "vllm":  # the model's own sampling defaults change the answers
            ident["generation_config"] = self.generation_config
        return ident
