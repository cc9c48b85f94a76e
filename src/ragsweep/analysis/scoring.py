"""A run's numbers, each with how far it can be trusted.

``score_run(records, families)`` reads every registered metric of ``families`` question by
question (:mod:`ragsweep.judge.metrics.registry`), and returns for each:

    <metric>            the mean over the questions that define it
    <metric>/ci_low     95% percentile-bootstrap interval over questions (seeded, B = 2,000;
    <metric>/ci_high      :func:`ragsweep.analysis.stats.interval`)
    <metric>/n          questions scored
    <metric>/failed     questions whose generation or judge call failed (never scored)
    <metric>/undefined  questions the metric does not apply to (no ground truth, no labels ...)

plus the run-level ledger ``ledger/attempted|answered|failed_generation|failed_judge``, the per-question
values keyed by question id, and the per-metric ledger (:mod:`ragsweep.judge.ledger`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ragsweep.judge import ledger as ledger_mod
from ragsweep.analysis import stats
from ragsweep.judge.metrics import registry
from ragsweep.records import response_of

SUFFIXES = ("ci_low", "ci_high", "n", "failed", "undefined", "judge_sd", "question_sd")


@dataclass
class RunScores:
    metrics: dict[str, float] = field(default_factory=dict)
    per_question: dict[str, dict[str, float]] = field(default_factory=dict)
    intervals: dict[str, stats.Interval] = field(default_factory=dict)
    ledger: dict[str, dict[str, int]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    undefined: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # questions a budget kept from being done

    def artifact(self) -> dict[str, Any]:
        """The ``ledger.json`` artifact: run counts, per-metric ledger, failed questions with reasons,
        and per metric the questions it is undefined for, grouped by why."""
        return {"counts": self.counts, "metrics": self.ledger, "failures": self.failures, "undefined": self.undefined,
                **({"not_attempted": self.skipped} if self.skipped else {}),
                "interval": f"{int(stats.CONFIDENCE * 100)}% {stats.METHOD} over questions, B={stats.RESAMPLES}, seed={stats.SEED}"}


def _present(metric: registry.Metric, records: Sequence[dict[str, Any]]) -> bool:
    """Retrieval metrics exist only at the cutoffs the run computed (up to its depth)."""
    if metric.family != "retrieval":
        return True
    return any(metric.name in (r.get("metrics") or {}) for r in records)


def score_run(records: Sequence[dict[str, Any]], families: Iterable[str]) -> RunScores:
    wanted = set(families)
    out = RunScores()
    values: dict[str, list[float]] = {}
    fams: dict[str, str] = {}
    for m in registry.all_metrics():
        if m.family not in wanted or m.per_question is None or not _present(m, records):
            continue
        try:
            vals = registry.values(m, records)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # the records do not carry what this metric reads (its step did not run)
        values[m.name] = vals
        fams[m.name] = m.family
        out.per_question[m.name] = {str(r.get("query_id", i)): v for i, (r, v) in enumerate(zip(records, vals))}
    out.ledger = ledger_mod.ledger(records, values, fams)
    for name, vals in values.items():
        iv = stats.interval(vals)
        out.intervals[name] = iv
        led = out.ledger[name]
        out.metrics.update({
            name: iv.mean,
            f"{name}/ci_low": iv.low,
            f"{name}/ci_high": iv.high,
            f"{name}/n": float(iv.n),
            f"{name}/failed": float(led["failed_generation"] + led["failed_judge"]),
            f"{name}/undefined": float(led["undefined"]),
        })
    for name, vals in values.items():
        why: dict[str, list[str]] = {}
        metric = registry.get(name)
        for i, (r, v) in enumerate(zip(records, vals)):
            if finite(v) or ledger_mod.generation_failure(r) or ledger_mod.excluded(r, metric.family) or (
                    metric.family not in ledger_mod.ANSWER_FREE and ledger_mod.judge_failure(r)):
                continue
            why.setdefault(undefined_reason(metric, r), []).append(str(r.get("query_id", i)))
        if why:
            out.undefined[name] = why
    out.counts = ledger_mod.counts(records)
    out.metrics.update({f"ledger/{k}": float(v) for k, v in out.counts.items()})
    out.failures = ledger_mod.failures(records)
    out.skipped = ledger_mod.skipped(records)
    return out


def combine_repeats(records: Sequence[dict[str, Any]], repeats: Sequence[RunScores]) -> RunScores:
    """One run's scores from R judgings of the same answers (``evaluator.repeats``): a question's
    value is the mean over the repeats that scored it; the interval is over questions of those
    means. Beside it ``<metric>/judge_sd`` = sqrt(mean over questions of the variance across
    repeats) (the judge's own variance) and ``<metric>/question_sd`` = the SD over questions of the
    per-question means (what the questions contribute)."""
    import numpy as np

    first = repeats[0]
    out = RunScores(metrics=dict(first.metrics), ledger=first.ledger, counts=first.counts, failures=first.failures)
    for name in first.per_question:
        qids = list(first.per_question[name])
        means, within = {}, []
        for q in qids:
            vals = [r.per_question.get(name, {}).get(q, math.nan) for r in repeats]
            vals = [v for v in vals if finite(v)]
            means[q] = float(np.mean(vals)) if vals else math.nan
            if len(vals) > 1:
                within.append(float(np.var(vals, ddof=1)))
        out.per_question[name] = means
        iv = stats.interval(means.values())
        out.intervals[name] = iv
        defined = [v for v in means.values() if finite(v)]
        out.metrics.update({
            name: iv.mean, f"{name}/ci_low": iv.low, f"{name}/ci_high": iv.high, f"{name}/n": float(iv.n),
            f"{name}/judge_sd": math.sqrt(float(np.mean(within))) if within else math.nan,
            f"{name}/question_sd": float(np.std(defined, ddof=1)) if len(defined) > 1 else math.nan,
        })
    out.metrics["judge/repeats"] = float(len(repeats))
    return out


def ragchecker_layout(scores: RunScores, round_to: int | None = 1) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, dict[str, float]]]]:
    """RAGChecker's nested ``metrics`` (``{"overall": {"precision": ...}, "retriever": ...,
    "generator": ...}``, percentages rounded like RAGChecker's ``evaluate``) from the aggregates of
    :func:`score_run` over the ``ragchecker`` family, and the same layout of each one's
    ``{"ci_low", "ci_high", "n"}``: ``ragsweep-score``'s document, aggregated by the one path."""
    from ragsweep.judge import ragchecker_metrics as rcm

    def rounded(v: float) -> float:
        return round(v, round_to) if round_to is not None and finite(v) else v

    metrics: dict[str, dict[str, float]] = {}
    intervals: dict[str, dict[str, dict[str, float]]] = {}
    for group, names in rcm.METRIC_GROUPS.items():
        metrics[group], intervals[group] = {}, {}
        for name in names + ((rcm.N_CLAIMS,) if group == "overall" else ()):
            key = f"ragchecker/{group}/{name}"
            metrics[group][name] = rounded(scores.metrics.get(key, math.nan))
            intervals[group][name] = {"ci_low": rounded(scores.metrics.get(f"{key}/ci_low", math.nan)),
                                      "ci_high": rounded(scores.metrics.get(f"{key}/ci_high", math.nan)),
                                      "n": int(scores.metrics.get(f"{key}/n", 0))}
    return metrics, intervals


def undefined_reason(metric: registry.Metric, rec: dict[str, Any]) -> str:
    """Why ``metric`` has no value for a question that did not fail."""
    if metric.family == "retrieval":
        return "no relevance labels" if not rec.get("relevant_spans") else "beyond the retrieval depth"
    gt = rec.get("gt_answer")
    if metric.needs_gt and not (isinstance(gt, str) and gt.strip()):
        return "no ground-truth answer"
    if not response_of(rec).strip():
        return "empty response"
    if not rec.get("retrieved_context"):
        return "no retrieved context"
    return "undefined by the metric's definition for this question (e.g. no claim to take a share of)"


def is_summary_key(name: str) -> bool:
    """Whether ``name`` is one of the interval/ledger companions of a metric."""
    return name.rsplit("/", 1)[-1] in SUFFIXES and "/" in name


def finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
