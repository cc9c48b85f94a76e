"""What serves the OpenAI-compatible API: the stable import path.

Configs name the factories here in ``_target_`` (``ragsweep.rag.generator.server.LlamaCppServer``,
``...VLLMServer``, ``...ExternalServer``) and code imports from here; the implementation lives
in the ``ragsweep.rag.generator.servers`` package, one small module per responsibility (process
bookkeeping, ``ManagedServer``, llama.cpp, vLLM, external endpoint). Keep importing from this
module: the names below stay, wherever their code moves.

``ManagedServer`` runs a command on loopback in its own process group, logs its output to
``log_path`` (kept after ``stop()``, for a run's artifacts), waits for ``GET /v1/models``, and
stops the whole group on ``stop()``, on context-manager exit, at interpreter exit and on
SIGINT/SIGTERM/SIGHUP. Running servers are registered under ``<state_dir>/servers/<pid>.json``;
``find_orphans``/``stop_orphans`` deal with those whose owner died (SIGKILL, OOM). A server that
dies is explained by ``death()`` (and a failed start by its ``ServerStartupError``): the signal by
name or the exit status, the log's last lines, and for a llama.cpp crash (SIGILL/SIGSEGV/SIGBUS)
the likely cause, a build for another CPU, with the rebuild command.

Each factory has ``start()``, ``stop()``, ``base_url``, ``api_key``, ``model_name``,
``describe()`` (safe-to-log parameters, never a secret), ``context_window`` and
``cache_identity`` (what names the model in cache keys: not the port, not the alias alone).
"""

from __future__ import annotations

from ragsweep.rag.generator.servers.errors import (
    ExecutableNotFoundError,
    KeyRejectedError,
    MissingAPIKeyError,
    ModelFileNotFoundError,
    PortInUseError,
    ServerError,
    ServerStartupError,
    ServerUnreachableError,
)
from ragsweep.rag.generator.servers.external import ExternalServer, redact_url
from ragsweep.rag.generator.servers.llamacpp import SMOLLM2, SMOLLM2_FILE, LlamaCppServer, resolve_model_path
from ragsweep.rag.generator.servers.managed import ManagedServer
from ragsweep.rag.generator.servers.process import (
    default_state_dir,
    find_orphans,
    free_port,
    pid_alive,
    port_is_free,
    registry_dir,
    stop_all,
    stop_orphans,
    tail,
)
from ragsweep.rag.generator.servers.vllm import VLLM_MISSING, VLLMServer

__all__ = [
    "SMOLLM2",
    "SMOLLM2_FILE",
    "VLLM_MISSING",
    "ExecutableNotFoundError",
    "ExternalServer",
    "KeyRejectedError",
    "LlamaCppServer",
    "ManagedServer",
    "MissingAPIKeyError",
    "ModelFileNotFoundError",
    "PortInUseError",
    "ServerError",
    "ServerUnreachableError",
    "ServerStartupError",
    "VLLMServer",
    "default_state_dir",
    "find_orphans",
    "free_port",
    "pid_alive",
    "port_is_free",
    "redact_url",
    "registry_dir",
    "resolve_model_path",
    "stop_all",
    "stop_orphans",
    "tail",
]
