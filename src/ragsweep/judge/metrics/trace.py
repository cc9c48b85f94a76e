"""TRACe (RAGBench eq. 1-4) per question from a scored record's ``trace`` annotations
(:mod:`ragsweep.judge.trace_steps`); aggregates are means over the questions defining them."""

from __future__ import annotations

import math
from typing import Any, Callable

from ragsweep.judge.metrics.registry import Metric, register

_NAN = float("nan")


def _field(field: str) -> Callable[[dict[str, Any]], float]:
    def value(record: dict[str, Any]) -> float:
        trace = record.get("trace")
        v = trace.get(field) if isinstance(trace, dict) else None
        if v is None:
            return _NAN
        v = float(v)
        return _NAN if math.isnan(v) else v

    value.__name__ = f"trace_{field}"
    return value


for _name, _field_name, _needs_gt, _desc in (
    ("relevance", "relevance_score", True, "share of the context (in sentences' characters) relevant to the ground-truth claims"),
    ("utilization", "utilization_score", False, "share of the context the response uses"),
    ("completeness", "completeness_score", True, "share of the relevant context that the response uses"),
    ("adherence_rate", "adherence_score", False, "1 when every response claim/sentence is supported by the context, else 0"),
    ("sentence_adherence", "sentence_adherence", False, "share of the response sentences supported by the context"),
    ("overall_supported", "overall_supported", False,
     "the annotator judge's own overall_supported verdict, 1 or 0 (trace_mode=annotator only; NaN otherwise)"),
):
    register(Metric(
        name=f"trace/{_name}",
        scale=1.0,
        higher_is_better=True,
        needs_gt=_needs_gt,
        per_question=_field(_field_name),
        family="trace",
        description=_desc,
    ))
