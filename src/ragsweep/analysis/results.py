"""Results as DataFrames: ``ragsweep.results`` (one row per system x question, read back from
MLflow) and ``ragsweep.compare`` (the report's paired differences with intervals, for two runs).

The per-question values are each record's ``scores`` (every metric exactly as its run aggregated
it, NaN where undefined or failed; :func:`ragsweep.analysis.report.paired.record_value`), so a
mean over a system's rows of ``results()`` is the run's logged metric over the questions it was
defined for. ``ragsweep-report --export parquet|csv`` writes the same table for a sweep.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from ragsweep import tracking
from ragsweep.analysis.report import paired
from ragsweep.analysis.report.frame import ReportError, _parse_scalar
from ragsweep.records import failure_of, response_of
from ragsweep.tracking import SHORT_PARAMS
from ragsweep.tracking.identity import differing_params

#: the columns of a question row before its metrics
QUESTION_COLUMNS = ("query_id", "question", "gt_answer", "response", "failed", "failure")
#: the columns of a system before its questions (``results``); then the short params, then the varied params
SYSTEM_COLUMNS = ("run_id", "run_name")


def interval_frame(values: Mapping[str, Any]):
    """One row per metric logged with its interval (``<m>``, ``<m>/ci_low``, ``<m>/ci_high``,
    ``<m>/n``): columns ``mean``, ``ci_low``, ``ci_high``, ``n``, indexed by metric name."""
    import pandas as pd

    names = sorted(k[: -len("/n")] for k in values if k.endswith("/n") and k[: -len("/n")] in values)
    rows = [{"metric": m, "mean": float(values[m]), "ci_low": float(values.get(f"{m}/ci_low", math.nan)),
             "ci_high": float(values.get(f"{m}/ci_high", math.nan)), "n": int(values[f"{m}/n"])} for m in names]
    return pd.DataFrame(rows, columns=["metric", "mean", "ci_low", "ci_high", "n"]).set_index("metric")


def _metric_names(records: Sequence[Mapping[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for r in records:
        names.update(dict.fromkeys((r.get("scores") or r.get("metrics") or {}).keys()))
    return sorted(names)


def question_frame(records: Sequence[Mapping[str, Any]]):
    """One row per question of one run: id, question, ground truth, response, ``failed`` (bool) and
    ``failure`` (``"stage: reason"`` or None: a failed question is marked, its metrics NaN, never
    scored as empty), then every metric (per-question values as the run aggregated them)."""
    import pandas as pd

    names = _metric_names(records)
    rows = []
    for i, r in enumerate(records):
        f = failure_of(r)
        row: dict[str, Any] = {"query_id": str(r.get("query_id", i)), "question": r.get("query"),
                               "gt_answer": r.get("gt_answer") or None, "response": response_of(r),
                               "failed": f is not None, "failure": f"{f.stage}: {f.reason}" if f else None}
        for m in names:
            row[m] = paired.record_value(dict(r), m)
        rows.append(row)
    return pd.DataFrame(rows, columns=[*QUESTION_COLUMNS, *names])


def results_frame(client: Any, runs: Sequence[Any]):
    """One row per system x question for MLflow ``runs``: ``run_id``, ``run_name``, the short
    params (``retriever``, ``top_k`` ...), the other params that differ between the runs, then
    :func:`question_frame`'s columns. A run without ``records.json`` is left out (a warning)."""
    import logging

    import pandas as pd

    varying = differing_params(runs)
    frames = []
    for r in runs:
        recs = paired.records_of(client, r.info.run_id)
        if recs is None:
            logging.getLogger(__name__).warning("run %s (%s) has no records.json: not in the results",
                                                r.info.run_name, r.info.run_id)
            continue
        q = question_frame(recs)
        system = {"run_id": r.info.run_id, "run_name": r.info.run_name}
        system.update({p: _parse_scalar(r.data.params.get(p)) for p in (*SHORT_PARAMS, *varying)})
        for i, (k, v) in enumerate(system.items()):
            q.insert(i, k, [v] * len(q))
        frames.append(q)
    if not frames:
        return pd.DataFrame(columns=[*SYSTEM_COLUMNS, *SHORT_PARAMS, *QUESTION_COLUMNS])
    df = pd.concat(frames, ignore_index=True)
    for col in (*SHORT_PARAMS, *varying):  # one type per column (a Parquet column holds one)
        kinds = {type(v) for v in df[col] if v is not None}
        if len(kinds) > 1 and not kinds <= {int, float}:
            df[col] = [None if v is None else str(v) for v in df[col]]
    lead = [*SYSTEM_COLUMNS, *SHORT_PARAMS, *varying, *QUESTION_COLUMNS]
    return df[lead + sorted(c for c in df.columns if c not in lead)]


def _runs_of(cl: Any, experiment: str, run: str | None) -> list[Any]:
    """The systems of ``experiment``: the FINISHED children of sweep ``run`` (a parent run id), else
    every FINISHED run that is not a sweep's parent, the latest per system."""
    from ragsweep.tracking.identity import ROLE_TAG
    from ragsweep.tracking.runs import _latest_per_system

    if run:
        return list(tracking.load_sweep_runs(cl, experiment, run).children)
    runs = [r for r in tracking.experiment_runs(cl, experiment)
            if r.info.status == "FINISHED" and r.data.tags.get(ROLE_TAG) != "parent"]
    return _latest_per_system(runs)


