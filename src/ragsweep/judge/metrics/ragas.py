"""RAGAS's three metrics per question from a scored record's ``metrics`` (values computed by
:class:`ragsweep.judge.ragas.Ragas`); aggregates are means over the questions defining them."""

from __future__ import annotations

import math
from typing import Any, Callable

from ragsweep.judge.metrics.registry import Metric, register

_NAN = float("nan")


def _value(name: str) -> Callable[[dict[str, Any]], float]:
    def value(record: dict[str, Any]) -> float:
        v = (record.get("metrics") or {}).get(name)
        if v is None:
            return _NAN
        v = float(v)
        return _NAN if math.isnan(v) else v

    value.__name__ = name.replace("/", "_")
    return value


for _name, _desc in (
    ("faithfulness", "share of response statements supported by the context"),
    ("answer_relevance", "mean cosine of the question and questions generated from the response"),
    ("context_relevance", "share of context sentences relevant to the question"),
):
    register(Metric(
        name=f"ragas/{_name}",
        scale=1.0,
        higher_is_better=True,
        needs_gt=False,
        per_question=_value(f"ragas/{_name}"),
        family="ragas",
        description=_desc,
    ))
