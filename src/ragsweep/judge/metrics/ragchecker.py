"""RAGChecker's metrics (Appendix B of the paper), per question from a scored record's claims and
entailment matrices (:func:`ragsweep.judge.ragchecker_metrics.compute_example_metrics`, on
RAGChecker's 0-100 scale); the logged aggregate is their mean over the questions defining them."""

from __future__ import annotations

from typing import Any, Callable

from ragsweep.judge import ragchecker_metrics as rcm
from ragsweep.judge.metrics.registry import Metric, register

_DESCRIPTIONS = {
    "precision": "share of response claims entailed by the ground-truth answer",
    "recall": "share of ground-truth claims entailed by the response",
    "f1": "harmonic mean of precision and recall",
    "claim_recall": "share of ground-truth claims entailed by some retrieved chunk",
    "context_precision": "share of retrieved chunks entailing some ground-truth claim",
    "context_utilization": "share of the retrieved ground-truth claims that the response covers",
    "noise_sensitivity_in_relevant": "share of response claims that are wrong yet entailed by a relevant chunk",
    "noise_sensitivity_in_irrelevant": "share of response claims that are wrong and entailed only by irrelevant chunks",
    "hallucination": "share of response claims that are wrong and entailed by no chunk",
    "self_knowledge": "share of response claims that are correct but entailed by no chunk",
    "faithfulness": "share of response claims entailed by some retrieved chunk",
}
#: lower is better for these (RAGChecker Table 3's arrows; self-knowledge: lower is better "when the
#: generator is expected to fully depend on retrieved context only", Sec. 3.3)
_LOWER = frozenset({"noise_sensitivity_in_relevant", "noise_sensitivity_in_irrelevant", "hallucination", "self_knowledge"})


def _per_question(name: str) -> Callable[[dict[str, Any]], float]:
    def value(record: dict[str, Any]) -> float:
        return float(rcm.compute_example_metrics(record)[name])

    value.__name__ = f"ragchecker_{name}"
    return value


for _group, _names in rcm.METRIC_GROUPS.items():
    for _name in _names:
        register(Metric(
            name=f"ragchecker/{_group}/{_name}",
            scale=100.0,
            higher_is_better=_name not in _LOWER,
            needs_gt=_name not in rcm.GT_FREE,
            per_question=_per_question(_name),
            family="ragchecker",
            description=_DESCRIPTIONS[_name] + " (0-100)",
        ))

register(Metric(
    name=f"ragchecker/overall/{rcm.N_CLAIMS}",
    scale=float("inf"),
    higher_is_better=None,
    needs_gt=False,
    per_question=_per_question(rcm.N_CLAIMS),
    family="ragchecker",
    description="number of claims extracted from the response (a count, Table 3's #Claim)",
))
