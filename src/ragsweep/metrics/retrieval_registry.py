"""The retrieval metrics as logged by the pipeline (``retrieval/<name>_at_k``, at the run's k),
computed per query by :mod:`ragsweep.metrics.retrieval` from span relevance (not from a scored
record, so no per-question function here)."""

from __future__ import annotations

from ragsweep.metrics.registry import Metric, register

_DESCRIPTIONS = {
    "recall": "share of the relevant spans overlapped by a top-k chunk",
    "precision": "relevant chunks among the top k, over k",
    "mrr": "1 / rank of the first relevant chunk in the top k (0 when none)",
    "ndcg": "binary-gain nDCG of the top k",
    "hit": "1 when a top-k chunk is relevant",
}

for _name, _desc in _DESCRIPTIONS.items():
    register(Metric(
        name=f"retrieval/{_name}_at_k",
        scale=1.0,
        higher_is_better=True,
        needs_gt=True,
        per_question=None,
        family="retrieval",
        description=_desc + " (queries with relevance labels only)",
    ))
