"""vLLM, for a GPU: ``vllm serve MODEL`` on loopback, run as a ``ManagedServer``."""

from __future__ import annotations

from typing import Any, Iterable

from ragsweep.generator.servers.managed import ManagedServer

VLLM_MISSING = "vLLM is not installed: pip install 'ragsweep[vllm]' on a machine with a CUDA GPU"


class VLLMServer(ManagedServer):
    """``vllm serve MODEL`` on loopback."""

    kind = "vllm"
    DESCRIBED = ("model", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype")

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