def results(experiment: str = "default", *, run: str | None = None, tracking_uri: str | None = None):
    """Every system's every question of an MLflow experiment as one ``pandas.DataFrame``.

    One row per system x question: ``run_id``, ``run_name``, the system's parameters as columns
    (the short ones every run logs, e.g. ``retriever``, ``top_k``, ``chunk_size``, ``prompt``,
    ``generator``, and any other parameter that differs between the systems), ``query_id``,
    ``question``, ``gt_answer``, ``response``, ``failed`` / ``failure`` (a question whose
    generation or judging failed is marked and has NaN metrics), then every metric.

    ``experiment``: the MLflow experiment (``experiment_name`` of the config). ``run``: a sweep's
    parent run id (default: every FINISHED run of the experiment that is not a sweep's parent, the
    latest run per system). ``tracking_uri``: default ``$MLFLOW_TRACKING_URI`` or
    ``sqlite:///mlruns/mlflow.db``. Raises :class:`ragsweep.tracking.TrackingError` for a store,
    experiment or run that is not there.

    >>> df = ragsweep.results("default")                                  # doctest: +SKIP
    >>> df.groupby("run_name")["ragchecker/overall/f1"].mean()            # doctest: +SKIP
    """
    cl = tracking.client(tracking.resolve_tracking_uri(tracking_uri))
    return results_frame(cl, _runs_of(cl, experiment, run))


def sweep_runs(experiment: str, run: str | None, tracking_uri: str | None = None):
    """One row per system of a sweep (the report's frame: short params and every metric)."""
    from ragsweep.analysis.report.frame import runs_frame

    cl = tracking.client(tracking.resolve_tracking_uri(tracking_uri))
    return runs_frame(tracking.load_sweep_runs(cl, experiment, run).children)


# -- compare -----------------------------------------------------------------------------------
def _resolve(cl: Any, what: Any, experiment: str | None) -> tuple[str, list[dict[str, Any]]]:
    """(label, records) of a run given as a :class:`ragsweep.pipeline.api.Run`-like object (``records``,
    ``name``), a run id, or a run name in ``experiment``."""
    if hasattr(what, "records") and getattr(what, "records", None):
        return str(getattr(what, "name", None) or getattr(what, "run_id", "run")), list(what.records)
    rid = getattr(what, "run_id", None) or str(what)
    if cl is None:
        raise ReportError(f"{what!r}: no records in memory and no MLflow store to read the run from")
    try:
        run = cl.get_run(rid)
    except Exception:  # noqa: BLE001 - not an id: a run name
        run = None
    if run is None:
        if not experiment:
            raise ReportError(f"run {rid!r} not found; pass a run id, a Run, or experiment= to look it up by name")
        named = [r for r in tracking.experiment_runs(cl, experiment) if r.info.run_name == rid and r.info.status == "FINISHED"]
        if not named:
            raise ReportError(f"no FINISHED run named {rid!r} in experiment {experiment!r}")
        run = max(named, key=lambda r: r.info.start_time or 0)
    recs = paired.records_of(cl, run.info.run_id)
    if recs is None:
        raise ReportError(f"run {run.info.run_id} ({run.info.run_name}) has no records.json: nothing to pair")
    return str(run.info.run_name or run.info.run_id), recs


def compare(a: Any, b: Any, metrics: Iterable[str] | None = None, *, experiment: str | None = None,
            tracking_uri: str | None = None):
    """The paired differences ``b - a`` that ``ragsweep-report`` computes, as a DataFrame.

    ``a``, ``b``: :class:`ragsweep.Run` objects (from :func:`ragsweep.run`), MLflow run ids, or run
    names in ``experiment``. ``metrics``: default the report's (F1, precision, recall, claim recall,
    faithfulness, hallucination, token F1, adherence, recall@k), those both runs scored. One row
    per metric: ``mean_a``, ``mean_b``, ``diff`` (the mean of the per-question differences over the
    ``n`` questions both scored), ``ci_low`` / ``ci_high`` (its 95% paired bootstrap interval),
    ``p`` (paired sign-flip permutation test), ``p_holm`` (Holm-adjusted over the rows),
    ``n_for_80pct_power`` and ``method`` (``PPI++`` where human labels decided). The rules are the
    report's (docs/statistics.md).
    """
    import pandas as pd

    needs_store = not all(getattr(x, "records", None) for x in (a, b))
    cl = tracking.client(tracking.resolve_tracking_uri(tracking_uri)) if needs_store else None
    (la, ra), (lb, rb) = _resolve(cl, a, experiment), _resolve(cl, b, experiment)
    if la == lb:
        la, lb = f"A: {la}", f"B: {lb}"
    wanted = list(metrics) if metrics is not None else list(paired.DEFAULT_METRICS)
    comps = []
    for m in wanted:
        va, vb = paired.run_values(ra, m), paired.run_values(rb, m)
        if va is None or vb is None:
            if metrics is not None:
                raise ReportError(f"metric {m!r}: not in the records of {la if va is None else lb}")
            continue
        comp = paired.compare(m, la, va, lb, vb)
        if comp.result.n or metrics is not None:  # a default metric neither run defines (retrieval-only): no row
            comps.append(comp)
    paired.adjust(comps)
    rows = [{"metric": c.metric, "a": c.a, "b": c.b, "mean_a": c.result.mean_a, "mean_b": c.result.mean_b,
             "diff": c.result.diff, "ci_low": c.result.low, "ci_high": c.result.high, "n": c.result.n,
             "p": c.result.p, "p_holm": c.p_adj, "n_for_80pct_power": c.n_needed, "method": c.method or "paired"}
            for c in comps]
    cols = ["metric", "a", "b", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "n", "p", "p_holm",
            "n_for_80pct_power", "method"]
    return pd.DataFrame(rows, columns=cols).set_index("metric")
