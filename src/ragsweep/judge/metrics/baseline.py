"""Trivial lexical baselines, logged beside every judge's number (family ``baseline``).

A judge's score means little without the score that word overlap gets on the same questions: out
of sample the offline judge agrees with people about as well as token F1 does
(``experiments/meta_eval``). These need no model and no judge:

- ``baseline/token_f1``: SQuAD's answer F1 (Rajpurkar et al., 2016, the official
  ``evaluate-v1.1.py``): both texts normalised (lower case, punctuation and the articles a / an /
  the dropped, whitespace collapsed), split on whitespace; precision = shared tokens (with
  multiplicity) / response tokens, recall = shared / ground-truth tokens, F1 their harmonic mean
  (0 when nothing is shared). Ground truth vs response.
- ``baseline/rouge_l``: ROUGE-L F-measure (Lin, 2004) on the same normalised tokens: LCS =
  longest common subsequence of the two token lists, P = LCS / response tokens, R = LCS /
  ground-truth tokens, F = 2PR / (P + R) (beta = 1; 0 when the LCS is 0). Own implementation.
- ``baseline/context_overlap``: lexical adherence, TOKEN level (not per sentence): the share of
  the response's content-word tokens (:func:`ragsweep.corpus.text.content_words`: lower-cased words,
  stopwords dropped; counted with repetition) that occur anywhere in the retrieved context (all
  chunks). No ground truth needed.

A question the documents do not answer (ground truth :data:`ragsweep.records.ABSTENTION`) gets
token F1 = ROUGE-L = 1 when the response abstains, else 0 (:mod:`ragsweep.judge.abstention`).

NaN where undefined: a record whose generation failed (``error``, or ``failure`` at stage
"generation"; a failed judge leaves them defined: they need no judge), an empty
response (no token after normalisation), no ground truth (the first two), no retrieved context
or no content word in the response (the third).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Mapping, Sequence

from ragsweep.judge.metrics.registry import Metric, register
from ragsweep.corpus.text import content_words
from ragsweep.records import is_abstention, response_of

_NAN = float("nan")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, punctuation removed, articles removed, white
    space collapsed."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 of two texts; NaN when either has no token after normalisation."""
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not ref:
        return _NAN
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(ref)
    return 2 * p * r / (p + r)


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence (dynamic programming, two rows)."""
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (beta 1) on normalised tokens; NaN when either has no token."""
    pred, ref = answer_tokens(prediction), answer_tokens(reference)
    if not pred or not ref:
        return _NAN
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(pred), lcs / len(ref)
    return 2 * p * r / (p + r)


def context_overlap(response: str, contexts: Sequence[str]) -> float:
    """Share of the response's content-word tokens found in the contexts; NaN without a
    content word in the response or without any context."""
    tokens = content_words(str(response))
    texts = [str(c) for c in contexts if str(c).strip()]
    if not tokens or not texts:
        return _NAN
    vocab = {w for t in texts for w in content_words(t)}
    return sum(1 for w in tokens if w in vocab) / len(tokens)


def failed(record: Mapping[str, Any]) -> bool:
    """A record whose generation failed (``error``, or ``failure`` at the generation stage): there
    is no answer to score. A failed judge does not void the baselines: they need no judge."""
    from ragsweep.judge.ledger import generation_failure, not_attempted

    return generation_failure(record) is not None or not_attempted(record) is not None


def _gt(record: Mapping[str, Any]) -> str | None:
    gt = record.get("gt_answer")
    return gt if isinstance(gt, str) and gt.strip() else None


def _vs_gt(fn: Any) -> Any:
    def value(record: dict[str, Any]) -> float:
        gt = _gt(record)
        if failed(record) or gt is None:
            return _NAN
        if is_abstention(gt):  # a question the documents do not answer: 1 when the response abstains
            from ragsweep.judge.abstention import abstains

            return 1.0 if abstains(response_of(record)) else 0.0
        return fn(response_of(record), gt)

    value.__name__ = f"baseline_{fn.__name__}"
    return value


def _context_overlap(record: dict[str, Any]) -> float:
    if failed(record):
        return _NAN
    ctx = record.get("retrieved_context") or []
    texts = [c.get("text", "") if isinstance(c, Mapping) else str(c) for c in ctx]
    return context_overlap(response_of(record), texts)


register(Metric(
    name="baseline/token_f1",
    scale=1.0,
    higher_is_better=True,
    needs_gt=True,
    per_question=_vs_gt(token_f1),
    family="baseline",
    description="SQuAD token F1 of the response against the ground-truth answer (normalised tokens)",
))
register(Metric(
    name="baseline/rouge_l",
    scale=1.0,
    higher_is_better=True,
    needs_gt=True,
    per_question=_vs_gt(rouge_l),
    family="baseline",
    description="ROUGE-L F-measure (LCS of normalised tokens) of the response against the ground-truth answer",
))
register(Metric(
    name="baseline/context_overlap",
    scale=1.0,
    higher_is_better=True,
    needs_gt=False,
    per_question=_context_overlap,
    family="baseline",
    description="lexical adherence: share of the response's content-word tokens found in the retrieved context",
))

__all__ = ["context_overlap", "failed", "lcs_length", "normalize_answer", "rouge_l", "token_f1"]
