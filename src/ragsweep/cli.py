"""The ``ragsweep`` command: a Hydra app that runs one RAG system, or a sweep with ``-m``."""

from __future__ import annotations

import logging
import os
import signal
import sys

import hydra
from omegaconf import DictConfig

from ragsweep.errors import RagsweepError

log = logging.getLogger("ragsweep")


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    for name in ("httpx", "httpx2", "openai", "mlflow", "alembic", "urllib3", "sentence_transformers", "faiss", "bm25s"):
        logging.getLogger(name).setLevel(logging.WARNING)


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def app(cfg: DictConfig) -> float | None:
    from ragsweep import sweep
    from ragsweep.pipeline import run_system

    _quiet_libraries()
    info = sweep.current()
    parent = server = None
    if info:
        parent = info.get("parent_run_id")
        shared = info.get("server")
        if shared and "server" in cfg.generator and shared.get("spec") == sweep.server_spec(cfg.generator.server):
            server = sweep.AttachedServer(shared)
    try:
        metrics = run_system(cfg, parent_run_id=parent, server=server)
    except RagsweepError as exc:
        log.error("%s", exc)
        if info is not None:
            raise  # in a sweep: this job fails, Hydra reports it, the other jobs still run
        print(f"ragsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (turned into this by the pipeline)
        if info is not None:
            raise
        why = str(exc) or "Ctrl-C"
        print(f"ragsweep: interrupted ({why})", file=sys.stderr)
        sys.exit(143 if why == f"signal {int(signal.SIGTERM)}" else 130)
    shown = {k: round(v, 4) for k, v in metrics.items() if k.startswith(("retrieval/", "ragchecker/overall", "generator/calls", "generator/cache_hits"))}
    log.info("done: %s", shown)
    return metrics.get("ragchecker/overall/f1")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
