"""The one label vocabulary of entailment checks.

    Label.ENTAILMENT == "Entailment"   # a str Enum: compares and serialises as its value

Checkers return the plain values (``Label.ENTAILMENT.value``), so records files (RAGChecker's
JSON schema) and cached labels are exactly what they were; ``None`` marks a failed check.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class Label(str, Enum):
    ENTAILMENT = "Entailment"
    NEUTRAL = "Neutral"
    CONTRADICTION = "Contradiction"

    def __str__(self) -> str:  # "Entailment", not "Label.ENTAILMENT"
        return self.value


#: the label values, in RAGChecker's order
LABELS: tuple[str, ...] = tuple(lab.value for lab in Label)
ENTAILMENT: str = Label.ENTAILMENT.value
NEUTRAL: str = Label.NEUTRAL.value
CONTRADICTION: str = Label.CONTRADICTION.value

#: spellings models and datasets use for the three labels (lower case, trailing "." stripped)
ALIASES: dict[str, str] = {
    "entailment": ENTAILMENT,
    "entail": ENTAILMENT,
    "entailed": ENTAILMENT,
    "entails": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION,
    "contradict": CONTRADICTION,
    "contradicted": CONTRADICTION,
    "contradicts": CONTRADICTION,
}
#: two-class NLI models' "not entailed" class reads as Neutral
NOT_ENTAILMENT_ALIASES: dict[str, str] = {
    "not_entailment": NEUTRAL,
    "non_entailment": NEUTRAL,
    "not entailment": NEUTRAL,
    "non-entailment": NEUTRAL,
}


def normalize_label(value: Any) -> str | None:
    """``"entailment"`` / ``"Entailed"`` ... -> ``"Entailment"``; None for anything else."""
    if not isinstance(value, str):
        return None
    return ALIASES.get(value.strip().strip(".").lower())


__all__ = ["ALIASES", "CONTRADICTION", "ENTAILMENT", "LABELS", "Label", "NEUTRAL", "normalize_label"]
