"""Successive halving over a ragsweep space, with paired-statistics promotion.

Rung ``i`` runs every surviving system with ``<fidelity>=rungs[i]`` (by default
``dataset.limit``: 20 -> 60 -> 180 questions), through the configured launcher, as ordinary
child runs of the sweep's parent run. After each rung :func:`ragsweep.analysis.search.decide_rung` keeps
the systems that are neither significantly worse than another system of the rung (comparison with
the best over the questions every system of the rung scored: betting tests of the paired
differences on the objective's range from the metric registry, :func:`ragsweep.analysis.best.bounded_drop_p`,
valid at every n whatever their distribution; an objective without a known range drops none as
worse) nor ranked out (below ``ceil(keep * n)``). The sweep's ``alpha`` is spent across the rungs
planned to hold two systems or more (:func:`ragsweep.analysis.search.rung_alphas`; a last rung of
one system tests nothing and gets none), so the chance that a system whose true mean is the best
is dropped as worse anywhere in the sweep is at most ``alpha`` (Bonferroni over the rungs). Per-question values come back in each job's
return value (or, for a system a resumed sweep skipped, from its ``records.json``).

Every rung's decisions go to the parent run: the artifact ``rungs.json``, the tag
``ragsweep.rungs`` (one line: systems per rung and the winner) and ``ragsweep.analysis.search=halving``.
A promoted system re-uses the lower rung's work: its first questions' retrieval, prompts,
generations and judgements are cache hits (the cache is content-addressed), so a rung pays only
for its new questions.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any, List, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ragsweep.halving")


class HalvingSweeper(Sweeper):
    def __init__(self, params: Optional[dict] = None, fidelity: str = "dataset.limit", rungs: Sequence[int] = (20, 60, 180),
                 keep: float = 1 / 3, objective: Optional[str] = None, alpha: float = 0.05,
                 max_batch_size: Optional[int] = None) -> None:
        self.params = dict(params or {})
        self.fidelity = fidelity
        self.rungs = [int(r) for r in rungs]
        self.keep = float(keep)
        self.objective = objective
        self.alpha = float(alpha)
        self.max_batch_size = max_batch_size
        if not self.rungs or any(r < 1 for r in self.rungs):
            raise ValueError(f"hydra.sweeper.rungs ({self.rungs}) must be a non-empty list of positive {fidelity} values")
        if not 0 < self.keep <= 1:
            raise ValueError(f"hydra.sweeper.keep ({self.keep}) must be a fraction in (0, 1]")
        if not 0 < self.alpha < 1:
            raise ValueError(f"hydra.sweeper.alpha ({self.alpha}) must be in (0, 1): the sweep's chance of dropping a best system")
        #: each rung's share of the sweep's alpha, set when the sweep knows its systems (rung_alphas)
        self.rung_alpha_plan: list[float] = []
        self.config: Optional[DictConfig] = None
        self.launcher: Any = None
        self.hydra_context: Optional[HydraContext] = None
        self.job_idx = 0
        self.rung_log: list[dict[str, Any]] = []
        self.labels: dict[str, str] = {}

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context, task_function=task_function, config=config)

    # -- the space ------------------------------------------------------------------------------
    def systems(self, arguments: List[str]) -> list[list[str]]:
        """Every system of the space (params + command-line sweeps), the fidelity key left out."""
        from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

        params_conf = [f"{k}={v}" for k, v in self.params.items()] + list(arguments)
        parsed = OverridesParser.create().parse_overrides(params_conf)
        parsed = [o for o in parsed if o.get_key_element().lstrip("+~") != self.fidelity]
        (batch,) = BasicSweeper.split_arguments(parsed, None)
        systems = [list(x) for x in batch]
        # a system's label: only the overrides that differ between systems (the swept ones)
        varying = {i for i in range(len(systems[0]) if systems else 0) if len({s[i] for s in systems}) > 1}
        self.labels = {" ".join(s): " ".join(o for i, o in enumerate(s) if i in varying) or " ".join(s) for s in systems}
        return systems

    # -- sweep ----------------------------------------------------------------------------------
    def sweep(self, arguments: List[str]) -> Any:
        from ragsweep.analysis import search

        assert self.config is not None and self.launcher is not None
        objective = self.objective or search.objectives(self.config)[0]
        hib = search.higher_is_better(objective)
        self._ask_for_records()
        alive = self.systems(arguments)
        log.info("successive halving: %d systems, rungs %s=%s, keep %.2f, objective %s (%s)",
                 len(alive), self.fidelity, self.rungs, self.keep, objective, "max" if hib else "min")
        scale = search.objective_range(objective)
        self.rung_alpha_plan = self.rung_alphas(len(alive))
        returns_all = []
        for i, limit in enumerate(self.rungs):
            final = i == len(self.rungs) - 1
            batch = [[*ov, f"{self.fidelity}={limit}"] for ov in alive]
            rets = self._launch(batch)
            returns_all.append(rets)
            entries = [self._entry(ov, ret, objective) for ov, ret in zip(alive, rets)]
            keep_n = max(1, math.ceil(self.keep * len(entries)))
            alpha = self.rung_alpha_plan[i]
            decisions = search.decide_rung(entries, keep=keep_n, alpha=alpha, higher_is_better=hib, final=final,
                                           scale=scale)
            self.rung_log.append({"rung": i, "limit": limit, "fidelity": self.fidelity, "objective": objective,
                                  "keep": keep_n, "final": final, "alpha": alpha, "sweep_alpha": self.alpha, "scale": scale,
                                  "decisions": decisions})
            self._log_rungs()
            survivors = set(search.promoted(decisions))
            log.info("rung %d (%s=%d): %d systems -> %s", i, self.fidelity, limit, len(entries),
                     "final" if final else f"{len(survivors)} promoted")
            if final:
                break
            # (one system left still runs the remaining rungs: the full-fidelity figure)
            alive = [ov for ov in alive if self.labels.get(" ".join(ov), " ".join(ov)) in survivors]
        return returns_all

    def rung_alphas(self, systems: int) -> list[float]:
        """Each rung's share of ``alpha`` for a sweep of ``systems`` (:func:`ragsweep.analysis.search.rung_alphas`:
        only the rungs planned to hold two systems or more test, and they share it)."""
        from ragsweep.analysis import search

        return search.rung_alphas(systems, len(self.rungs), self.keep, self.alpha)

    def _launch(self, batch: list[list[str]]) -> list[Any]:
        size = self.max_batch_size or len(batch)
        out: list[Any] = []
        for start in range(0, len(batch), size):
            part = batch[start : start + size]
            self.validate_batch_is_legal(part)
            rets = self.launcher.launch(part, initial_job_idx=self.job_idx)
            self.job_idx += len(rets)
            out += list(rets)
        return out

    def _entry(self, overrides: list[str], ret: Any, objective: str) -> Any:
        from ragsweep.analysis import search

        system = self.labels.get(" ".join(overrides), " ".join(overrides))
        try:
            value = ret.return_value
        except Exception as exc:  # noqa: BLE001 - the job failed: Hydra re-raises its exception here
            log.warning("system %s failed: %s", system, exc)
            return search.Entry(system, None, error=f"{type(exc).__name__}: {exc}"[:500])
        if not isinstance(value, dict):
            return search.Entry(system, None, error=f"the job returned {type(value).__name__}, not the halving record")
        values = value.get("per_question")
        if values is None and value.get("run_id"):
            values = self._values_from_mlflow(value["run_id"], objective)
        return search.Entry(system, values, run_id=value.get("run_id"), cost=dict(value.get("cost") or {}))

    # -- MLflow ---------------------------------------------------------------------------------
    def _sweep_info(self) -> tuple[Path | None, dict[str, Any]]:
        from ragsweep.pipeline.sweep import ENV_SWEEP_FILE

        path = os.environ.get(ENV_SWEEP_FILE)
        if not path:
            path = str(Path(self.config.hydra.sweep.dir) / ".ragsweep_sweep.json")
        p = Path(path)
        try:
            return p, json.loads(p.read_text())
        except (OSError, ValueError):
            return None, {}

    def _ask_for_records(self) -> None:
        """Tell the jobs (through the sweep's shared state file) to return per-question values."""
        from ragsweep.analysis import search

        path, info = self._sweep_info()
        if path is None:
            raise RuntimeError("hydra/sweeper=ragsweep_halving needs ragsweep's sweep callback (hydra.callbacks.ragsweep)")
        info[search.RETURN_KEY] = search.RETURN_RECORDS
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=1))
        os.replace(tmp, path)

    def _client(self) -> Any:
        from ragsweep import tracking

        return tracking.client(tracking.resolve_tracking_uri(str(self.config.mlflow.tracking_uri)))

    def _values_from_mlflow(self, run_id: str, objective: str) -> dict[str, float] | None:
        from ragsweep.analysis import search
        from ragsweep import tracking

        found, doc = tracking.read_json_artifact(self._client(), run_id, "records.json")
        if not found:
            return None
        records = doc.get("results", doc) if isinstance(doc, dict) else doc
        return search.per_question(records, objective)

    def _log_rungs(self) -> None:
        from ragsweep.analysis import search

        _, info = self._sweep_info()
        parent = info.get("parent_run_id")
        if not parent or not self.config.mlflow.get("enabled", True):
            return
        cl = self._client()
        cl.log_text(parent, search.rungs_json(self.rung_log), "rungs.json")
        summary = " -> ".join(f"{len(r['decisions'])}@{r['limit']}" for r in self.rung_log)
        last = self.rung_log[-1]
        best = next((d.system for d in last["decisions"] if d.decision == "best"), None)
        if last["final"] and best:
            summary += f"; best: {best}"
        cl.set_tag(parent, "ragsweep.search", "halving")
        cl.set_tag(parent, "ragsweep.rungs", summary[:4900])
