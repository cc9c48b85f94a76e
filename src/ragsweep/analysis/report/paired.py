"""Per-question values of a sweep's runs, and the paired comparisons the report makes from them.

A parameter *level* (e.g. ``top_k=10``) may hold several runs (the other swept parameters vary):
its value for a question is the mean over those runs of the values defined for that question.
Two levels (or two runs) are compared only over the questions both define, paired by question id
(:func:`ragsweep.analysis.stats.paired`); all p-values of one report are Holm-adjusted together
(:func:`adjust`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from ragsweep.analysis import stats
from ragsweep.analysis.labels import hook as _labels_hook
from ragsweep.analysis.report.frame import _same, fmt, metric_range, metric_scale, value_label, values_of
from ragsweep.tracking import SHORT_PARAMS

log = logging.getLogger(__name__)

PerQuestion = dict[str, float]
#: a "barely moves" step without a valid interval: the metric has no known range (the registry gives
#: none), a value lies outside it, or tol covers the whole range
UNTESTABLE = "untestable"
#: what a two-run comparison shows besides the chosen metric
DEFAULT_METRICS = ("ragchecker/overall/f1", "ragchecker/overall/precision", "ragchecker/overall/recall",
                   "ragchecker/retriever/claim_recall", "ragchecker/generator/faithfulness",
                   "ragchecker/generator/hallucination", "baseline/token_f1", "trace/adherence_rate",
                   "retrieval/recall_at_k")


def records_of(client: Any, run_id: str) -> list[dict[str, Any]] | None:
    """The scored records of a run (its ``records.json``); None when it has none."""
    from ragsweep import tracking

    found, data = tracking.read_json_artifact(client, run_id, "records.json")
    if not found:
        return None
    recs = data.get("results") if isinstance(data, dict) else data
    if not isinstance(recs, list):
        return None
    check_unique_ids(recs, f"run {run_id}")
    return recs


def check_unique_ids(records: Sequence[dict[str, Any]], where: str) -> None:
    """Refuse records with a repeated ``query_id``: paired by question id, one would silently
    replace the other."""
    seen: dict[str, int] = {}
    for i, r in enumerate(records):
        q = str(r.get("query_id", i))
        seen[q] = seen.get(q, 0) + 1
    dup = [q for q, c in seen.items() if c > 1]
    if dup:
        from ragsweep.analysis.report.frame import ReportError

        raise ReportError(f"{where}: records.json has {len(dup)} repeated query_id(s) ({', '.join(dup[:5])}"
                          f"{', ...' if len(dup) > 5 else ''}); per-question values are paired by query_id, so each "
                          "question must appear once - re-run the system or remove the duplicate records")


def record_value(rec: dict[str, Any], metric: str) -> float:
    """One question's value of ``metric`` as its run aggregated it (``rec["scores"]``), else the
    registry's per-question function (records written before ``scores`` existed); NaN where it is
    undefined or the work failed."""
    from ragsweep.judge.metrics.registry import find, values

    scores = rec.get("scores")
    if isinstance(scores, dict) and metric in scores:
        v = scores[metric]
    else:
        m = find(metric)
        try:
            v = values(m, [rec])[0] if m is not None and m.per_question is not None else None
        except (KeyError, TypeError, ValueError, AttributeError):  # a record the metric cannot read
            v = None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


def run_values(records: Sequence[dict[str, Any]] | None, metric: str) -> PerQuestion | None:
    """``metric``'s per-question values of one run's records (question id -> value, NaN where
    undefined or failed); None when no record can hold it (no ``scores`` entry and no registered
    per-question function)."""
    from ragsweep.judge.metrics.registry import find

    if not records:
        return None
    check_unique_ids(records, "records")
    known = any(metric in (r.get("scores") or {}) for r in records)
    m = find(metric)
    if not known and (m is None or m.per_question is None):
        return None
    values = {str(r.get("query_id", i)): record_value(r, metric) for i, r in enumerate(records)}
    return _labels_hook.with_human(records, metric, values)  # + the human labels, where attached (issue 25: PPI)


class Undefined(dict):
    """A level whose every system is one the metric does not exist for (no question, by design)."""


def _undefined_by_design(values: PerQuestion, records: Sequence[dict[str, Any]] | None) -> bool:
    """Every value NaN, and not because work failed: the metric does not exist for this system."""
    failed = any(r.get("failure") or r.get("error") for r in records or [])
    return bool(values) and not failed and not any(v is not None and math.isfinite(v) for v in values.values())


def _pooled(rows, metric: str, records: Mapping[str, Any]) -> tuple[PerQuestion | None, list[PerQuestion]]:
    """The per-question mean over the runs in ``rows`` (a frame slice) and the runs it pools: None if
    any run lacks per-question values; :class:`Undefined` if the metric exists for none of them. A run
    where the metric is undefined on every question and no question failed (TRACe relevance of a
    closed-book prompt: no context, nothing to measure) is left out: the metric does not exist for
    that system, as opposed to a run whose work failed, which keeps the pool from counting those
    questions. A question counts only when every pooled run scored it."""
    per_run = [run_values(records.get(rid), metric) for rid in rows["run_id"]]
    if not per_run or any(v is None for v in per_run):
        return None, []
    per_run = [pq for pq, rid in zip(per_run, rows["run_id"]) if not _undefined_by_design(pq, records.get(rid))]
    if not per_run:
        return Undefined(), []
    acc: dict[str, list[float]] = {}
    for pq in per_run:
        for q, v in pq.items():
            if v is not None and math.isfinite(v):
                acc.setdefault(q, []).append(v)
    return {q: sum(vs) / len(vs) for q, vs in acc.items() if len(vs) == len(per_run)}, per_run


def level_values(df, param: str, metric: str, records: Mapping[str, Sequence[dict[str, Any]] | None]) -> dict[Any, PerQuestion | None]:
    """Per level of ``param``: the per-question mean over the level's runs (:func:`_pooled`: None if
    any run of the level lacks per-question values, :class:`Undefined` if the metric exists for none
    of its systems)."""
    out: dict[Any, PerQuestion | None] = {}
    for val in values_of(df, param):
        rows = df[df[param].map(lambda x, val=val: x is not None and _same(x, val))]
        pooled, per_run = _pooled(rows, metric, records)
        # the level's human labels, if any (issue 25)
        out[val] = _labels_hook.level(pooled, per_run) if per_run else pooled
    return out


def cell_interval(rows, metric: str, records: Mapping[str, Any]) -> stats.Interval | None:
    """Interval of the mean over the runs in ``rows`` (a frame slice): from the per-question means
    when the runs' records are there (pooled as a level's are, :func:`_pooled`), else the single
    run's logged ``<metric>/ci_*``."""
    if rows.empty:
        return None
    pooled, _ = _pooled(rows, metric, records)
    if pooled is not None:
        return stats.interval(pooled.values())
    if len(rows) == 1 and f"{metric}/ci_low" in rows.columns:
        r = rows.iloc[0]
        return stats.Interval(float(r.get(metric, float("nan"))), float(r[f"{metric}/ci_low"]),
                              float(r[f"{metric}/ci_high"]), int(r.get(f"{metric}/n", 0) or 0))
    return None


