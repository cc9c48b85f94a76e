"""The filters a grounded draft passes, each a pure function of its inputs (the model calls they need
are made by the caller, :mod:`ragsweep.pipeline.questions.generate`):

* ``copies_evidence``: :func:`copy_overlap`, the share of the question's word 3-grams that occur in
  its evidence, at or above ``filters.copy_overlap`` (a question that is its evidence sentence
  reworded by one word retrieves itself and measures nothing);
* ``duplicate``: :func:`duplicates`, MiniLM cosine (the bundled all-MiniLM-L6-v2, through the
  embedding cache) at or above ``filters.duplicate_cosine`` to a question kept before it;
* ``not_entailed``: :func:`entailed_share`, the share of the reference answer's claims (the
  evaluator's extractor) that the configured checker (``evaluator.checker``) finds entailed by the
  evidence, below ``filters.entailment``;
* ``closed_book``: :func:`answered_closed_book`, the model's answer with no context entails every
  claim of the reference answer (the same checker, the answer kind) and does not abstain.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Sequence

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def _grams(text: str, n: int) -> list[tuple[str, ...]]:
    w = [m.group().lower() for m in _WORD.finditer(text)]
    return [tuple(w[i : i + n]) for i in range(len(w) - n + 1)] if len(w) >= n else ([tuple(w)] if w else [])


def copy_overlap(question: str, evidence: Sequence[str], n: int = 3) -> float:
    """Share of the question's word ``n``-grams (lower case) found in the evidence texts (0 with no
    evidence)."""
    q = _grams(question, n)
    have = {g for t in evidence for g in _grams(t, n)}
    return sum(1 for g in q if g in have) / len(q) if q and have else 0.0


def duplicates(vectors: np.ndarray, threshold: float) -> list[tuple[int | None, float]]:
    """For each row in order: ``(index of the earlier kept row it duplicates or None, its largest
    cosine to an earlier kept row)``; a duplicate is not kept, so three near-copies keep the first."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.size == 0:
        return []
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    kept: list[int] = []
    out: list[tuple[int | None, float]] = []
    for i in range(len(v)):
        if kept:
            sims = v[kept] @ v[i]
            j = int(np.argmax(sims))
            best = float(sims[j])
            if best >= threshold:
                out.append((kept[j], best))
                continue
        else:
            best = 0.0
        kept.append(i)
        out.append((None, best))
    return out


def embed(texts: Sequence[str], cache: Any, model: str = "minilm") -> np.ndarray:
    """MiniLM vectors of ``texts`` through the shared embedding cache (:mod:`ragsweep.corpus.embeddings`)."""
    from ragsweep.corpus.embeddings import embed_texts, load_sentence_transformer, model_key

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    found, _ = embed_texts(list(texts), model_key(model), lambda part: load_sentence_transformer(model, "cpu").encode(
        part, show_progress_bar=False, convert_to_numpy=True), cache, progress=False)
    return np.stack([found[t] for t in texts])


def entailed_share(labels: Sequence[Any]) -> float | None:
    """Share of Entailment among a candidate's labels; None when a check failed (no guess)."""
    from ragsweep.judge.labels import ENTAILMENT

    if any(lab is None for lab in labels):
        return None
    return sum(1 for lab in labels if lab == ENTAILMENT) / len(labels) if labels else 0.0


def answered_closed_book(answer: str | None, labels: Sequence[Any]) -> bool:
    """Whether the model's context-free ``answer`` gives the reference answer: it does not abstain
    and the checker finds every claim of the reference in it."""
    from ragsweep.judge.abstention import abstains

    if not answer or abstains(answer):
        return False
    share = entailed_share(labels)
    return share is not None and share >= 1.0 and len(labels) > 0


def tally(reasons: Sequence[str | None]) -> Counter:
    return Counter(r for r in reasons if r)


__all__ = ["answered_closed_book", "copy_overlap", "duplicates", "embed", "entailed_share", "tally"]
