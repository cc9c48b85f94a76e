"""Questions the documents do not answer (ground truth :data:`ragsweep.records.ABSTENTION`): the
right response abstains, and such a question is scored on that alone.

* RAGChecker's overall precision, recall and F1 and the word-overlap baselines (token F1, ROUGE-L)
  are 100 (1) when the response abstains and 0 when it answers; an empty response counts as an
  abstention (it states nothing);
* every other metric that needs the ground truth (claim recall, context precision, context
  utilization, noise sensitivity, hallucination, self-knowledge, TRACe relevance and completeness)
  is NaN, not applicable: there is no ground-truth point to retrieve or state. The retrieval metrics
  skip the question too (it has no relevant span). The metrics that need no ground truth
  (faithfulness, adherence, context overlap) are computed as for any question.

:func:`abstains` reads the response: a refusal or "not in the context" phrase near its start, or a
short answer that is only such a phrase. It is lexical (no model), so a response that answers and
then hedges ("Paris. I am not sure, though") is an answer, and one that abstains in words it does
not list is scored as an answer: the phrases below are the contract (tests/unit/judge/test_abstention.py).
"""

from __future__ import annotations

import re

from ragsweep.records import is_abstention

__all__ = ["ABSTAIN_PATTERNS", "abstains", "is_abstention"]

ABSTAIN_PATTERNS = (
    r"\bi (?:do not|don't|cannot|can't|am unable to|am not able to) (?:know|answer|tell|find|say|determine)\b",
    r"\b(?:i have no|there is no|no) (?:information|answer|mention|data|details?)\b",
    r"\bunanswerable\b",
    r"\b(?:cannot|can't|can not|could not|couldn't) be (?:answered|determined|found|inferred)\b",
    r"\b(?:is|are|was|were) not (?:mentioned|stated|provided|given|specified|included|discussed|described|available)\b",
    r"\b(?:does|do|did) not (?:mention|say|state|provide|specify|contain|include|answer|discuss|describe)\b",
    r"\b(?:doesn't|don't|didn't) (?:mention|say|state|provide|specify|contain|include|answer|discuss|describe)\b",
    r"\bnot enough (?:information|context)\b",
    r"\binsufficient (?:information|context)\b",
    r"\bunknown\b",
)
_ABSTAIN = re.compile("|".join(ABSTAIN_PATTERNS), re.IGNORECASE)
#: the phrase must start within this many characters of the response (an answer that ends with a
#: hedge is an answer)
HEAD_CHARS = 160


def abstains(response: str) -> bool:
    """Whether ``response`` abstains: empty, or an abstention phrase in its first sentence(s)."""
    text = " ".join(str(response or "").replace("’", "'").split())
    if not text:
        return True
    m = _ABSTAIN.search(text)
    return m is not None and m.start() < HEAD_CHARS
