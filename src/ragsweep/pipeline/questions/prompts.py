"""What the model is asked (the templates of conf/questions/<name>.yaml, filled in) and how its
answer is read: one JSON object ``{"question", "answer", "quotes"}``, requested by JSON schema where
the server takes one, and read by :func:`parse` from whatever comes back, which never raises: an
answer that is not such an object is None (re-asked, then counted as ``unparsable``)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from ragsweep.corpus.sampling import PAIRED, Sample, Window
from ragsweep.judge.llm_judge import parse_json_object
from ragsweep.pipeline.questions.config import PROMPT_KEYS, PromptsConfig

#: the JSON schema of an answer (response_format; llama.cpp turns it into a grammar)
SCHEMA: dict[str, Any] = {
    "title": "question",
    "type": "object",
    "properties": {  # evidence first: a model that has copied its sentence asks about it (llama.cpp keeps this order)
        "quotes": {"type": "array", "items": {"type": "string"}},
        "question": {"type": "string"},
        "answer": {"type": "string"},
    },
    "required": ["quotes", "question", "answer"],
}


def schema_for(kind: str) -> dict[str, Any]:
    """:data:`SCHEMA`, with the quotes an answerable kind needs: one (two for a two-passage kind). A
    grammar-constrained model then has to start copying, and cannot run on into a list of fragments."""
    if kind == "unanswerable":
        return SCHEMA
    quotes = {**SCHEMA["properties"]["quotes"], "minItems": 1, "maxItems": 2 if kind in PAIRED else 1}
    return {**SCHEMA, "properties": {**SCHEMA["properties"], "quotes": quotes}}


_PLACEHOLDER = re.compile(r"\{(title|passage|title_a|passage_a|title_b|passage_b|question)\}")
MIN_QUESTION_WORDS = 3


def render(template: str, **values: str) -> str:
    """``template`` with its ``{name}`` placeholders filled in; every other brace (the JSON the
    prompt shows) left as it is."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def prompt_id(prompts: PromptsConfig) -> str:
    """``name@sha256[:12]`` of every template: the provenance of a question, and a new id whenever
    a template changes."""
    text = json.dumps({k: getattr(prompts, k) for k in PROMPT_KEYS}, sort_keys=True)
    return f"{prompts.name}@{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def messages(prompts: PromptsConfig, sample: Sample, titles: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The chat messages that ask for one question of ``sample``'s kind."""
    def title(w: Window) -> str:
        return titles.get(w.doc_id) or w.doc_id

    w = sample.windows
    if len(w) == 2:
        user = render(getattr(prompts, sample.kind), title_a=title(w[0]), passage_a=w[0].text,
                      title_b=title(w[1]), passage_b=w[1].text)
    else:
        user = render(getattr(prompts, sample.kind), title=title(w[0]), passage=w[0].text)
    return ((("system", prompts.system),) if prompts.system.strip() else ()) + (("user", user),)


def closed_book(prompts: PromptsConfig, question: str) -> tuple[tuple[str, str], ...]:
    return (("user", render(prompts.closed_book, question=question)),)


@dataclass
class Draft:
    """What the model wrote for one sample."""

    question: str
    answer: str
    quotes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _quotes(value: Any) -> list[str] | None:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return None
    out = []
    for q in value:
        if isinstance(q, dict):  # {"quote": ...} / {"text": ...}
            q = q.get("quote", q.get("text"))
        if isinstance(q, str) and q.strip():
            out.append(" ".join(q.split()))
    return out


def parse(text: Any, kind: str = "single") -> Draft | None:
    """The draft in a model's answer, or None: not one JSON object, no question of at least
    :data:`MIN_QUESTION_WORDS` words, no answer to an answerable kind, quotes that are not strings.
    Never raises."""
    try:
        obj = parse_json_object(text if isinstance(text, str) else None)
    except Exception:  # noqa: BLE001 - whatever a model sends, the answer is "unusable", never a crash
        return None
    if not isinstance(obj, dict):
        return None
    question, answer = obj.get("question"), obj.get("answer", "")
    quotes = _quotes(obj.get("quotes", obj.get("evidence", [])))
    if not isinstance(question, str) or quotes is None:
        return None
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(answer)
    if not isinstance(answer, str):
        return None
    question, answer = " ".join(question.split()), " ".join(answer.split())
    if len(question.split()) < MIN_QUESTION_WORDS or (kind != "unanswerable" and not answer):
        return None
    return Draft(question, answer, quotes)


__all__ = ["Draft", "SCHEMA", "closed_book", "messages", "parse", "prompt_id", "render", "schema_for"]
