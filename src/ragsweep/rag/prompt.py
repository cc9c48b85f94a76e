"""Prompt templates: plain ``str.format`` templates from YAML, never evaluated as code.

A template may use ``{question}`` (required) and ``{documents}``; each retrieved chunk is
rendered with ``document_template`` (fields ``{text}``, ``{title}``, ``{doc_id}``, ``{rank}``) and
joined with ``document_separator``. Field names are checked when the template is built: a
template without ``{question}``, or with any other field, attribute access or indexing, is a
config error naming ``prompt.template``.

Context fitting: when a prompt is longer than the model's context, ``fit`` decides: ``error``
(stop, naming both sizes) or ``drop_lowest`` (drop the lowest-ranked chunks until it fits; every
drop is counted and logged as ``prompt/chunks_dropped``). Nothing is ever cut silently.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ragsweep.errors import ConfigError
from ragsweep.types import Hit

_TEMPLATE_FIELDS = {"question", "documents"}
_DOC_FIELDS = {"text", "title", "doc_id", "rank"}
FIT_POLICIES = ("drop_lowest", "error")


def _fields(template: str, field: str) -> set[str]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{field}: not a valid format string ({exc}); write literal braces as {{{{ and }}}}") from None
    names = set()
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"{field}: field '{{{name}}}' is not allowed; use plain names like {{question}} (no attributes, indexes or positional fields)")
        names.add(name)
    return names


class PromptTemplate:
    @dataclass
    class Config:
        name: str = "custom"
        template: str = "{question}"
        document_template: str = "{text}"
        document_separator: str = "\n"
        answer_tag: str | None = None
        system: str | None = None
        fit: str = "drop_lowest"

        def __post_init__(self) -> None:
            fields = _fields(self.template, "prompt.template")
            if "question" not in fields:
                raise ValueError("prompt.template must contain {question}: add it where the question goes")
            unknown = fields - _TEMPLATE_FIELDS
            if unknown:
                raise ValueError(f"prompt.template: unknown field(s) {sorted(unknown)}; allowed: {{question}}, {{documents}}")
            dunknown = _fields(self.document_template, "prompt.document_template") - _DOC_FIELDS
            if dunknown:
                raise ValueError(f"prompt.document_template: unknown field(s) {sorted(dunknown)}; allowed: {sorted(_DOC_FIELDS)}")
            if self.fit not in FIT_POLICIES:
                raise ValueError(f"prompt.fit must be one of {FIT_POLICIES}, got {self.fit!r}")

    def __init__(self, **kwargs: Any) -> None:
        self.config = self.Config(**kwargs)
        self.name = self.config.name

    @property
    def uses_documents(self) -> bool:
        return "documents" in _fields(self.config.template, "prompt.template")

    def render(self, question: str, hits: Sequence[Hit], titles: dict[str, str | None] | None = None) -> str:
        c = self.config
        docs = c.document_separator.join(
            c.document_template.format(
                text=h.chunk.text, doc_id=h.chunk.doc_id, rank=h.rank, title=(titles or {}).get(h.chunk.doc_id) or ""
            )
            for h in hits
        )
        return c.template.format(question=question, documents=docs)

    def messages(self, prompt: str) -> list[dict[str, str]]:
        msgs = []
        if self.config.system:
            msgs.append({"role": "system", "content": self.config.system})
        msgs.append({"role": "user", "content": prompt})
        return msgs

    def fit(
        self,
        question: str,
        hits: Sequence[Hit],
        budget: int | None,
        count_tokens: Callable[[str], int],
        titles: dict[str, str | None] | None = None,
    ) -> tuple[str, list[Hit], int]:
        """Render within ``budget`` prompt tokens. Returns (prompt, hits used, chunks dropped)."""
        hits = list(hits) if self.uses_documents else []
        prompt = self.render(question, hits, titles)
        if budget is None:
            return prompt, hits, 0
        n = count_tokens(prompt)
        if n <= budget:
            return prompt, hits, 0
        if self.config.fit == "error" or not hits:
            raise ConfigError(
                f"the prompt for question {question[:60]!r} has {n} tokens but the model accepts {budget} "
                f"prompt tokens (context window minus generator.max_tokens): lower retriever.top_k or chunker.size, "
                f"raise the server's context size, or set prompt.fit=drop_lowest"
            )
        # drop the lowest-ranked chunks until the prompt fits
        lo, hi = 0, len(hits)  # keep hits[:m]; find the largest m that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count_tokens(self.render(question, hits[:mid], titles)) <= budget:
                lo = mid
            else:
                hi = mid - 1
        kept = hits[:lo]
        prompt = self.render(question, kept, titles)
        if count_tokens(prompt) > budget:
            raise ConfigError(
                f"even with no retrieved chunks the prompt has {count_tokens(prompt)} tokens, more than the "
                f"model's {budget}: shorten prompt.template or raise the server's context size"
            )
        return prompt, kept, len(hits) - lo
