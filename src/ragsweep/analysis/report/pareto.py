"""Quality against cost: the Pareto front of a sweep, with intervals, and the systems tied with the best.

- quality: the objective's per-question values from each child's records (``records.json``),
  mean and bootstrap interval (:func:`ragsweep.analysis.stats.interval`); a run without records falls
  back to its logged aggregate (no interval);
- cost: the run's logged cost metric (``cost/*``; computed by :func:`ragsweep.analysis.cost.run_cost`
  from the run's other metrics when it was not logged). Cost is as logged: work the sweep's cache
  served made no call and cost nothing;
- the front: systems no other system beats on both (quality at least as good and cost no higher,
  one strictly);
- the tie set: the best system (by mean quality over the questions every compared system scored)
  and every system that comparison with the best (:func:`ragsweep.analysis.best.bounded_drop_p`:
  betting tests of the paired differences on the objective's range from the metric registry) does
  not find worse at alpha: a system whose true mean is the largest is called worse with probability
  at most alpha, at every n, whatever the distribution of the differences (the rule halving uses at
  each rung). An objective without a known range has no tie set: not testable.

When the children ran different numbers of questions (a successive-halving sweep: one child per
rung), only those at the largest ``dataset.limit`` are compared: the final rung.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

ALPHA = 0.05


@dataclass
class Point:
    run_id: str
    label: str
    mean: float
    low: float
    high: float
    n: int
    cost: float
    values: dict[str, float] | None
    on_front: bool = False
    tied: bool = False
    best: bool = False
    p_adj: float | None = None  # comparison-with-the-best p (analysis.best.bounded_drop_p)


def _metrics(run: Any) -> dict[str, float]:
    return dict(getattr(getattr(run, "data", None), "metrics", {}) or {})


def _params(run: Any) -> dict[str, str]:
    return dict(getattr(getattr(run, "data", None), "params", {}) or {})


def _labels(children: Sequence[Any]) -> dict[str, str]:
    """A label per run: the short params that differ between the runs, then the logged keys that
    tell apart runs the short params cannot (``model_format=q8_0``, as the report's tables do;
    ``frame.distinguishing_keys``); the run name otherwise."""
    from ragsweep.analysis.report.frame import distinguishing_keys
    from ragsweep.analysis.report.paired import key_label
    from ragsweep.tracking import SHORT_PARAMS

    params = {c.info.run_id: _params(c) for c in children}
    varying = [p for p in SHORT_PARAMS if p != "limit" and len({ps.get(p) for ps in params.values()}) > 1]
    extra = [k for k in distinguishing_keys(children) if k != "dataset.limit"]  # rungs: the note names them
    out = {}
    for c in children:
        ps = params[c.info.run_id]
        bits = [f"{p}={ps.get(p)}" for p in varying] + [key_label(k, ps.get(k)) for k in extra]
        out[c.info.run_id] = " ".join(bits) or (c.info.run_name or c.info.run_id[:8])
    return out


def _cost(run: Any, cost: str) -> float:
    m = _metrics(run)
    if cost in m:
        return float(m[cost])
    from ragsweep.analysis.cost import run_cost

    return float(run_cost(m, {}).get(cost, float("nan")))


def points(children: Sequence[Any], records_by_run: Mapping[str, Sequence[Mapping[str, Any]]], objective: str, cost: str,
           higher_is_better: bool = True, alpha: float = ALPHA) -> tuple[list[Point], str]:
    """The compared systems with their front / tie flags, and a note on what was compared."""
    from ragsweep.analysis.search import per_question
    from ragsweep.analysis.stats import interval

    note = ""
    limits = {_params(c).get("dataset.limit") for c in children}
    if len(limits) > 1:
        def as_int(v: Any) -> float:
            try:
                return float(v)
            except (TypeError, ValueError):
                return math.inf  # null: every question
        top = max(limits, key=as_int)
        children = [c for c in children if _params(c).get("dataset.limit") == top]
        note = f"children ran different dataset.limit values; compared: the {len(children)} at dataset.limit={top}"
    labels = _labels(children)
    pts: list[Point] = []
    for c in children:
        rid = c.info.run_id
        recs = records_by_run.get(rid)
        values = per_question(recs, objective) if recs else None
        if values:
            iv = interval(values.values())
            mean, low, high, n = iv.mean, iv.low, iv.high, iv.n
        else:
            mean = float(_metrics(c).get(objective, float("nan")))
            low = high = float("nan")
            n = 0
            values = None
        if not math.isfinite(mean):
            continue
        pts.append(Point(rid, labels[rid], mean, low, high, n, _cost(c, cost), values))
    if not pts:
        return pts, note
    sign = 1.0 if higher_is_better else -1.0
    for p in pts:  # the front: nothing at least as good and no dearer, one of them strictly
        p.on_front = math.isfinite(p.cost) and not any(
            q is not p and math.isfinite(q.cost) and sign * q.mean >= sign * p.mean and q.cost <= p.cost
            and (sign * q.mean > sign * p.mean or q.cost < p.cost) for q in pts)
    from ragsweep.analysis.search import objective_range

    _tie_set(pts, sign, alpha, objective_range(objective))
    return pts, note


def _tie_set(pts: list[Point], sign: float, alpha: float, scale: float | None = None) -> None:
    """Mark the best system and the systems tied with it. With per-question values for every
    system and a known range ``[0, scale]``, the best is the highest mean over the questions all of
    them scored and a system is tied unless comparison with the best
    (:func:`ragsweep.analysis.best.bounded_drop_p`) drops it at ``alpha``; otherwise (a run without
    records, no known range, a value outside it) the best is the highest mean and nothing is tied."""
    import numpy as np

    from ragsweep.analysis import bounded
    from ragsweep.analysis.search import shared_questions
    from ragsweep.analysis.best import bounded_drop_p

    qs = shared_questions(pts) if all(p.values for p in pts) else []  # type: ignore[arg-type]
    if qs and len(pts) > 1 and scale is not None:
        mat = np.asarray([[float(p.values[q]) for q in qs] for p in pts])  # type: ignore[index]
        shared = sign * mat.mean(axis=1)
        order = sorted(range(len(pts)), key=lambda i: (-shared[i], pts[i].cost if math.isfinite(pts[i].cost) else math.inf))
        best = pts[order[0]]
        try:
            ps = bounded_drop_p(sign * mat, scale, alpha=alpha)
        except bounded.RangeError:  # a value outside the stated range: no valid test
            best.tied = best.best = True
            return
        for p, pv in zip(pts, ps):
            p.p_adj = float(pv) if p is not best else None
            p.tied = p is best or float(pv) >= alpha
    else:
        best = max(pts, key=lambda p: (sign * p.mean, -p.cost if math.isfinite(p.cost) else -math.inf))
        best.tied = True
    best.best = True


def _fmt(x: float | None, nd: int = 2) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def draw(pts: Sequence[Point], objective: str, cost: str, path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for group, color, name in ((lambda p: not p.tied, "0.6", "other"), (lambda p: p.tied and not p.best, "tab:orange", "tied with the best"),
                               (lambda p: p.best, "tab:red", "best")):
        sel = [p for p in pts if group(p)]
        if not sel:
            continue
        xs = [p.cost for p in sel]
        ys = [p.mean for p in sel]
        err = [[max(0.0, p.mean - p.low) if math.isfinite(p.low) else 0.0 for p in sel],
               [max(0.0, p.high - p.mean) if math.isfinite(p.high) else 0.0 for p in sel]]
        ax.errorbar(xs, ys, yerr=err, fmt="o", color=color, ecolor=color, alpha=0.85, capsize=3, label=name)
    front = sorted((p for p in pts if p.on_front), key=lambda p: p.cost)
    if front:
        ax.plot([p.cost for p in front], [p.mean for p in front], "-", color="tab:blue", lw=1.2, label="Pareto front")
        for p in front:
            ax.annotate(p.label, (p.cost, p.mean), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(cost)
    ax.set_ylabel(f"{objective} (mean, 95% interval)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Quality against cost", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def pareto_section(children: Sequence[Any], records_by_run: Mapping[str, Sequence[Mapping[str, Any]]], objective: str,
                   cost: str, out_dir: str | Path | None = None, higher_is_better: bool | None = None) -> tuple[str, Path | None]:
    """``(markdown, figure path)``: the front, each system's quality interval and cost, the tie set."""
    if higher_is_better is None:
        from ragsweep.analysis.search import higher_is_better as hib

        higher_is_better = hib(objective)
    pts, note = points(children, records_by_run, objective, cost, higher_is_better)
    lines = [f"## Quality against cost: `{objective}` vs `{cost}`", ""]
    if not pts:
        return "\n".join(lines + [f"No child run has `{objective}`.", ""]), None
    if note:
        lines += [f"Note: {note}.", ""]
    tied = [p for p in pts if p.tied]
    from ragsweep.analysis.search import objective_range

    ties = (f"Statistically tied with it (comparison with the best over the questions all scored, alpha {ALPHA}): "
            f"{len(tied) - 1} system(s)" + (": " + "; ".join(p.label for p in tied if not p.best) if len(tied) > 1 else "")
            if objective_range(objective) is not None else
            f"Tied with it: not testable (`{objective}` has no known range in the metric registry)")
    lines += [f"Best: **{next(p.label for p in pts if p.best)}**. {ties}.", "",
              "| system | mean | 95% interval | n | cost | Pareto | tied with best | p (vs best, MCB) |", "|---|---|---|---|---|---|---|---|"]
    sign = 1.0 if higher_is_better else -1.0
    for p in sorted(pts, key=lambda p: (-sign * p.mean, p.cost)):
        lines.append(f"| {p.label} | {_fmt(p.mean)} | [{_fmt(p.low)}, {_fmt(p.high)}] | {p.n} | {_fmt(p.cost, 1)} | "
                     f"{'yes' if p.on_front else ''} | {'best' if p.best else ('yes' if p.tied else '')} | {_fmt(p.p_adj, 3)} |")
    lines += ["", f"Cost as logged: work served from the sweep's cache made no call and cost nothing.", ""]
    path = draw(pts, objective, cost, Path(out_dir or ".") / "fig_pareto.png")
    return "\n".join(lines), path


