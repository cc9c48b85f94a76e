"""Searching the space instead of gridding it: objectives, what a job returns, rung decisions.

- An experiment declares its objective(s) under ``sweep.objectives`` (default
  ``[ragchecker/overall/f1]``); each metric's direction comes from the metric registry
  (``higher_is_better``), ``cost/*`` metrics are minimised.
- :func:`job_return` is what ``ragsweep`` returns from a job: the objective value (one objective)
  or the list of them (several) for ``hydra/sweeper=optuna``; under ``hydra/sweeper=ragsweep_halving``
  (which asks for it through the sweep's shared state) a mapping with the run id, the objective
  values, the per-question values of the first objective and the run's ``cost/*`` metrics.
- :class:`SearchCallback` (hydra.callbacks.ragsweep_search in config.yaml's experiment or on the
  command line) sets ``hydra/sweeper=optuna``'s direction(s) from the objectives, and NSGA-II
  for several objectives, unless the command line sets them.
- :func:`decide_rung`: successive-halving promotion with paired statistics: a system is dropped
  when it is significantly worse than the rung's best (paired sign-flip test, Holm-adjusted
  within the rung) or ranked out (below the best ``keep`` fraction); every other system is
  promoted.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

log = logging.getLogger("ragsweep.search")

DEFAULT_OBJECTIVE = "ragchecker/overall/f1"
#: the sweep-file key the halving sweeper sets to get per-question values back from each job
RETURN_KEY = "job_return"
RETURN_RECORDS = "records"


def _plain(node: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def objectives(cfg: Any) -> list[str]:
    """``sweep.objectives`` (a name or a list), else the default objective."""
    sweep = (cfg.get("sweep") if hasattr(cfg, "get") else None) or {}
    found = _plain(sweep.get("objectives") if hasattr(sweep, "get") else None)
    if not found:
        return [DEFAULT_OBJECTIVE]
    return [str(found)] if isinstance(found, str) else [str(x) for x in found]


def higher_is_better(name: str) -> bool:
    """A metric's direction: the registry's; ``cost/*`` and unknown counts lower; else higher."""
    if name.startswith("cost/") or name.startswith("time/"):
        return False
    from ragsweep.metrics import registry

    m = registry.find(name)
    return True if m is None or m.higher_is_better is None else bool(m.higher_is_better)


def direction(name: str) -> str:
    return "maximize" if higher_is_better(name) else "minimize"


def _usable(rec: Mapping[str, Any]) -> bool:
    return "error" not in rec and not rec.get("failure")


def per_question(records: Iterable[Mapping[str, Any]], name: str) -> dict[str, float]:
    """``{query_id: value}`` of metric ``name`` over the scored records (failed work left out;
    NaN where the metric is undefined). Read from ``rec["metrics"]`` when there, else computed
    by the metric registry's per-question function."""
    from ragsweep.metrics import registry

    metric = registry.find(name)
    out: dict[str, float] = {}
    for rec in records:
        if not _usable(rec):
            continue
        value = (rec.get("metrics") or {}).get(name)
        if value is None and metric is not None and metric.per_question is not None:
            try:
                value = metric.per_question(dict(rec))
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                value = None
        try:
            out[str(rec["query_id"])] = float(value) if value is not None else float("nan")
        except (TypeError, ValueError):
            out[str(rec["query_id"])] = float("nan")
    return out


def job_return(metrics: Mapping[str, Any], cfg: Any, info: Mapping[str, Any] | None = None) -> Any:
    """What a ``ragsweep`` job returns to its sweeper (see the module docstring)."""
    names = objectives(cfg)
    cost = {k: v for k, v in metrics.items() if k.startswith("cost/")}
    if not cost:  # a pipeline that does not log cost/* yet: computed here from what it logs
        from ragsweep.cost import run_cost

        cost = run_cost(metrics, cfg)
    values = [metrics.get(n, cost.get(n)) for n in names]
    if info and info.get(RETURN_KEY) == RETURN_RECORDS:
        records = getattr(metrics, "records", None)
        return {
            "run_id": getattr(metrics, "run_id", None),
            "objectives": dict(zip(names, values)),
            "per_question": per_question(records, names[0]) if records else None,
            "cost": cost,
            "cache": {k: v for k, v in metrics.items() if k.startswith("cache/") or k == "generator/cache_hits"},
        }
    if len(names) == 1:
        return values[0]
    return values


# -- optuna's directions from the objectives --------------------------------------------------
try:
    from hydra.experimental.callback import Callback as _Callback
except ImportError:  # pragma: no cover
    _Callback = object  # type: ignore[misc,assignment]


class SearchCallback(_Callback):
    """Before ``hydra/sweeper=optuna`` is built: its direction(s) from ``sweep.objectives``, and
    NSGA-II for several objectives, unless the command line set them."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from omegaconf import open_dict, read_write

        sweeper = config.hydra.get("sweeper") or {}
        if "optuna" not in str(sweeper.get("_target_", "")).lower():
            return
        given = " ".join(str(o) for o in config.hydra.overrides.hydra)
        names = objectives(config)
        with read_write(config.hydra), open_dict(config.hydra):
            if "hydra.sweeper.direction" not in given:
                dirs = [direction(n) for n in names]
                config.hydra.sweeper.direction = dirs[0] if len(dirs) == 1 else dirs
            if len(names) > 1 and "hydra/sweeper/sampler" not in given and "TPESampler" in str(sweeper.sampler.get("_target_", "")):
                from hydra_plugins.hydra_optuna_sweeper.config import NSGAIISamplerConfig
                from omegaconf import OmegaConf

                config.hydra.sweeper.sampler = OmegaConf.structured(NSGAIISamplerConfig(seed=sweeper.sampler.get("seed")))
        log.info("optuna: objectives %s, direction %s", names, _plain(config.hydra.sweeper.direction))


# -- successive halving: one rung's decision ---------------------------------------------------
@dataclass
class Entry:
    """One system at one rung, as the decision sees it."""

    system: str  # the overrides that name it, e.g. "retriever=bm25 retriever.top_k=2"
    values: dict[str, float] | None  # per-question values of the objective (None: the job failed)
    run_id: str | None = None
    cost: dict[str, float] = field(default_factory=dict)
    error: str | None = None


@dataclass
class Decision:
    system: str
    run_id: str | None
    mean: float
    n: int
    rank: int | None
    diff_vs_best: float | None
    p: float | None
    p_holm: float | None
    decision: str  # best | promoted | tied | dropped:worse | dropped:ranked_out | dropped:failed
    cost: dict[str, float] = field(default_factory=dict)


def _mean(values: Mapping[str, float]) -> float:
    xs = [v for v in values.values() if v is not None and math.isfinite(v)]
    return sum(xs) / len(xs) if xs else float("nan")


def decide_rung(entries: Sequence[Entry], *, keep: int, alpha: float = 0.05, higher_is_better: bool = True,
                final: bool = False) -> list[Decision]:
    """Rank the rung's systems by mean objective; test each against the best (paired, Holm within
    the rung). Not final: the best and every system ranked within ``keep`` that is not
    significantly worse are promoted. Final: the best and the systems tied with it (not
    significantly different after Holm) are marked ``best`` / ``tied``."""
    from ragsweep.stats import holm, paired

    ok = [e for e in entries if e.values is not None and math.isfinite(_mean(e.values))]
    failed = [e for e in entries if e not in ok]
    sign = 1.0 if higher_is_better else -1.0
    ranked = sorted(ok, key=lambda e: (-sign * _mean(e.values), e.system))
    out: list[Decision] = []
    if ranked:
        best = ranked[0]
        tests = [paired(best.values, e.values) for e in ranked[1:]]
        adj = holm([t.p for t in tests])
        out.append(Decision(best.system, best.run_id, _mean(best.values), len(best.values), 1, 0.0, None, None, "best", best.cost))
        for e, t, ph in zip(ranked[1:], tests, adj):
            # competition ranking: systems with the same mean share a rank, so a tie at the
            # cut-off is never broken by the systems' names
            rank = 1 + sum(1 for o in ranked if sign * _mean(o.values) > sign * _mean(e.values) + 1e-12)
            worse = math.isfinite(ph) and ph < alpha and sign * t.diff < 0
            if final:
                what = "dropped:worse" if worse else "tied"
            elif worse:
                what = "dropped:worse"
            elif rank > keep:
                what = "dropped:ranked_out"
            else:
                what = "promoted"
            out.append(Decision(e.system, e.run_id, _mean(e.values), t.n, rank, t.diff, t.p, ph, what, e.cost))
    for e in failed:
        out.append(Decision(e.system, e.run_id, float("nan"), 0, None, None, None, None, "dropped:failed", e.cost))
    return out


def promoted(decisions: Sequence[Decision]) -> list[str]:
    return [d.system for d in decisions if d.decision in ("best", "promoted")]


def rungs_json(rungs: Sequence[Mapping[str, Any]]) -> str:
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean([dict(r, decisions=[asdict(d) if isinstance(d, Decision) else d for d in r["decisions"]]) for r in rungs]), indent=1)


def rungs_markdown(rungs: Sequence[Mapping[str, Any]]) -> str:
    """The rung decisions as a markdown section (what the report shows)."""
    if not rungs:
        return ""
    head = rungs[0]
    lines = [f"## Successive halving on `{head.get('fidelity', 'dataset.limit')}` (objective `{head.get('objective')}`)", ""]
    for r in rungs:
        ds = r["decisions"]
        get = (lambda d, k: d[k]) if ds and isinstance(ds[0], dict) else (lambda d, k: getattr(d, k))
        kept = sum(1 for d in ds if get(d, "decision") in ("best", "promoted", "tied"))
        lines += [f"### Rung {r['rung']}: {r['limit']} questions, {len(ds)} systems, {kept} kept"
                  + (" (final)" if r.get("final") else f" (keep at most {r.get('keep')})"), "",
                  "| rank | system | mean | n | diff vs best | p (Holm) | decision |", "|---|---|---|---|---|---|---|"]
        for d in ds:
            f = lambda x, nd=3: "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"  # noqa: E731
            lines.append(f"| {get(d, 'rank') or '-'} | {get(d, 'system')} | {f(get(d, 'mean'))} | {get(d, 'n')} | "
                         f"{f(get(d, 'diff_vs_best'))} | {f(get(d, 'p_holm'))} | {get(d, 'decision')} |")
        lines.append("")
    return "\n".join(lines)
