"""RAGChecker metrics as pure functions of the claim-level entailment matrices.

Definitions: RAGChecker paper (Ru et al., 2024), Section 3.3 and Appendix B; arithmetic checked
against RAGChecker's own ``ragchecker/computation.py`` and its ``examples/checking_outputs.json``
(shipped as ``tests/fixtures/ragchecker/``).

Orientation of a record (RAGChecker's names read "reference 2 claim source")::

    answer2response[i]       response claim i  checked against the ground-truth answer  (n_resp)
    response2answer[j]       gt-answer claim j checked against the response             (n_gt)
    retrieved2response[i][c] response claim i  checked against retrieved chunk c        (n_resp x k)
    retrieved2answer[j][c]   gt-answer claim j checked against retrieved chunk c        (n_gt x k)

Only the label ``"Entailment"`` counts as entailed; ``"Neutral"`` and ``"Contradiction"`` do not.
A ``None`` label (a judge call that failed) makes every metric that reads it NaN for that example.

Per example (``m`` = response claims, ``gt`` = ground-truth claims, ``k`` = retrieved chunks;
a chunk is *relevant* when it entails at least one gt claim)::

    precision        = |m entailed by gt| / |m|
    recall           = |gt entailed by m| / |gt|
    f1               = harmonic mean of precision and recall (0 when either is 0)
    claim_recall     = |gt entailed by some chunk| / |gt|
    context_precision= |relevant chunks| / k
    context_utilization = |gt entailed by some chunk and by m| / |gt entailed by some chunk|
    noise_sensitivity_in_relevant   = |m incorrect and entailed by a relevant chunk| / |m|
    noise_sensitivity_in_irrelevant = |m incorrect, entailed by an irrelevant chunk and by no
                                       relevant chunk| / |m|   (exclusive, as RAGChecker's code)
    hallucination    = |m incorrect and entailed by no chunk| / |m|
    self_knowledge   = |m correct and entailed by no chunk| / |m|
    faithfulness     = |m entailed by some chunk| / |m|

A ground truth with no claims (``gt_answer_claims == []``): every chunk is irrelevant, yet both
noise sensitivities are 0, exactly as RAGChecker's ``evaluate_noise_sensitivity`` (its guard
``len(retrieved2answer) > 0`` fails); recall, claim recall and context utilization are 0 (zero
denominators) and context precision is 0.

"correct" = entailed by the ground-truth answer (``answer2response``). A zero denominator gives
0.0, as RAGChecker's code does (an empty response has precision 0). With no retrieved chunks the
Appendix B formulas are applied as written (every claim is "entailed by no chunk"), where
RAGChecker's code returns 0 for hallucination and self-knowledge.

A question the documents do not answer (ground truth :data:`ragsweep.records.ABSTENTION`) is scored
on whether the response abstains: precision = recall = f1 = 1 or 0, every other ground-truth metric
NaN (:mod:`ragsweep.judge.abstention`).

Every metric except ``faithfulness`` needs the ground truth: it is NaN (not 0) for a question
without a ``gt_answer`` (missing, null or blank), and the aggregate (:func:`ragsweep.analysis.scoring.score_run`) skips NaN.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from ragsweep.judge.labels import ENTAILMENT, LABELS  # noqa: F401 - re-exported
from ragsweep.records import is_abstention, response_of

MATRIX_FIELDS = ("answer2response", "response2answer", "retrieved2response", "retrieved2answer")

#: RAGChecker's metric groups, in its order, plus the mean number of response claims (Table 3's
#: "#Claim" column) under "overall".
METRIC_GROUPS: dict[str, tuple[str, ...]] = {
    "overall": ("precision", "recall", "f1"),
    "retriever": ("claim_recall", "context_precision"),
    "generator": (
        "context_utilization",
        "noise_sensitivity_in_relevant",
        "noise_sensitivity_in_irrelevant",
        "hallucination",
        "self_knowledge",
        "faithfulness",
    ),
}
METRICS: tuple[str, ...] = tuple(m for group in METRIC_GROUPS.values() for m in group)
N_CLAIMS = "n_response_claims"
#: Metrics that need no ground truth.
GT_FREE = frozenset({"faithfulness", N_CLAIMS})

_NAN = float("nan")


def has_gt(record: Mapping[str, Any]) -> bool:
    """True when the record has a non-blank ``gt_answer`` string that states an answer (not the
    abstention of a question the documents do not answer: :mod:`ragsweep.judge.abstention`)."""
    gt = record.get("gt_answer")
    return isinstance(gt, str) and gt.strip() != "" and not is_abstention(gt)


def _vector(labels: Any, n: int, name: str) -> np.ndarray | None:
    """Boolean "is Entailment" vector of length ``n``; None when absent or a label is None."""
    if labels is None:
        return None
    if not isinstance(labels, (list, tuple)) or len(labels) != n:
        got = len(labels) if isinstance(labels, (list, tuple)) else type(labels).__name__
        raise ValueError(f"{name}: expected a list of {n} labels, got {got}")
    out = np.zeros(n, dtype=bool)
    for i, lab in enumerate(labels):
        if lab is None:
            return None
        if lab not in LABELS:
            raise ValueError(f"{name}[{i}]: label {lab!r} is not one of {', '.join(LABELS)}")
        out[i] = lab == ENTAILMENT
    return out


def _matrix(rows: Any, n: int, k: int, name: str) -> np.ndarray | None:
    """Boolean ``n x k`` matrix (claims x chunks); None when absent or a label is None."""
    if rows is None:
        return None
    if not isinstance(rows, (list, tuple)) or len(rows) != n:
        got = len(rows) if isinstance(rows, (list, tuple)) else type(rows).__name__
        raise ValueError(f"{name}: expected {n} rows (one per claim), got {got}")
    out = np.zeros((n, k), dtype=bool)
    for i, row in enumerate(rows):
        vec = _vector(row, k, f"{name}[{i}]")
        if vec is None:
            return None
        out[i] = vec
    return out


def _count(record: Mapping[str, Any], claims: str, *fields: str) -> int | None:
    """Number of claims: from the claim list, else from the first matrix that is present."""
    value = record.get(claims)
    if value is not None:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{claims}: expected a list, got {type(value).__name__}")
        return len(value)
    for f in fields:
        if isinstance(record.get(f), (list, tuple)):
            return len(record[f])
    return None


def _n_chunks(record: Mapping[str, Any]) -> int | None:
    ctx = record.get("retrieved_context")
    if isinstance(ctx, (list, tuple)):
        return len(ctx)
    for f in ("retrieved2response", "retrieved2answer"):
        rows = record.get(f)
        if isinstance(rows, (list, tuple)) and rows and isinstance(rows[0], (list, tuple)):
            return len(rows[0])
    return None


def _ratio(num: int | float, den: int | float) -> float:
    return float(num) / float(den) if den else 0.0


def compute_example_metrics(record: Mapping[str, Any], *, scale: float = 100.0) -> dict[str, float]:
    """RAGChecker metrics of one record (a RAGChecker output result).

    Returns a flat dict with the eleven metrics of :data:`METRICS` on a 0-``scale`` scale
    (default 0-100 like the paper; ``scale=1.0`` gives RAGChecker's per-example fractions) and
    ``n_response_claims`` (a count, never scaled). NaN marks a metric that is undefined for this
    example: no ground truth, a matrix missing, or a ``None`` label in a matrix it reads.

    Raises ``ValueError`` when a matrix does not match the claim and chunk counts or holds a label
    other than Entailment/Neutral/Contradiction/None.
    """
    n_resp = _count(record, "response_claims", "answer2response", "retrieved2response")
    n_gt = _count(record, "gt_answer_claims", "response2answer", "retrieved2answer")
    k = _n_chunks(record)
    gt = has_gt(record)

    def vec(name: str, n: int | None) -> np.ndarray | None:
        return None if n is None else _vector(record.get(name), n, name)

    def mat(name: str, n: int | None) -> np.ndarray | None:
        return None if n is None or k is None else _matrix(record.get(name), n, k, name)

    # correct[i]: response claim i entailed by the gt answer; covered[j]: gt claim j by the response
    correct = vec("answer2response", n_resp) if gt else None
    covered = vec("response2answer", n_gt) if gt else None
    resp_chunks = mat("retrieved2response", n_resp)
    gt_chunks = mat("retrieved2answer", n_gt) if gt else None

    out = dict.fromkeys(METRICS, _NAN)
    out[N_CLAIMS] = float(n_resp) if n_resp is not None else _NAN

    if correct is not None:
        out["precision"] = _ratio(correct.sum(), len(correct))
    if covered is not None:
        out["recall"] = _ratio(covered.sum(), len(covered))
    p, r = out["precision"], out["recall"]
    if not (math.isnan(p) or math.isnan(r)):
        out["f1"] = 2 * p * r / (p + r) if p > 0 and r > 0 else 0.0

    if gt_chunks is not None:
        recalled = gt_chunks.any(axis=1)  # gt claim entailed by some chunk
        relevant = gt_chunks.any(axis=0)  # chunk entails some gt claim
        out["claim_recall"] = _ratio(recalled.sum(), len(recalled))
        out["context_precision"] = _ratio(relevant.sum(), len(relevant))
        if covered is not None:
            out["context_utilization"] = _ratio((recalled & covered).sum(), recalled.sum())

    if resp_chunks is not None:
        faithful = resp_chunks.any(axis=1)  # response claim entailed by some chunk
        out["faithfulness"] = _ratio(faithful.sum(), len(faithful))
        if correct is not None:
            incorrect = ~correct
            out["hallucination"] = _ratio((incorrect & ~faithful).sum(), len(faithful))
            out["self_knowledge"] = _ratio((correct & ~faithful).sum(), len(faithful))
            if gt_chunks is not None and len(gt_chunks) == 0:
                # no ground-truth claims: RAGChecker's evaluate_noise_sensitivity takes its else
                # branch (len(retrieved2answer) == 0) and gives 0 to both, although every chunk
                # is then "irrelevant"
                out["noise_sensitivity_in_relevant"] = 0.0
                out["noise_sensitivity_in_irrelevant"] = 0.0
            elif gt_chunks is not None:
                in_relevant = (resp_chunks & relevant[None, :]).any(axis=1)
                in_irrelevant = (resp_chunks & ~relevant[None, :]).any(axis=1) & ~in_relevant
                out["noise_sensitivity_in_relevant"] = _ratio(
                    (incorrect & in_relevant).sum(), len(faithful)
                )
                out["noise_sensitivity_in_irrelevant"] = _ratio(
                    (incorrect & in_irrelevant).sum(), len(faithful)
                )

    if is_abstention(record.get("gt_answer")):  # the documents do not answer it: did the response abstain?
        from ragsweep.judge.abstention import abstains

        out["precision"] = out["recall"] = out["f1"] = 1.0 if abstains(response_of(record)) else 0.0
    for m in METRICS:
        out[m] *= scale
    return out


def flatten(
    metrics: Mapping[str, Any], prefix: str = "ragchecker/", *, drop_nan: bool = False
) -> dict[str, float]:
    """Flat ``{name: value}`` for MLflow: nested groups are joined with ``/``.

    ``flatten(ragchecker_layout(...)[0])`` gives ``ragchecker/overall/precision``,
    ``ragchecker/generator/faithfulness``, ...; a flat per-example dict gives
    ``ragchecker/precision``. ``drop_nan`` leaves out undefined values.
    """
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{prefix}{key}/", drop_nan=drop_nan))
        elif value is not None:
            value = float(value)
            if not (drop_nan and math.isnan(value)):
                flat[f"{prefix}{key}"] = value
    return flat

