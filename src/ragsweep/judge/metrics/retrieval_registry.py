"""The retrieval metrics as logged by the pipeline: ``retrieval/<name>_at_k`` at the run's k, and the
same at fixed cutoffs ``retrieval/<name>_at_<c>`` for c in 1, 5, 10, 20 up to the retrieval depth, so
runs with different top-k compare on the same cutoff. Computed per query by
:mod:`ragsweep.judge.metrics.retrieval` from span relevance and kept in each record's ``metrics``
(only for questions with relevance labels; NaN for the others)."""

from __future__ import annotations

import math
from typing import Any, Callable

from ragsweep.judge.metrics.registry import Metric, register

CUTOFFS = (1, 5, 10, 20)

_DESCRIPTIONS = {
    "recall": "share of the relevant spans overlapped by a top-{c} chunk",
    "precision": "relevant chunks among the top {c}, over {c}",
    "mrr": "1 / rank of the first relevant chunk in the top {c} (0 when none)",
    "ndcg": "binary-gain nDCG of the top {c}",
    "hit": "1 when a top-{c} chunk is relevant",
}


def _from_record(name: str) -> Callable[[dict[str, Any]], float]:
    def value(record: dict[str, Any]) -> float:
        v = (record.get("metrics") or {}).get(name)
        if v is None:
            return float("nan")
        v = float(v)
        return v if math.isfinite(v) else float("nan")

    value.__name__ = name.replace("/", "_")
    return value


def cutoffs(depth: int) -> list[int]:
    """The fixed cutoffs a run retrieving ``depth`` chunks reports."""
    return [c for c in CUTOFFS if c <= depth]


for _name, _desc in _DESCRIPTIONS.items():
    for _suffix, _c in [("k", "k")] + [(str(c), str(c)) for c in CUTOFFS]:
        _full = f"retrieval/{_name}_at_{_suffix}"
        register(Metric(
            name=_full,
            scale=1.0,
            higher_is_better=True,
            needs_gt=True,
            per_question=_from_record(_full),
            family="retrieval",
            description=_desc.format(c=_c) + " (queries with relevance labels only)",
        ))