@dataclass
class Comparison:
    """``b - a`` of one metric between two levels (or runs), over the questions both scored."""

    metric: str
    a: str
    b: str
    result: stats.Paired
    n_needed: int | None = None
    #: for "barely moves" (``tol`` set): which hypothesis ``result.p`` tests - "within" (the 95%
    #: interval inside ±tol) or "beyond" (outside), or UNTESTABLE (no bounded range); None: the
    #: two-sided test of mean 0
    hypothesis: str | None = None
    tol: float | None = None
    method: str = ""  # "PPI++" when human labels decided it (ragsweep.analysis.labels.hook), else the judge-only test
    why_untestable: str = ""  # with hypothesis UNTESTABLE: the reason, in words a reader can act on

    @property
    def p_adj(self) -> float:
        return self.result.p_adjusted if self.result.p_adjusted is not None else self.result.p

    def row(self) -> list[str]:
        r = self.result
        scale = metric_scale(self.metric)
        d = 1 if scale > 1 else 3
        return [self.metric, f"{self.a} → {self.b}", fmt(r.mean_a, d), fmt(r.mean_b, d), f"{r.diff:+.{d}f}",
                f"[{r.low:+.{d}f}, {r.high:+.{d}f}]" if math.isfinite(r.low) else "n/a",
                f"{r.n} labelled ({self.method})" if self.method else str(r.n), p_text(r.p),
                p_text(self.p_adj), str(self.n_needed) if self.n_needed else "-"]


HEADER = ["metric", "comparison", "mean A", "mean B", "B - A", "95% CI", "n", "p", "p (Holm)", "n for 80% power"]


def _ppi_min_nonzero() -> int:
    from ragsweep.analysis import ppi

    return ppi.MIN_NONZERO


