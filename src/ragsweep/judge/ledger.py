"""The failure ledger: for every metric, what happened to every question.

Each question of a run is, for each metric, exactly one of

- **scored**: the metric has a value for it;
- **failed (generation)**: the generator's call failed (``rec["failure"]["stage"] == "generation"``):
  the question is excluded from every answer metric (never scored as an empty answer) and from
  the judge; its retrieval metrics still count, retrieval did not fail;
- **failed (judge)**: a judge call the metric needs failed or its answer did not parse (claims
  left None, an entailment label left None, a TRACe annotation that did not parse ...);
- **undefined**: the metric has no value by definition (no ground truth, no relevance labels, no
  response claim to take a share of ...);
- **not attempted**: a budget (``budget_usd``, ``sweep.budget_usd``) stopped the run before the
  question's generation or its judging (``rec["failure"]["stage"] == "budget"``): never scored on
  any answer metric, never a failure, and not counted as attempted; its retrieval metrics, which
  cost nothing, still count. A run with a higher budget resumes it from the cache.

``ledger(records, names)`` counts them per metric; ``failures(records)`` lists the failed questions
with their stage and reason (the ``ledger.json`` artifact). ``max_failure_rate`` reads
``failed_share(records)``: questions with any failed work over questions attempted.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from ragsweep.records import is_abstention

GENERATION, JUDGE, BUDGET = "generation", "judge", "budget"
#: families whose values do not depend on the answer (a failed generation does not touch them)
ANSWER_FREE = frozenset({"retrieval"})
#: families no judge computes (lexical baselines against the ground truth, retrieval metrics): a failed
#: judge never voids them, so a value they lack is undefined (e.g. no ground truth), not failed (judge)
JUDGE_FREE = frozenset({"retrieval", "baseline"})


def _marked(rec: Mapping[str, Any], stage: str, default: str) -> str | None:
    """The reason of ``rec``'s failure mark when it is of ``stage`` (``default`` if it gives none)."""
    f = rec.get("failure")
    if isinstance(f, Mapping) and f.get("stage") == stage:
        return str(f.get("reason") or default)
    return None


def not_attempted(rec: Mapping[str, Any]) -> str | None:
    """Why a budget kept this question's work from being done, or None."""
    return _marked(rec, BUDGET, "budget reached")


def generation_failure(rec: Mapping[str, Any]) -> str | None:
    why = _marked(rec, GENERATION, "generation failed")
    if why is not None:
        return why
    if "error" in rec and rec.get("error"):
        return str(rec["error"])
    return None


def _none_in(matrix: Any) -> bool:
    if matrix is None:
        return False
    for row in matrix:
        if isinstance(row, list):
            if any(x is None for x in row):
                return True
        elif row is None:
            return True
    return False


def judge_failure(rec: Mapping[str, Any]) -> str | None:
    """Why the judge failed on this record, or None. Read from what the evaluator left behind."""
    why = _marked(rec, JUDGE, "judge failed")
    if why is not None:
        return why
    if generation_failure(rec) or not_attempted(rec):
        return None
    if "response_claims" in rec and rec.get("response_claims") is None:
        return "claim extraction failed (response)"
    gt = rec.get("gt_answer")
    if ("gt_answer_claims" in rec and rec.get("gt_answer_claims") is None and isinstance(gt, str) and gt.strip()
            and not is_abstention(gt)):  # an abstention has no claims by definition (judge.abstention)
        return "claim extraction failed (ground truth)"
    for field in ("answer2response", "response2answer", "retrieved2response", "retrieved2answer"):
        if _none_in(rec.get(field)):
            return f"entailment check failed ({field})"
    trace = rec.get("trace")
    if isinstance(trace, Mapping) and trace.get("annotation_failed"):
        return "TRACe annotation failed"
    if isinstance(trace, Mapping) and trace.get("unlabelled_response_sentence_keys"):
        return "TRACe annotation left response sentences unlabelled"
    jf = rec.get("judge_failures")
    if jf:
        return "; ".join(map(str, jf)) if isinstance(jf, (list, tuple)) else str(jf)
    return None


def mark_judge_failures(records: Iterable[dict[str, Any]]) -> int:
    """Set ``rec["failure"]`` for every record the judge failed on; returns how many."""
    n = 0
    for rec in records:
        if rec.get("failure"):
            continue
        why = judge_failure(rec)
        if why:
            rec["failure"] = {"stage": JUDGE, "reason": why}
            n += 1
    return n


def excluded(rec: Mapping[str, Any], family: str) -> bool:
    """Whether a metric of ``family`` must not score ``rec`` (a generation failure, or not attempted)."""
    return family not in ANSWER_FREE and (generation_failure(rec) is not None or not_attempted(rec) is not None)


def _finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def ledger(records: Sequence[Mapping[str, Any]], values: Mapping[str, Sequence[float]],
           families: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Per metric: attempted / scored / failed_generation / failed_judge / undefined / not_attempted.

    ``values[name]`` are the metric's per-question values in ``records``' order (NaN where none);
    ``families[name]`` its family (retrieval metrics ignore generation failures).
    """
    out: dict[str, dict[str, int]] = {}
    gen = [generation_failure(r) is not None for r in records]
    judge = [judge_failure(r) is not None for r in records]
    skipped = [not_attempted(r) is not None for r in records]
    for name, vals in values.items():
        fam = (families or {}).get(name, "")
        row = {"attempted": len(records), "scored": 0, "failed_generation": 0, "failed_judge": 0, "undefined": 0,
               "not_attempted": 0}
        for v, g, j, b in zip(vals, gen, judge, skipped):
            if b and fam not in ANSWER_FREE:
                row["not_attempted"] += 1
                row["attempted"] -= 1
            elif _finite(v):
                row["scored"] += 1
            elif g and fam not in ANSWER_FREE:
                row["failed_generation"] += 1
            elif j and fam not in JUDGE_FREE:
                row["failed_judge"] += 1
            else:
                row["undefined"] += 1
        out[name] = row
    return out


def failures(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every question with failed work: query id, stage and reason."""
    out = []
    for r in records:
        g = generation_failure(r)
        j = None if g else judge_failure(r)
        if g or j:
            out.append({"query_id": r.get("query_id"), "stage": GENERATION if g else JUDGE, "reason": g or j})
    return out


def skipped(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every question a budget kept from being done: query id and why (the ledger's ``not_attempted``)."""
    return [{"query_id": r.get("query_id"), "reason": why} for r in records if (why := not_attempted(r))]


def counts(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Run-level counts: questions attempted, answered, failed in generation, failed in the judge,
    and (when a budget stopped the run) not attempted."""
    skip = sum(1 for r in records if not_attempted(r))
    gen = sum(1 for r in records if generation_failure(r) and not not_attempted(r))
    judge = sum(1 for r in records if not generation_failure(r) and judge_failure(r))
    attempted = len(records) - skip
    out = {"attempted": attempted, "answered": attempted - gen, "failed_generation": gen, "failed_judge": judge}
    if skip:
        out["not_attempted"] = skip
    return out


def failed_share(records: Sequence[Mapping[str, Any]]) -> float:
    c = counts(records)
    return (c["failed_generation"] + c["failed_judge"]) / max(1, c["attempted"])