def search_report(client: Any, runs: Any, spec: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """The report's search part (``search.md`` + ``fig_pareto.png``), written when the sweep
    declared objectives or a Pareto pair (``sweep.objectives`` / ``sweep.pareto``) or its
    parent logged successive-halving rungs (``rungs.json``); nothing otherwise."""
    from ragsweep import tracking
    from ragsweep.analysis.search import DEFAULT_OBJECTIVE, rungs_markdown

    found, rungs = tracking.read_json_artifact(client, runs.parent_id, "rungs.json")
    pareto = dict(spec.get("pareto") or {})
    objectives = spec.get("objectives") or []
    objectives = [objectives] if isinstance(objectives, str) else list(objectives)
    if not (found or pareto or objectives):
        return []
    out = Path(out_dir)
    parts = [f"# {runs.experiment}: search\n"]
    if found and rungs:
        parts.append(rungs_markdown(rungs))
    objective = str(pareto.get("quality") or (objectives[0] if objectives else DEFAULT_OBJECTIVE))
    cost = str(pareto.get("cost") or "cost/calls")
    records = {}
    for c in runs.children:
        ok, doc = tracking.read_json_artifact(client, c.info.run_id, "records.json")
        if ok:
            records[c.info.run_id] = doc.get("results", []) if isinstance(doc, dict) else doc
    md, fig = pareto_section(runs.children, records, objective, cost, out)
    parts.append(md)
    path = out / "search.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return [path] + ([fig] if fig else [])
