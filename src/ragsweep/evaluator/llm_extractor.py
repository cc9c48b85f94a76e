"""The LLM claim extractor: claims through the judge (:class:`ragsweep.evaluator.judge.Judge`)
with JSON-schema output ``{"claims": [...]}``; ``claim_format`` ``triplet`` (RefChecker) or
``sentence`` (RAGAS statements)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ragsweep.evaluator.claims import CLAIM_FORMATS, LLM_PROMPT_VERSION, Claim, _positive_int
from ragsweep.evaluator.components import JudgeComponent

TRIPLET_PROMPT = """\
Given a question and a text that answers it, extract every factual claim that the text makes, \
as knowledge triplets [subject, predicate, object] (RefChecker style). Each triplet must stand \
on its own: write names in full instead of pronouns. Do not add anything the text does not \
say. If the text makes no factual claim, return an empty list.

Example
question: How long is the Nile?
text: The Nile is about 6,650 km long. It flows through eleven countries.
output: {{"claims": [["Nile", "is about", "6,650 km long"], ["Nile", "flows through", "eleven countries"]]}}

question: {question}
text: {text}

Answer with a JSON object {{"claims": [[subject, predicate, object], ...]}} and nothing else."""

# The RAGAS statement prompt (Es et al., 2023, sec. 3) with its demonstration and a JSON answer.
SENTENCE_PROMPT = """\
Given a question and answer, create one or more statements from each sentence in the given answer.

Example
question: How long is the Nile?
answer: The Nile is about 6,650 km long and flows through eleven countries.
output: {{"claims": ["The Nile is about 6,650 km long.", "The Nile flows through eleven countries."]}}

question: {question}
answer: {text}

Each statement must stand on its own (no pronouns) and say only what the answer says. If the \
answer makes no statement, return an empty list. Answer with a JSON object \
{{"claims": [statement, ...]}} and nothing else."""


def claims_schema(claim_format: str) -> dict[str, Any]:
    if claim_format == "triplet":
        item: dict[str, Any] = {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 3,
            "maxItems": 3,
        }
    else:
        item = {"type": "string"}
    return {
        "title": f"claims_{claim_format}",
        "type": "object",
        "properties": {"claims": {"type": "array", "items": item}},
        "required": ["claims"],
    }


def parse_claims(text: str | None, claim_format: str) -> list[Claim] | None:
    """The claims of a judge answer ``{"claims": [...]}``; None when it does not parse.

    Triplets must be lists of three non-empty strings, statements non-empty strings; one bad
    item makes the whole answer unparsable (it is retried, never half-used).
    """
    from ragsweep.evaluator.judge import parse_json_object

    obj = parse_json_object(text)
    if obj is None or not isinstance(obj.get("claims"), list):
        return None
    out: list[Claim] = []
    for item in obj["claims"]:
        if claim_format == "triplet":
            if not (isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) for p in item)):
                return None
            parts = [p.strip() for p in item]
            if not all(parts):
                return None
            out.append(parts)
        else:
            if not isinstance(item, str) or not item.strip():
                return None
            out.append(item.strip())
    return out


class LLMExtractor(JudgeComponent):
    """Claims extracted by the judge model, as triplets or statements (see the module doc)."""

    @dataclass
    class Config:
        claim_format: str = "triplet"  # triplet | sentence
        max_tokens: int = 512
        use_question: bool = True  # show the question in the prompt (then it is part of the key)

        def __post_init__(self) -> None:
            if self.claim_format not in CLAIM_FORMATS:
                raise ValueError(
                    f"evaluator.extractor.claim_format must be one of {', '.join(CLAIM_FORMATS)}, "
                    f"got {self.claim_format!r}"
                )
            _positive_int(self.max_tokens, "evaluator.extractor.max_tokens")
            if not isinstance(self.use_question, bool):
                raise ValueError(
                    f"evaluator.extractor.use_question must be true or false, got {self.use_question!r}"
                )

    name = "llm"
    config_prefix = "evaluator.extractor"

    @property
    def uses_question(self) -> bool:
        return self.config.use_question

    @property
    def cache_id(self) -> dict[str, Any]:
        judge = self.need_judge()
        return {
            "extractor": "llm",
            "prompt_version": LLM_PROMPT_VERSION,
            **asdict(self.config),
            "judge": judge.identity,
        }

    def prompt(self, text: str, question: str | None) -> str:
        template = TRIPLET_PROMPT if self.config.claim_format == "triplet" else SENTENCE_PROMPT
        q = question if (self.config.use_question and question) else "(not given)"
        return template.format(question=q, text=text)

    def extract(self, text: str, question: str | None = None) -> list[Claim] | None:
        return self.extract_many([text], [question])[0]

    def extract_many(
        self, texts: Sequence[str], questions: Sequence[str | None] | None = None
    ) -> list[list[Claim] | None]:
        """Claims per text; ``None`` where the judge failed (after its retries). A blank text
        has no claims and costs no call."""
        self.need_judge()
        from ragsweep.evaluator.judge import JudgeItem

        questions = list(questions) if questions is not None else [None] * len(texts)
        out: list[list[Claim] | None] = [None] * len(texts)
        items, where = [], []
        fmt = self.config.claim_format
        for i, (text, q) in enumerate(zip(texts, questions)):
            if not text or not text.strip():
                out[i] = []
                continue
            items.append(
                JudgeItem(
                    messages=[("user", self.prompt(text, q))],
                    schema=claims_schema(fmt),
                    parse=lambda t, fmt=fmt: parse_claims(t, fmt),
                    max_tokens=self.config.max_tokens,
                )
            )
            where.append(i)
        self.stats["extractions"] += len(items)
        for i, claims in zip(where, self.judge.ask(items, desc="extracting claims")):
            out[i] = claims
        return out


__all__ = ["LLMExtractor", "SENTENCE_PROMPT", "TRIPLET_PROMPT", "claims_schema", "parse_claims"]
