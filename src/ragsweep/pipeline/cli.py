"""The ``ragsweep`` command: a Hydra app that runs one RAG system, or a sweep with ``-m``."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time

import hydra
from omegaconf import DictConfig

from ragsweep.errors import RagsweepError
from ragsweep.pipeline.summary import QUIET_ENV

log = logging.getLogger("ragsweep")


def _quiet_libraries() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")  # "Creating initial MLflow database tables..."
    for name in ("httpx", "httpx2", "openai", "mlflow", "alembic", "urllib3", "sentence_transformers", "faiss", "bm25s"):
        logging.getLogger(name).setLevel(logging.WARNING)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def app(cfg: DictConfig) -> float | None:
    from ragsweep.pipeline import sweep
    from ragsweep.pipeline.system import run_system

    info = sweep.current()
    parent = server = None
    if info:
        parent = info.get("parent_run_id")
        shared = info.get("server")
        if shared and "server" in cfg.generator and shared.get("spec") == sweep.server_spec(cfg.generator.server):
            server = sweep.AttachedServer(shared)
    try:
        metrics = run_system(cfg, parent_run_id=parent, server=server, sweep_info=info)
    except RagsweepError as exc:
        log.error("%s", exc)
        if info is not None:
            raise  # in a sweep: this job fails, Hydra reports it, the other jobs still run
        print(f"ragsweep: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM / SIGHUP (turned into this by the pipeline)
        if info is not None:
            raise
        why = str(exc) or "Ctrl-C"
        print(f"ragsweep: interrupted ({why})", file=sys.stderr)
        signum = why.removeprefix("signal ")
        sys.exit(128 + int(signum) if signum.isdigit() else 128 + int(signal.SIGINT))  # 130, 143, 129
    from ragsweep.pipeline.summary import format_line, format_summary

    shown = list(cfg.get("summary", {}).get("metrics", []))
    if info is not None:  # one line per job; the sweep prints its table at the end
        print(format_line(metrics, shown), flush=True)
    else:
        print(format_summary(metrics, shown, total_s=time.perf_counter() - _T0), flush=True)
        if getattr(metrics, "status", "") == "BUDGET REACHED":
            sys.exit(BUDGET_EXIT)  # not complete: a script must not take it for a finished run
    log.info("done: %s", dict(metrics))
    from ragsweep.analysis.search import job_return

    return job_return(metrics, cfg, info)  # the sweeper's objective(s): sweep.objectives


_T0 = time.perf_counter()
QUIET_FLAGS = ("-q", "--quiet")
DRY_RUN_FLAG = "--dry-run"
#: the exit status of a run its budget stopped (its answered questions are logged and cached)
BUDGET_EXIT = 3


def _unraisable(info: "sys.UnraisableHookArgs") -> None:
    """An interrupt that lands inside a finalizer (an HTTP client's __del__, an event loop being
    torn down) cannot propagate; Python would print 'Exception ignored in ...' with a traceback
    after the run already stopped cleanly. Log those; report any other as Python does."""
    if isinstance(info.exc_value, KeyboardInterrupt):
        log.debug("interrupt inside %r ignored during shutdown", info.object)
        return
    sys.__unraisablehook__(info)


def main() -> None:
    """``ragsweep [-q] [--dry-run] [hydra overrides...]``: ``-q`` keeps only the summary on the
    terminal; ``--dry-run`` prints the estimate of a priced run or sweep and stops (``sweep.dry_run=true``)."""
    global _T0
    _T0 = time.perf_counter()
    _quiet_libraries()
    sys.unraisablehook = _unraisable
    if any(a in QUIET_FLAGS for a in sys.argv[1:]):
        sys.argv = [a for a in sys.argv if a not in QUIET_FLAGS]
        os.environ[QUIET_ENV] = "1"
        os.environ["TQDM_DISABLE"] = "1"
        sys.argv.append("hydra.job_logging.handlers.console.level=ERROR")
    if DRY_RUN_FLAG in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != DRY_RUN_FLAG] + ["sweep.dry_run=true"]
    app()


if __name__ == "__main__":
    main()
