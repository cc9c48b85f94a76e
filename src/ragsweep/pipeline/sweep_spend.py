"""Money across a sweep (docs/hosted.md): what :class:`ragsweep.pipeline.sweep.SweepCallback` does
before the first job and after the last.

- **the keys, once**: the readiness probe of the external generator and judge of the sweep's
  config, so a bad key stops the sweep before its first job (each job probes again, cheaply);
- **the estimate of the whole sweep**, before any job calls a priced model: the systems are
  the basic sweeper's jobs (command-line lists and ``hydra.sweeper.params``), each composed as its
  job will be and run through the stages that cost nothing (load, chunk, index, retrieve, prompts:
  all cached, so the jobs then find them done); one :func:`ragsweep.analysis.estimate.estimate`
  over them all, in the order they run, so the work two systems share is counted once. Printed,
  logged to the parent run (``estimate.json``, ``estimate/*``); ``sweep.dry_run`` stops here;
- **the sweep's budget** (``sweep.budget_usd``): a file in the sweep's directory that every job's
  calls draw on (:class:`ragsweep.rag.generator.budget.SharedBudget`);
- **at the end**: what the sweep spent (its children's ``cost/usd``) beside its estimate.

A sweeper that chooses its systems as it goes (Optuna, the halving sweeper) has no list of jobs to
estimate up front: each job prints and logs its own estimate instead, and ``sweep.dry_run`` is an
error there.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ragsweep.errors import ConfigError
from ragsweep.pipeline import spend

log = logging.getLogger("ragsweep.sweep")

BASIC = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
BUDGET_FILE = ".ragsweep_budget.json"
#: overrides that say how much a command may spend, not which systems it runs (not in the sweep's signature)
SPENDING_KEYS = ("budget_usd", "sweep.budget_usd", "sweep.dry_run")


def spending(override: str) -> bool:
    key = override.partition("=")[0].lstrip("+~")
    return key in SPENDING_KEYS or key.startswith("estimate.")


def job_overrides(config: DictConfig) -> list[list[str]] | None:
    """The override list of every job, as the basic sweeper will launch them; None for another sweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = config.hydra.get("sweeper") or {}
    if str(sweeper.get("_target_", "")) != BASIC:
        return None
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    batches = BasicSweeper.split_arguments(parser.parse_overrides(params + list(config.hydra.overrides.task)), None)
    return [list(job) for batch in batches for job in batch]


def job_configs(config: DictConfig) -> list[DictConfig] | None:
    from hydra.core.global_hydra import GlobalHydra

    jobs = job_overrides(config)
    if jobs is None:
        return None
    loader = GlobalHydra.instance().config_loader()
    return [loader.load_sweep_config(config, overrides) for overrides in jobs]


def check_keys(config: DictConfig, swept_generator: bool) -> None:
    """The readiness probe once for the sweep (not in a dry run)."""
    from hydra.utils import instantiate

    if spend.dry_run(config):
        return
    server = None
    if not swept_generator and config.generator.get("server") is not None:
        server = instantiate(config.generator.server)
    spend.probe_endpoints(config, server)


def _works(configs: list[DictConfig]) -> list[Any]:
    """Each job's work, from the stages that cost nothing (their results cached for the jobs)."""
    from hydra.utils import instantiate

    from ragsweep.pipeline import retrieval_only, stages
    from ragsweep.pipeline.config import validate
    from ragsweep.pipeline.summary import Stages
    from ragsweep.store.cache import content_hash
    from ragsweep.tracking import Tracker, system_name

    datasets: dict[str, Any] = {}
    works = []
    for cfg in configs:
        if retrieval_only.enabled(cfg):
            continue  # generator=none: nothing generated, nothing to price here
        top = validate(cfg)["top"]
        key = content_hash("dataset", OmegaConf.to_container(cfg.dataset, resolve=True))
        if key not in datasets:
            datasets[key] = instantiate(cfg.dataset).load()
        dataset = datasets[key]
        job = stages.Job.open(cfg, top, Stages(), Tracker("", "", "", enabled=False), None)
        job.dry_run = True  # builds requests only: nothing is sent
        chunks = stages.chunk(job, dataset)
        retrieval = stages.retrieve(job, stages.index(job, chunks), dataset, chunks)
        prompts = stages.prompts(job, dataset, retrieval)
        works.append(spend.work(job, dataset, prompts, name=top.run_name or system_name(cfg)))
        job.cache.close()
    return works


def estimate(config: DictConfig, tracker: Any) -> Any:
    """The whole sweep's estimate, printed and logged to the parent run; None where nothing is priced
    and no dry run was asked, or the sweeper chooses its systems as it goes."""
    from ragsweep.analysis.estimate import estimate as make
    from ragsweep.pipeline.config import validate
    from ragsweep.store.cache import Cache

    dry = spend.dry_run(config)
    if not (spend.priced(config) or dry):
        return None
    configs = job_configs(config)
    if configs is None:
        if dry:
            raise ConfigError("sweep.dry_run: this sweeper chooses its systems as it goes, so there is no list of "
                              "them to estimate; use the basic sweeper (a,b,c lists) or run one system with --dry-run")
        log.info("this sweeper chooses its systems as it goes: each job prints and logs its own estimate")
        return None
    top = validate(config)["top"]
    est = make(_works(configs), Cache(top.cache_dir), spend.stated(top))
    print("\n".join(["sweep " + line if i == 0 else line for i, line in enumerate(est.lines())]), flush=True)
    if tracker is not None:
        tracker.log_json(est.to_json(), "estimate.json")
        tracker.log_metrics(est.metrics())
    return est


def budget(config: DictConfig, sweep_dir: Path) -> dict[str, Any] | None:
    """The sweep's shared budget file (``sweep.budget_usd``), for the jobs to find in the sweep file."""
    from ragsweep.rag.generator.budget import SharedBudget

    limit = (config.get("sweep") or {}).get("budget_usd")
    if limit is None:
        return None
    path = sweep_dir / BUDGET_FILE
    path.unlink(missing_ok=True)  # a new command starts from nothing spent (its budget is what it may spend)
    SharedBudget(path, float(limit))
    return {"path": str(path), "limit": float(limit)}


def spent_line(rows: list[tuple[str, str, dict[str, float]]], est_metrics: dict[str, float] | None,
               budget_info: dict[str, Any] | None) -> tuple[str | None, dict[str, float]]:
    """The sweep's end: USD its children spent beside the estimate (and the budget); parent metrics."""
    usd = [m["cost/usd"] for _, _, m in rows if "cost/usd" in m]
    if not usd:
        return None, {}
    total = sum(usd)
    line = f"sweep cost: ${total:.4f} spent by {len(usd)} run(s)"
    if est_metrics:
        line += (f"; estimated ${est_metrics['estimate/usd']:.4f}, range ${est_metrics['estimate/usd_low']:.4f} .. "
                 f"${est_metrics['estimate/usd_high']:.4f}")
    if budget_info:
        line += f"; sweep.budget_usd={budget_info['limit']:g}"
    return line, {"cost/usd": round(total, 6)}


__all__ = ["budget", "check_keys", "estimate", "job_configs", "job_overrides", "spending", "spent_line"]
