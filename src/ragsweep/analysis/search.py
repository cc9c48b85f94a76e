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
- :func:`decide_rung`: successive-halving promotion with paired statistics: the systems are ranked
  by their means over the questions they all scored; a system is dropped when some other system is
  shown better (comparison with the best by betting tests of the paired differences on the
  objective's known range, :func:`ragsweep.analysis.best.bounded_drop_p`: valid at every n whatever
  the distribution of the differences; an objective without a known range drops no system as
  worse) or ranked out (below the best ``keep`` fraction); every other system is promoted. The
  halving sweeper spends its ``alpha`` across the rungs that test (:func:`rung_alphas`: a rung
  planned to hold one system gets none), so the level holds for the sweep.
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


def objective_range(name: str) -> float | None:
    """The objective's values' range ``[0, scale]`` from the metric registry; None for a metric it
    does not know or gives no finite scale (``cost/*``, ``time/*``, counts): no system is then
    dropped as worse (no test of a mean is valid at small n without a known range)."""
    from ragsweep.judge.metrics import registry

    m = registry.find(name)
    if m is None or not (math.isfinite(float(m.scale)) and float(m.scale) > 0):
        return None
    return float(m.scale)


def rung_alphas(systems: int, rungs: int, keep: float, alpha: float) -> list[float]:
    """Each rung's share of the sweep's ``alpha``: rung sizes planned as ``systems``, then
    ``max(1, ceil(keep * size))``; the rungs planned to hold two systems or more (the ones that
    test) share ``alpha`` equally (Bonferroni), a rung planned to hold one gets 0 (it has nothing
    to compare; should ties at a cut-off bring it a second system, that one is "tied", never
    dropped). 16 systems, keep 1/3, three rungs: 16 / 6 / 2, alpha / 3 each; 4 systems: 4 / 2 / 1,
    alpha / 2, alpha / 2, 0."""
    sizes, n = [], max(1, int(systems))
    for _ in range(rungs):
        sizes.append(n)
        n = max(1, math.ceil(keep * n))
    testing = sum(1 for x in sizes if x >= 2)
    return [alpha / testing if x >= 2 else 0.0 for x in sizes] if testing else [0.0] * rungs


def higher_is_better(name: str) -> bool:
    """A metric's direction: the registry's; ``cost/*`` and unknown counts lower; else higher."""
    if name.startswith("cost/") or name.startswith("time/"):
        return False
    from ragsweep.judge.metrics import registry

    m = registry.find(name)
    return True if m is None or m.higher_is_better is None else bool(m.higher_is_better)


def direction(name: str) -> str:
    return "maximize" if higher_is_better(name) else "minimize"


def _voided(rec: Mapping[str, Any], metric: Any, name: str) -> bool:
    """Whether a failure voids metric ``name`` for this record: a failed generation voids every
    metric that reads the answer (retrieval metrics still count: retrieval did not fail); a failed
    judge voids only the metrics that need the judge, and those are undefined (NaN) by their own
    reading of the judge's missing output - baselines against the ground truth and retrieval
    metrics still count. The same rule as the run's ledger (:mod:`ragsweep.judge.ledger`)."""
    from ragsweep.judge import ledger

    family = getattr(metric, "family", None) or name.split("/", 1)[0]
    return ledger.excluded(rec, family)


def per_question(records: Iterable[Mapping[str, Any]], name: str) -> dict[str, float]:
    """``{query_id: value}`` of metric ``name`` over the records (NaN where the metric is undefined;
    a record whose failed stage voids the metric, see :func:`_voided`, left out). Read from ``rec["metrics"]`` when
    there, else computed by the metric registry's per-question function."""
    from ragsweep.judge.metrics import registry

    metric = registry.find(name)
    out: dict[str, float] = {}
    for rec in records:
        if _voided(rec, metric, name):  # left out, as a question the run never scored
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
        from ragsweep.analysis.cost import run_cost

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
    mean: float  # over the questions every compared system scored (its own questions when none are shared)
    n: int  # those questions (finite values only)
    rank: int | None
    diff_vs_best: float | None
    p: float | None  # paired sign-flip p against the best (for reading; not what decides)
    p_adj: float | None  # comparison-with-the-best p (:func:`ragsweep.analysis.best.bounded_drop_p`): what decides
    decision: str  # best | promoted | tied | dropped:worse | dropped:ranked_out | dropped:failed
    cost: dict[str, float] = field(default_factory=dict)


def _mean(values: Mapping[str, float]) -> float:
    xs = [v for v in values.values() if v is not None and math.isfinite(v)]
    return sum(xs) / len(xs) if xs else float("nan")


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(float(v))


def shared_questions(entries: Sequence[Entry]) -> list[str]:
    """The questions every entry scored (finite value), in the first entry's order."""
    if not entries:
        return []
    first = entries[0].values or {}
    return [q for q, v in first.items() if _finite(v) and all(_finite((e.values or {}).get(q)) for e in entries[1:])]


