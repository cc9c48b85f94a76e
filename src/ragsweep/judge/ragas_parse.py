"""Reading the RAGAS judge's answers: the JSON schemas it is asked for, the parsers of its
questions and sentence keys, and matching the sentences it names to the keyed context."""

from __future__ import annotations

import re
from typing import Any, Sequence


def questions_schema(n: int) -> dict[str, Any]:
    return {
        "title": "questions",
        "type": "object",
        "properties": {
            "questions": {"type": "array", "items": {"type": "string"}, "minItems": n, "maxItems": n}
        },
        "required": ["questions"],
    }


SENTENCE_KEYS_SCHEMA: dict[str, Any] = {
    "title": "sentence_keys",
    "type": "object",
    "properties": {"sentence_keys": {"type": "array", "items": {"type": "string"}}},
    "required": ["sentence_keys"],
}


def parse_questions(text: str | None, n: int) -> list[str] | None:
    from ragsweep.judge.llm_judge import parse_json_object

    obj = parse_json_object(text)
    qs = obj.get("questions") if obj else None
    if not isinstance(qs, list) or len(qs) != n or not all(isinstance(q, str) and q.strip() for q in qs):
        return None
    return [q.strip() for q in qs]


def parse_sentence_keys(text: str | None) -> list[str] | None:
    """The judge's items (keys, or sentence text where it wrote text), stripped; a bare
    "Insufficient Information" (as a string) is an empty extraction."""
    from ragsweep.judge.llm_judge import parse_json_object

    obj = parse_json_object(text)
    keys = obj.get("sentence_keys") if obj else None
    if isinstance(keys, str) and _norm_text(keys) == _INSUFFICIENT:
        return []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        return None
    return [k.strip() for k in keys if k.strip()]


_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_INSUFFICIENT = "insufficient information"


def _norm_text(text: str) -> str:
    """Lower case, every run of punctuation / spaces one space, trimmed."""
    return _NON_WORD.sub(" ", str(text).lower()).strip()


def match_sentences(items: Sequence[str], sentences: Sequence[Sequence[str]]) -> tuple[list[str], list[str]]:
    """The keyed context ``sentences`` that the judge's ``items`` name, and the items naming none.

    An item is a key (``"0a"``, ``"0a."``) or a sentence's text: it names the sentence whose
    normalised text equals it, else every sentence (of at least 3 words) whose normalised text
    it contains (several sentences returned as one string). "Insufficient Information" names
    nothing and is not unmatched. Keys come back in context order, once each."""
    by_key = {str(k).strip().rstrip("."): k for k, _ in sentences}
    normed = [(k, _norm_text(t)) for k, t in sentences]
    picked: set[str] = set()
    unmatched: list[str] = []
    for item in items:
        key = item.strip().rstrip(".")
        if key in by_key:
            picked.add(by_key[key])
            continue
        n = _norm_text(item)
        if not n or n == _INSUFFICIENT:
            continue
        exact = [k for k, t in normed if t and t == n]
        inside = exact or [k for k, t in normed if len(t.split()) >= 3 and f" {t} " in f" {n} "]
        if inside:
            picked.update(inside)
        else:
            unmatched.append(item)
    return [k for k, _ in sentences if k in picked], unmatched
