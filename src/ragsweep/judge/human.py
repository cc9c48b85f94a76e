"""What a human label is: one person's value, on 0..1, for one question of one system, under a
label name of the metric registry (:mod:`ragsweep.judge.metrics.human`: ``correct``, ``complete``,
``faithful``, ``supported``). Shared by the MLflow side (:mod:`ragsweep.tracking.labels`)
and the analysis (:mod:`ragsweep.analysis.labels`, PPI)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

SAMPLE_TAG = "ragsweep.label"
SAMPLE_TAG_VALUE = "sample"
SAMPLE_ARTIFACT = "label_sample.json"  # on the parent run (top level: tracking.read_json_artifact)
_TRUE = {"yes", "y", "true", "t", "supported", "correct", "pass"}
_FALSE = {"no", "n", "false", "f", "unsupported", "incorrect", "fail"}


class LabelError(ValueError):
    """Bad labels input; the message names the file, line, field and the fix."""


@dataclass(frozen=True)
class Label:
    system: str  # a run id or run name (resolved against the sweep's runs)
    question_id: str
    name: str  # a human label of the registry (e.g. "correct")
    value: float  # 0..1
    labeller: str = ""
    source: str = "file"  # file | mlflow

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def label_kinds() -> dict[str, Any]:
    """name -> :class:`ragsweep.judge.metrics.registry.HumanLabel`."""
    from ragsweep.judge.metrics.registry import human_labels

    return {h.name: h for h in human_labels()}


#: labels of a generated question itself (``ragsweep-questions``), not of one system's answer: the same
#: for every system that answered it. In a labels file their ``system`` is :data:`QUESTION_SYSTEM`.
QUESTION_LABELS = {
    "valid": "the question is a fair question about the documents: it makes sense on its own, and it is "
             "answered by its evidence (an unanswerable one: the documents really do not answer it)",
    "reference_correct": "its reference answer is correct and complete (an unanswerable one: abstaining is right)",
}
QUESTION_SYSTEM = "questions"


def is_question_label(name: str) -> bool:
    return name in QUESTION_LABELS


def canonical_name(name: str) -> str | None:
    """The label an assessment name means (a registry label: ``correct``, ``human/correct`` ...; or a
    question label: ``valid``, ``reference_correct``), else None."""
    n = str(name or "").strip().lower()
    for prefix in ("human/", "human_", "human."):
        if n.startswith(prefix):
            n = n[len(prefix):]
    return n if n in label_kinds() or n in QUESTION_LABELS else None


def parse_value(v: Any, where: str = "value") -> float:
    """A label value as 0..1: yes/no, true/false, 1/0, or a number in [0, 1]."""
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return 1.0
        if s in _FALSE:
            return 0.0
        try:
            v = float(s)
        except ValueError:
            raise LabelError(f"{where}: {v!r} is not a label value; use yes/no, true/false or a number in [0, 1]") from None
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise LabelError(f"{where}: {v!r} is not a label value; use yes/no, true/false or a number in [0, 1]") from None
    if not (math.isfinite(x) and 0.0 <= x <= 1.0):
        raise LabelError(f"{where}: {v!r} is outside [0, 1]; labels are on 0..1 (yes = 1, no = 0)")
    return x