def decide_rung(entries: Sequence[Entry], *, keep: int, alpha: float = 0.05, higher_is_better: bool = True,
                final: bool = False, scale: float | None = None, resamples: int | None = None,
                seed: int = 0) -> list[Decision]:
    """Rank the rung's systems by their mean over the questions they all scored, and compare each
    with the others by :func:`ragsweep.analysis.best.bounded_drop_p` on the objective's range
    ``[0, scale]`` (a system whose true mean is the largest is dropped with probability at most
    ``alpha``, at every n, whatever the other systems' means and the distribution of the
    differences). Not final: the best and every system ranked within ``keep`` that is not
    significantly worse are promoted. Final: the best and the systems not significantly worse are
    marked ``best`` / ``tied``. No system is dropped as worse (p None) without a question every
    system scored, without a known range (``scale`` None), with a value outside it, or with no
    ``alpha`` for this rung. ``alpha`` is this rung's share of the sweep's level (:func:`rung_alphas`).
    ``resamples`` and ``seed``: unused (the sign-flip test they tuned is no longer what decides)."""
    import numpy as np

    from ragsweep.analysis import bounded, stats
    from ragsweep.analysis import best as mcb

    ok = [e for e in entries if e.values is not None and math.isfinite(_mean(e.values))]
    failed = [e for e in entries if e not in ok]
    sign = 1.0 if higher_is_better else -1.0
    qs = shared_questions(ok)
    if qs:
        mat = np.asarray([[float(e.values[q]) for q in qs] for e in ok])  # type: ignore[index]
        means = {e.system: float(row.mean()) for e, row in zip(ok, mat)}
        p_best = np.full(len(ok), np.nan)
        if len(ok) > 1 and scale is not None and alpha > 0:
            try:
                p_best = mcb.bounded_drop_p(sign * mat, scale, alpha=alpha)
            except bounded.RangeError as exc:  # a value outside the stated range: no valid test
                log.warning("halving: no system dropped as worse: %s", exc)
        p_adj = {e.system: float(p) for e, p in zip(ok, p_best)}
        n_of = {e.system: len(qs) for e in ok}
    else:  # nothing shared: no paired comparison is possible
        means = {e.system: _mean(e.values) for e in ok}  # type: ignore[arg-type]
        p_adj = {e.system: float("nan") for e in ok}
        n_of = {e.system: sum(1 for v in e.values.values() if _finite(v)) for e in ok}  # type: ignore[union-attr]
    ranked = sorted(ok, key=lambda e: (-sign * means[e.system], e.system))
    out: list[Decision] = []
    if ranked:
        best = ranked[0]
        best_row = [float(best.values[q]) for q in qs]  # type: ignore[index]
        out.append(Decision(best.system, best.run_id, means[best.system], n_of[best.system], 1, 0.0, None, None, "best",
                            best.cost))
        for e in ranked[1:]:
            raw = stats.sign_flip_p([float(e.values[q]) - b for q, b in zip(qs, best_row)])[0] if qs else None  # type: ignore[index]
            # competition ranking: systems with the same mean share a rank, so a tie at the
            # cut-off is never broken by the systems' names
            rank = 1 + sum(1 for o in ranked if sign * means[o.system] > sign * means[e.system] + 1e-12)
            pa = p_adj[e.system]
            worse = math.isfinite(pa) and pa < alpha
            if final:
                what = "dropped:worse" if worse else "tied"
            elif worse:
                what = "dropped:worse"
            elif rank > keep:
                what = "dropped:ranked_out"
            else:
                what = "promoted"
            out.append(Decision(e.system, e.run_id, means[e.system], n_of[e.system], rank,
                                means[e.system] - means[best.system] if qs else None,
                                raw, pa if math.isfinite(pa) else None, what, e.cost))
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

        def p_adj(d: Any) -> Any:  # rungs.json written before comparison with the best held "p_holm"
            return d.get("p_adj", d.get("p_holm")) if isinstance(d, dict) else d.p_adj
        kept = sum(1 for d in ds if get(d, "decision") in ("best", "promoted", "tied"))
        level = f"; worse at p < {r['alpha']:.3g}" + (f" (the sweep's {r['sweep_alpha']:.3g} over its rungs that test)"
                                                       if r.get("sweep_alpha") else "") if r.get("alpha") else ""
        if "scale" in r and r.get("scale") is None:
            level = "; worse: not testable (the objective has no known range), ranked only"
        elif "alpha" in r and not r.get("alpha"):
            level = "; worse: not tested (a rung planned to hold one system has no share of alpha)"
        lines += [f"### Rung {r['rung']}: {r['limit']} questions, {len(ds)} systems, {kept} kept"
                  + (" (final" if r.get("final") else f" (keep at most {r.get('keep')}") + level + ")", "",
                  "| rank | system | mean | n | diff vs best | p (vs best, MCB) | decision |", "|---|---|---|---|---|---|---|"]
        for d in ds:
            f = lambda x, nd=3: "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{nd}f}"  # noqa: E731
            lines.append(f"| {get(d, 'rank') or '-'} | {get(d, 'system')} | {f(get(d, 'mean'))} | {get(d, 'n')} | "
                         f"{f(get(d, 'diff_vs_best'))} | {f(p_adj(d))} | {get(d, 'decision')} |")
        lines.append("")
    return "\n".join(lines)
