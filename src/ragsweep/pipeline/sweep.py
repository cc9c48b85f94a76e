"""Sweeps: one MLflow parent run per multirun, one child per system, resumable, one shared server.

Hydra calls :class:`SweepCallback` in the process that launches the jobs. It

- creates (or, after a sweep was killed, reopens) the parent run; the parent is identified by a
  signature of the experiment, the command-line overrides and the sweeper's parameters, so
  starting the same sweep again resumes it: jobs whose system already has a FINISHED child are
  skipped, and nothing runs twice in MLflow. A sweep whose parent FINISHED starts a new parent
  when run again (all of its work then comes from the cache);
- starts the generator's model server once for the whole sweep when every job uses the same one
  (the generator is not swept), shares it with the jobs, and stops it at the end, on Ctrl-C or
  SIGTERM; a server left behind by a SIGKILLed sweep (its owner process gone, found in the
  server registry) is stopped first, so a restarted sweep never runs two;
- writes what the jobs need to ``<sweep dir>/.ragsweep_sweep.json`` (and the environment), which
  works for every launcher: basic, joblib, submitit (shared filesystem) and Ray.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.errors import RagsweepError
from ragsweep.store.cache import content_hash
from ragsweep.pipeline.config import server_spec  # noqa: F401 - the jobs' cli and tests reach it here too

log = logging.getLogger("ragsweep.sweep")

SWEEP_FILE = ".ragsweep_sweep.json"
ENV_SWEEP_FILE = "RAGSWEEP_SWEEP_FILE"
#: set by ``ragsweep.sweep`` (pipeline/api.py): the file the sweep writes its parent run, experiment and store to
RESULT_ENV = "RAGSWEEP_SWEEP_RESULT"


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) or OmegaConf.is_config(node) else node


def sweep_signature(config: DictConfig) -> str:
    """What identifies a sweep (its parent run): the experiment, the overrides and the sweeper's
    parameters; not what it may spend (``sweep.budget_usd``, ...), so that the same sweep run again
    with a higher budget resumes its parent run."""
    from ragsweep.pipeline.sweep_spend import spending

    hc = config.hydra
    params = _plain(hc.sweeper.get("params")) if "sweeper" in hc else None
    task = sorted(o for o in hc.overrides.task if not spending(o))
    return content_hash("sweep", config.get("experiment_name"), task, params)


def swept_keys(config: DictConfig) -> list[str]:
    """Config keys the sweep varies: from the command line (a,b,c) and hydra.sweeper.params."""
    keys = []
    for ov in config.hydra.overrides.task:
        key, _, value = ov.partition("=")
        if "," in value or value.startswith(("range(", "choice(", "glob(")):
            keys.append(key.lstrip("+~"))
    params = config.hydra.sweeper.get("params") if "sweeper" in config.hydra else None
    if params:
        keys += [str(k).lstrip("+~") for k in params.keys()]
    return sorted(set(keys))


def runs_remotely(config: DictConfig) -> bool:
    """True when the jobs run on other machines (SLURM, a Ray cluster): a server started here, on
    a login node's loopback, would be useless to them, so each job serves its own model."""
    launcher = config.hydra.get("launcher") or {}
    target = str(launcher.get("_target_", ""))
    if "Slurm" in target:
        return True
    ray_init = (launcher.get("ray") or {}).get("init") or {}
    return "ray" in target.lower() and ray_init.get("address") not in (None, "", "local")


def current() -> dict[str, Any] | None:
    """The running sweep's shared state, as seen from inside a job (None outside a sweep)."""
    path = os.environ.get(ENV_SWEEP_FILE)
    if not path:
        try:
            hc = HydraConfig.get()
        except ValueError:
            return None
        if hc.mode is None or str(hc.mode) != "RunMode.MULTIRUN":
            return None
        path = str(Path(hc.sweep.dir) / SWEEP_FILE)
    try:
        info = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    shared = info.get("server")
    if shared and shared.get("host") not in (None, socket.gethostname()):
        # the sweep's server listens on the launching machine's loopback: not reachable from a job
        # on another node (SLURM, a Ray cluster), which then serves its own model instead
        log.warning("the sweep's model server runs on %s, not on this node: this job starts its own", shared["host"])
        info["server"] = None
    return info


class AttachedServer:
    """A model server started by the sweep: jobs talk to it, never start or stop it."""

    def __init__(self, info: dict[str, Any], api_key: str | None = None):
        self.base_url = info["base_url"]
        self.base_urls = list(info.get("base_urls") or [self.base_url])  # llama.cpp: one per server process
        self.replicas = len(self.base_urls)
        self.slots = int(info.get("slots") or 1)  # llama-server: requests each process answers at once
        self.model_name = info["model_name"]
        self.context_window = info.get("context_window")
        self.kind = info.get("kind")
        self.model_path = info.get("model_path")
        self.resolved_model_path = info.get("model_path")
        self.model = info.get("model")
        self.spec = info.get("spec")
        self.served = info.get("served")
        self.cache_identity = info.get("cache_identity") or self.model_name
        self.structured_mode = info.get("structured_mode", "json_schema")
        env = info.get("api_key_env")  # the key the sweep's server requires, from the job's environment
        self.api_key = api_key if api_key is not None else (os.environ.get(env) or None if env else None)

    def start(self) -> "AttachedServer":
        return self

    def stop(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "base_url": self.base_url, "shared": True}