def p_text(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def compare(metric: str, a_label: str, a: PerQuestion, b_label: str, b: PerQuestion,
            tol: float | None = None) -> Comparison:
    """``b - a`` paired over the common questions. With ``tol`` (a "barely moves" step) the step is
    judged by the 95% betting interval of the mean difference (:mod:`ragsweep.analysis.bounded`, valid
    for the metric's bounded range whatever the distribution): its p is that of "within ±tol" when
    |diff| < tol, else of "beyond ±tol", and the questions column says how many questions like these
    the test would need. Where people labelled enough of the questions, the difference, its interval
    and p are PPI++'s (:mod:`ragsweep.analysis.labels.hook`), the tol tests then on its normal interval."""
    labelled = _labels_hook.paired(metric, a, b)  # human labels on enough questions: they decide (issues 25, 34)
    ppi_res, method, human_d = labelled if labelled is not None else (None, "", [])
    res = ppi_res if ppi_res is not None else stats.paired(a, b)
    d = stats.diffs(a, b)
    if tol is None:
        return Comparison(metric, a_label, b_label, res, stats.n_for_power(d), method=method)
    if res.n == 0:
        return Comparison(metric, a_label, b_label, res, None, "within", tol, method)
    within = abs(res.diff) < tol
    if method == _labels_hook.PPI_METHOD:
        side = 1.0 if res.diff >= 0 else -1.0  # the nearer margin
        need = stats.n_for_power([x - side * tol for x in d], sided=1 if within else 2)
        return Comparison(metric, a_label, b_label, replace(res, p=_normal_tol_p(res, tol, within)), need,
                          "within" if within else "beyond", tol, method)
    if method:  # the labelled differences' betting interval (few non-zero): its own tol tests
        step = _bounded_step(metric, a_label, b_label, res, human_d, tol, within)
        step.method = method
        return step
    return _bounded_step(metric, a_label, b_label, res, d, tol, within)


def _bounded_step(metric: str, a_label: str, b_label: str, res: stats.Paired, d: Sequence[float], tol: float,
                  within: bool) -> Comparison:
    """A judge-only "barely moves" step: the betting interval on the metric's range [-scale, +scale]."""
    from ragsweep.analysis import bounded

    scale = metric_range(metric)
    try:
        if scale is None:
            raise bounded.RangeError(f"no known range (the metric registry states no finite scale for {metric})")
        iv = bounded.interval(d, scale)
        bounded.within_p(d, tol, scale)  # refuses a tol at or above the range
    except bounded.RangeError as exc:  # no valid interval to decide with: not testable, whatever n
        log.warning("%s: 'barely moves' is not testable: %s", metric, exc)
        # p NaN: no test, so nothing for Holm to count and nothing that more questions would change
        return Comparison(metric, a_label, b_label, replace(res, p=float("nan")), None, UNTESTABLE, tol,
                          why_untestable=str(exc))
    p = bounded.within_p(d, tol, scale) if within else bounded.beyond_p(d, tol, scale)
    need = bounded.n_for(d, tol, scale, "within" if within else "beyond")
    return Comparison(metric, a_label, b_label, replace(res, low=iv.low, high=iv.high, p=p), need,
                      "within" if within else "beyond", tol)


def _normal_tol_p(res: stats.Paired, tol: float, within: bool) -> float:
    """The tol tests of :func:`compare` on a normal 95% interval (PPI++'s), with the standard error
    read back from it: "within" is shown (p < 0.05) exactly when the whole 95% interval lies inside
    ±tol (p = twice the larger one-sided p), "beyond" when it lies outside (twice the one-sided p of
    the side the difference is on)."""
    from scipy.stats import norm

    se = (res.high - res.low) / (2 * norm.ppf(0.5 + stats.CONFIDENCE / 2))
    if not se > 0:
        return 1.0
    if within:
        return float(min(1.0, 2 * max(norm.sf((res.diff + tol) / se), norm.cdf((res.diff - tol) / se))))
    return float(min(1.0, 2 * norm.sf((abs(res.diff) - tol) / se)))


def adjust(comparisons: Iterable[Comparison]) -> None:
    """Holm-adjust the p-values of all ``comparisons`` of one report together (in place)."""
    comps = list(comparisons)
    adj = stats.holm([c.result.p for c in comps])
    for c, p in zip(comps, adj):
        c.result = stats.Paired(**{**c.result.as_dict(), "p_adjusted": p})


def level_label(param: str, val: Any) -> str:
    return value_label(param, val)


def key_label(key: str, value: Any) -> str:
    """A logged config key without a short name, as labels show it: ``model_format=q8_0``."""
    return f"{key.rsplit('.', 1)[-1]}={value}"


def system_label(row, params: Sequence[str]) -> str:
    """A run as its swept values (``k=5, bm25``), else its run name."""
    bits = [value_label(p, row[p]) if p in SHORT_PARAMS else key_label(p, row[p])
            for p in params if p in row and row[p] is not None]
    return ", ".join(bits) or str(row["run_name"])


def baseline_index(df, baseline: str | None, params: Sequence[str] = ()) -> int:
    """Row of the baseline system: ``baseline`` as a run name or a label such as ``k=5``, else 0."""
    labels = [system_label(row, params) for _, row in df.iterrows()]
    names = list(df["run_name"])
    return names.index(baseline) if baseline in names else labels.index(baseline) if baseline in labels else 0


def baseline_comparisons(df, metrics: Sequence[str], records: Mapping[str, Any], baseline: str | None,
                         params: Sequence[str] = ()) -> list[Comparison]:
    """Each run against the baseline run (``baseline``: a run name or a system label such as
    ``k=5``; None: the first row), for each of ``metrics``."""
    if df.empty:
        return []
    labels = [system_label(row, params) for _, row in df.iterrows()]
    base_idx = baseline_index(df, baseline, params)
    base = df.iloc[base_idx]
    out = []
    for metric in metrics:
        a = run_values(records.get(base["run_id"]), metric)
        if a is None:
            continue
        for i, row in df.iterrows():
            if row["run_id"] == base["run_id"]:
                continue
            b = run_values(records.get(row["run_id"]), metric)
            if b is not None:
                out.append(compare(metric, labels[base_idx], a, system_label(row, params), b))
    return out


def drop_unscored(comps: Sequence[Comparison]) -> tuple[list[Comparison], list[str]]:
    """``comps`` less the metrics no question was scored on in any comparison (a retrieval-only
    sweep's generator metrics), and those metrics' names, for the report to say so once instead of
    a table of empty rows."""
    scored = {c.metric for c in comps if c.result.n > 0}
    unscored = list(dict.fromkeys(c.metric for c in comps if c.metric not in scored))
    return [c for c in comps if c.metric in scored], unscored


def comparisons_markdown(comps: Sequence[Comparison], title: str, note: str = "") -> str:
    from ragsweep.analysis.report.markdown import md_cell

    comps, unscored = drop_unscored(comps)
    out = [f"## {title}", ""]
    if note:
        out += [note, ""]
    if unscored:
        out += [f"Not compared, no question was scored on them by any system (a retrieval-only run has no "
                f"response to judge): {', '.join(unscored)}.", ""]
    if not comps:
        return "\n".join(out + ["No comparison could be made (no per-question values).", ""])
    out += ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    out += ["| " + " | ".join(md_cell(c) for c in comp.row()) + " |" for comp in comps]
    return "\n".join(out) + "\n"


RULES = (
    "Paired over questions: B - A is the mean of the per-question differences over the n questions both "
    f"scored (a failed or undefined question is in neither). 95% CI: {stats.METHOD} of that mean "
    f"(B={stats.RESAMPLES}, seed {stats.SEED}). p: two-sided paired sign-flip permutation test of mean 0 "
    f"(exact over all 2^n sign patterns for n <= {stats.EXACT_MAX_N}, else up to {stats.RANDOM_FLIPS:,} seeded "
    f"random flips, whose smallest p is {1 / (stats.RANDOM_FLIPS + 1):.0e}, or Hoeffding's bound on the exact p where "
    "that is smaller); for a 'barely moves' step, B - A's 95% CI is the betting interval (Waudby-Smith & Ramdas "
    "2023) on the metric's range [-scale, +scale], valid whatever the distribution of differences, and p tests "
    "whether it lies inside ±tol (when |B - A| < tol), else outside; "
    "Holm-adjusted over every comparison of this report. n for 80% power: questions a paired test at alpha "
    "0.05 would need to detect the observed difference (normal approximation, never fewer than the test needs "
    f"to reach alpha at all: {stats.min_n()} questions two-sided); 'no finite n' when the difference is zero; for "
    "a 'barely moves' step, the questions like these its interval would need to lie inside (or outside) ±tol. "
    "See docs/statistics.md. "
    "Where people labelled enough of the questions (n shows 'labelled (PPI++)'), B - A, its 95% CI and p are "
    "prediction-powered (PPI++ over the questions labelled for both, the judge's differences on the others; "
    "for 'barely moves', the tol tests on its normal interval); where fewer than "
    f"{_ppi_min_nonzero()} labelled differences are non-zero (n shows 'labelled (labels, betting)'), the labelled "
    "differences' betting interval instead: see docs/statistics.md, 'Prediction-powered estimates'."
)