class SweepCallback(Callback):
    def __init__(self) -> None:
        self.tracker = None
        self.parent_run_id: str | None = None
        self.server = None
        self.sweep_file: Path | None = None
        self.estimate: dict[str, float] | None = None
        self.budget: dict[str, Any] | None = None
        self._ended = False

    def __getstate__(self) -> dict[str, Any]:
        # joblib, submitit and Ray pickle the Hydra context (callbacks included) to run jobs in
        # other processes; the sweep's own state (server, MLflow client) stays where it was made
        return {**self.__dict__, "tracker": None, "server": None, "_ended": True}

    # -- start -----------------------------------------------------------------------------
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from ragsweep.pipeline import spend, sweep_spend
        from ragsweep.pipeline.config import validate
        from ragsweep.tracking import Tracker

        validate(config)  # a bad base config stops the sweep before anything starts
        top = config
        mcfg = top.mlflow
        info: dict[str, Any] = {"experiment_name": top.experiment_name}
        keys = swept_keys(config)
        swept_generator = any(k == "generator" or k.startswith("generator.") for k in keys)
        try:  # Hydra turns a callback's exception into a warning and goes on: a stop here is an exit
            sweep_spend.check_keys(config, swept_generator)  # a refused API key stops the sweep before its first job
            if spend.dry_run(config):  # the estimate of every job, and nothing called, nothing logged
                sweep_spend.estimate(config, None)
                print("nothing was called and nothing logged (--dry-run)", flush=True)
                sys.exit(0)
        except RagsweepError as exc:
            print(f"ragsweep: error: {exc}", file=sys.stderr, flush=True)
            sys.exit(2)
        if mcfg.enabled:
            self.tracker = Tracker(mcfg.tracking_uri, mcfg.artifact_location, top.experiment_name)
            self.parent_run_id = self._open_parent(config)
            info["parent_run_id"] = self.parent_run_id
        from ragsweep.analysis.degenerate import check_sweep

        check_sweep(config, self.tracker)  # what each chunk-size / overlap / top-k point changes; never raises
        if not swept_generator and not runs_remotely(config) and config.generator.get("server") is not None:
            info["server"] = self._start_server(config)
        self.estimate = self._estimate(config)  # before any job calls a priced model
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        info["budget"] = self.budget = sweep_spend.budget(config, sweep_dir)
        self.sweep_file = sweep_dir / SWEEP_FILE
        tmp = self.sweep_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=1))
        os.replace(tmp, self.sweep_file)
        os.environ[ENV_SWEEP_FILE] = str(self.sweep_file.resolve())
        atexit.register(self._finish, "KILLED")

    def _estimate(self, config: DictConfig) -> dict[str, float] | None:
        """The whole sweep's estimate (printed, logged to the parent); a failure to make it leaves each
        job's own estimate, and never stops the sweep."""
        from ragsweep.pipeline import sweep_spend

        try:
            est = sweep_spend.estimate(config, self.tracker)
        except Exception as exc:  # noqa: BLE001 - the jobs still estimate themselves
            log.warning("no estimate of the whole sweep (%s: %s); each job prints its own", type(exc).__name__, exc)
            return None
        return est.metrics() if est is not None else None

    def _open_parent(self, config: DictConfig) -> str:
        from ragsweep.tracking import latest_parent

        tr = self.tracker
        sig = sweep_signature(config)
        found = latest_parent(tr.client, tr.experiment_id, sig)
        if found is not None and found.info.status != "FINISHED":
            log.info("resuming sweep: parent run %s (%s)", found.info.run_id, found.info.status)
            return tr.reopen(found.info.run_id)
        keys = swept_keys(config)
        name = f"sweep-{config.experiment_name}-{time.strftime('%Y%m%d-%H%M%S')}"
        run_id = tr.start(name, tags={"ragsweep.role": "parent", "ragsweep.experiment": config.experiment_name, "ragsweep.sweep_signature": sig})
        params = _plain(config.hydra.sweeper.get("params")) if "sweeper" in config.hydra else None
        tr.log_params({
            "swept": ",".join(keys) or "none",
            "overrides": " ".join(config.hydra.overrides.task),
            # the values in the order the sweep gives them (the report orders its rows and bars so)
            "sweeper_params": json.dumps(params or {}),
        })
        sweep_node = _plain(config.get("sweep")) or {}
        tr.log_json(sweep_node, "sweep.json")
        log.info("sweep parent run %s in experiment %s", run_id, config.experiment_name)
        return run_id

    def _start_server(self, config: DictConfig) -> dict[str, Any] | None:
        from hydra.utils import get_class, instantiate

        from ragsweep.rag.generator import server as srv

        node = config.generator.server
        if not issubclass(get_class(str(node.get("_target_"))), srv.ManagedServer):
            return None  # nothing to start: e.g. an external endpoint, which each job reaches itself
        spec = server_spec(node)

        stopped = srv.stop_orphans()  # e.g. the server of a sweep that was SIGKILLed
        if stopped:
            log.info("stopped %d model server(s) left behind by an interrupted run: pids %s", len(stopped), stopped)
        from ragsweep.rag.generator.servers.gpu import sweep_share

        # vLLM generator + vLLM judge: the generator leaves room on the GPU for each job's judge server;
        # None: their shares cannot fit side by side, so each job runs them one after the other
        share = sweep_share(config)
        if share is None:
            return None
        self.server = instantiate(node, **share)
        self.server.start()
        s = self.server
        return {
            "spec": spec,
            "base_url": s.base_url,
            "base_urls": list(getattr(s, "base_urls", None) or [s.base_url]),
            "model_name": s.model_name,
            "cache_identity": _plain(getattr(s, "cache_identity", None)),
            "structured_mode": getattr(s, "structured_mode", "json_schema"),
            "context_window": getattr(s, "context_window", None),
            "kind": getattr(s, "kind", None),
            "model_path": str(getattr(s, "resolved_model_path", "") or getattr(s, "model_path", "") or "") or None,
            "model": getattr(s, "model", None),
            "served": _plain(getattr(s, "served", None)),  # what answers (llama.cpp: format, CPU variant)
            "slots": getattr(s, "slots", 1),
            "pid": getattr(s, "pid", None),
            "host": socket.gethostname(),  # jobs on other nodes cannot reach its loopback address
            "api_key_env": getattr(s, "api_key_env", None),  # the variable's name (vLLM: VLLM_API_KEY), never the key
        }

    # -- end -------------------------------------------------------------------------------
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        table = line = None
        if self.tracker is not None and self.parent_run_id and not self._ended:
            from ragsweep.pipeline.summary import format_table
            from ragsweep.pipeline.sweep_spend import spent_line
            from ragsweep.tracking import children_rows

            shown = list((config.get("summary") or {}).get("metrics") or [])
            rows = children_rows(self.tracker, self.parent_run_id)
            table = format_table(rows, shown)
            from ragsweep.tracking.genai import VIEW_METRICS, runs_view

            # the runs table's view: the first headline metrics the systems have, with their intervals
            view = runs_view(self.tracker, [n for n in shown if any(n in r[2] for r in rows)][:VIEW_METRICS])
            if view:
                table += f"\nin the MLflow UI, side by side with their intervals: <server>/{view}"
            line, metrics = spent_line(rows, self.estimate, self.budget)  # spent beside the estimate
            if self.server is not None and hasattr(self.server, "restart_count"):
                # the sweep's server: processes restarted after they died, for every job together
                metrics = {**(metrics or {}), "generator/server_restarts": self.server.restart_count()}
            if metrics:
                self.tracker.log_metrics(metrics)
        self._finish(None)
        if os.environ.get(RESULT_ENV):  # ragsweep.sweep from Python: which parent run this sweep was
            Path(os.environ[RESULT_ENV]).write_text(json.dumps({
                "parent_run_id": self.parent_run_id, "experiment": config.experiment_name,
                "tracking_uri": config.mlflow.tracking_uri if config.mlflow.enabled else None}), encoding="utf-8")
        if table:
            print(f"\nsweep {self.parent_run_id} in experiment {config.experiment_name!r}:\n{table}", flush=True)
        if line:
            print(line, flush=True)

    def _finish(self, status: str | None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            if self.server is not None:
                self.server.stop()
        finally:
            if self.tracker is not None and self.parent_run_id:
                if status is None:
                    status = self._children_status()
                if status == "KILLED":  # children the budget stopped (the others finished)
                    from ragsweep.pipeline.spend import BUDGET_REACHED, STATUS_TAG

                    self.tracker.set_tags({STATUS_TAG: BUDGET_REACHED})
                self.tracker.end(status)
            if self.sweep_file is not None:
                os.environ.pop(ENV_SWEEP_FILE, None)
            ray = sys.modules.get("ray")  # the Ray launcher starts a local instance and leaves it up
            if ray is not None and getattr(ray, "is_initialized", lambda: False)():
                ray.shutdown()

    def _children_status(self) -> str:
        from ragsweep.tracking import children_status

        return children_status(self.tracker, self.parent_run_id)

