"""The LLM claim extractor: claims through the judge (:class:`ragsweep.judge.llm_judge.Judge`).

``claim_format="triplet"`` (default) is RAGChecker's extractor, which is RefChecker's
``LLMExtractor(claim_format="triplet")``: the prompt is RefChecker's triplet-extraction prompt
VERBATIM (``LLM_TRIPLET_EXTRACTION_PROMPT_Q`` with the question, ``LLM_TRIPLET_EXTRACTION_PROMPT``
without one; amazon-science/RefChecker ``refchecker/extractor/extractor_prompts.py`` at commit
:data:`REFCHECKER_COMMIT`, Apache-2.0, copied into ``tests/fixtures/refchecker/`` and compared by
``tests/contract/test_prompts_golden.py``), including its rules against overlapping, redundant and
inverse triplets; the completion budget is RAGChecker's ``extractor_max_new_tokens=1000``. The
answer is read as RefChecker reads it (:func:`refchecker_triplets`: ``("s", "p", "o")`` lines
after the first ``###``, duplicates and the ``(subject, predicate, object)`` placeholder
dropped). ``structured=true`` additionally constrains the answer with the JSON schema
``{"claims": [[s, p, o], ...]}`` (for small local judges; not what the paper did); a JSON answer
is read either way.

Differences from RefChecker, all on the side of never guessing: an answer in which no triplet
can be read is re-asked and, if it still has none, counted as a failed extraction (metrics NaN) -
RefChecker would take it as "no claims" - unless the answer is empty or says "none"/"abstain".

``claim_format="sentence"``: the RAGAS statement prompt (Es et al., 2023) with JSON output
``{"claims": [statement, ...]}``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ragsweep.judge.claims import CLAIM_FORMATS, LLM_PROMPT_VERSION, Claim, _positive_int
from ragsweep.judge.components import JudgeComponent

#: The RefChecker commit the prompts were copied from (``tests/fixtures/refchecker/``).
REFCHECKER_COMMIT = "1df1b25cee792ba2b171302e31ca4f768bd67703"

# ---- RefChecker refchecker/extractor/extractor_prompts.py, its text verbatim (Apache-2.0) -------
# (a trailing space at a line end is written \x20 so that no editor strips it)
# The two prompts share their rule against redundant triplets and their first example (the Tesla
# bot); each is written once here, and the prompts are joined from the parts exactly as RefChecker
# writes them (tests/contract/test_prompts_golden.py compares them character for character).
_REDUNDANCY = """Clarification on redundancy: First, Do not create triplets that reverse the subject and object to state the same fact. Next, Ensure each fact is represented uniquely in the simplest form, and avoid creating multiple triplets that convey the same information.

Here are some in-context examples:

"""

_OPTIMUS_KG = """Optimus (or Tesla Bot) is a robotic humanoid under development by Tesla, Inc. It was announced at the company's Artificial Intelligence (AI) Day event on August 19, 2021.

### KG:
("Optimus", "is", "robotic humanoid")
("Optimus", "under development by", "Tesla, Inc.")
("Optimus", "also known as", "Tesla Bot")
("Tesla, Inc.", "announced", "Optimus")
("Announcement of Optimus", "occurred at", "Artificial Intelligence (AI) Day event")
("Artificial Intelligence (AI) Day event", "held on", "August 19, 2021")
("Artificial Intelligence (AI) Day event", "organized by", "Tesla, Inc.")

"""

TRIPLET_PROMPT_Q = """Given a question and a candidate answer to the question, please extract a KG from the candidate answer condition on the question and represent the KG with triples formatted with ("subject", "predicate", "object"), each triplet in a line.
Please note that this is an EXTRACTION task, so DO NOT care about whether the content of the candidate answer is factual or not, just extract the triplets from it. Importantly, ensure that the extracted KG does not contain overlapping or redundant information. Each piece of information should be represented in the KG only once, and you should avoid creating triplets that are simply the inverse of another triplet. For example, if you extract the triplet ("John", "owns", "Car"), do not also include ("Car", "owned by", "John") as it represents the same information in reverse.

""" + _REDUNDANCY + """### Question:
Given these paragraphs about the Tesla bot, what is its alias?

### Candidate Answer:
""" + _OPTIMUS_KG + """### Question:
here is some text about Andre Weiss, how many years was Andre at University of Dijon in Paris?

### Candidate Answer:
11 years

### KG:
("Andre Weiss at University of Dijon in Paris", "duration", "11 years")


Now generate the KG for the following candidate answer based on the provided question:

### Question:
{q}

### Candidate Answer:
{a}

### KG:
"""

TRIPLET_PROMPT = """Given an input text, please extract a KG from the text and represent the KG with triples formatted with ("subject", "predicate", "object"), each triplet in a line. Please note that this is an EXTRACTION task, so DO NOT care about whether the content of the candidate answer is factual or not, just extract the triplets from it. Importantly, ensure that the extracted KG does not contain overlapping or redundant information. Each piece of information should be represented in the KG only once, and you should avoid creating triplets that are simply the inverse of another triplet. For example, if you extract the triplet ("John", "owns", "Car"), do not also include ("Car", "owned by", "John") as it represents the same information in reverse.

""" + _REDUNDANCY + """### Input:
""" + _OPTIMUS_KG + """### Input:
The song "Here Comes the Boom" was originally released by American rock band Nelly in 2002 for the soundtrack of the film "The Longest Yard."

### KG:
("The song 'Here Comes the Boom'", "originally released by", "American rock band Nelly")
("The song 'Here Comes the Boom'", "released in", "2002")
("The song 'Here Comes the Boom'", "featured in", "soundtrack of the film 'The Longest Yard'")
("American rock band Nelly", "released", "The song 'Here Comes the Boom'")
("The Longest Yard", "had soundtrack featuring", "The song 'Here Comes the Boom'")


Now generate the KG for the provided input text:

### Input:
{input_text}

### KG:
"""
# ---- end of the verbatim copy ---------------------------------------------------------------

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


# RefChecker's ExtractorBase._parse_claim_triplets patterns: a triplet on one line, each part in
# double or single quotes.
_TRIPLET_PATTERNS = [
    r'\(".*", ".*", ".*"\)',
    r'\(".*", ".*", \'.*\'\)',
    r'\(".*", \'.*\', ".*"\)',
    r'\(\'.*\', ".*", ".*"\)',
    r'\(".*", \'.*\', \'.*\'\)',
    r'\(\'.*\', ".*", \'.*\'\)',
    r'\(\'.*\', \'.*\', ".*"\)',
    r'\(\'.*\', \'.*\', \'.*\'\)',
]
_NONE_ANSWER = re.compile(r"^(?:none\.?|abstain\.?|n/a|\[\]|no (?:claims|triplets|facts?|kg)\.?)?$", re.IGNORECASE)


def _parse_triplets(pattern: str, text: str) -> list[list[str]]:
    """RefChecker's ``ExtractorBase._parse_triplets`` (``ast.literal_eval`` where it has ``eval``)."""
    out = []
    for m in re.findall(pattern, text):
        try:
            t = ast.literal_eval(m)
        except (ValueError, SyntaxError):
            t = m.split(", ")
            if t[0].startswith("("):
                t[0] = t[0][1:]
            if t[-1].endswith(")"):
                t[-1] = t[-1][:-1]
        if not isinstance(t, (tuple, list)) or len(t) != 3:
            continue
        if any(not isinstance(e, str) for e in t) or any(len(e) == 0 for e in t):
            continue
        out.append(list(t))
    return out


def _after_prefix(text: str) -> str:
    """RefChecker's ``parse_claims(response, claim_starting_prefix="###")``: the answer after its
    first ``###`` (the prompt's ``### KG:`` echoed back), if there is one."""
    text = text.strip()
    if "###" in text:
        text = text[text.index("###") + 3 :]
    return text


def refchecker_triplets(text: str) -> list[list[str]]:
    """The triplets RefChecker reads from an extraction answer: every ``("s", "p", "o")`` (any
    quoting) after the first ``###``, in pattern order, duplicates and the literal
    ``("subject", "predicate", "object")`` dropped."""
    text = _after_prefix(text)
    found: list[list[str]] = []
    for p in _TRIPLET_PATTERNS:
        found += _parse_triplets(p, text)
    out: list[tuple[str, ...]] = []
    for t in map(tuple, found):
        if t not in out and t != ("subject", "predicate", "object"):
            out.append(t)
    return [list(t) for t in out]


def parse_claims(text: str | None, claim_format: str) -> list[Claim] | None:
    """The claims of a judge answer; None when it cannot be read (then it is re-asked).

    A JSON object ``{"claims": [...]}`` is read strictly: triplets must be lists of three
    non-empty strings, statements non-empty strings; one bad item makes the whole answer
    unparsable (retried, never half-used). Otherwise a triplet answer is read as RefChecker reads
    it (:func:`refchecker_triplets`); an answer with no readable triplet counts as no claims only
    when it is empty or says so ("None", "Abstain"), else it is unparsable.
    """
    from ragsweep.judge.llm_judge import parse_json_object

    obj = parse_json_object(text)
    if obj is not None and isinstance(obj.get("claims"), list):
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
    if claim_format != "triplet" or not isinstance(text, str):
        return None
    triplets = refchecker_triplets(text)
    if triplets:
        return triplets
    rest = _after_prefix(text)
    rest = re.sub(r"^\s*KG\s*:?", "", rest).strip()
    return [] if _NONE_ANSWER.match(rest) else None


class LLMExtractor(JudgeComponent):
    """Claims extracted by the judge model, as triplets or statements (see the module doc)."""

    @dataclass
    class Config:
        claim_format: str = "triplet"  # triplet | sentence
        max_tokens: int = 1000  # RAGChecker's extractor_max_new_tokens
        use_question: bool = True  # show the question in the prompt (then it is part of the key)
        structured: bool = False  # also constrain a triplet answer by a JSON schema (not RefChecker's)

        def __post_init__(self) -> None:
            if self.claim_format not in CLAIM_FORMATS:
                raise ValueError(
                    f"evaluator.extractor.claim_format must be one of {', '.join(CLAIM_FORMATS)}, "
                    f"got {self.claim_format!r}"
                )
            _positive_int(self.max_tokens, "evaluator.extractor.max_tokens")
            for name in ("use_question", "structured"):
                if not isinstance(getattr(self, name), bool):
                    raise ValueError(
                        f"evaluator.extractor.{name} must be true or false, got {getattr(self, name)!r}"
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
        """RefChecker's triplet prompt (with the question when there is one and ``use_question``),
        or the RAGAS statement prompt."""
        q = question if (self.config.use_question and question) else None
        if self.config.claim_format == "triplet":
            if q is None:
                return TRIPLET_PROMPT.format(input_text=text)
            return TRIPLET_PROMPT_Q.format(q=q, a=text)
        return SENTENCE_PROMPT.format(question=q or "(not given)", text=text)

    def schema(self) -> dict[str, Any] | None:
        fmt = self.config.claim_format
        return claims_schema(fmt) if (fmt == "sentence" or self.config.structured) else None

    def extract(self, text: str, question: str | None = None) -> list[Claim] | None:
        return self.extract_many([text], [question])[0]

    def extract_many(
        self, texts: Sequence[str], questions: Sequence[str | None] | None = None
    ) -> list[list[Claim] | None]:
        """Claims per text; ``None`` where the judge failed (after its retries). A blank text
        has no claims and costs no call."""
        self.need_judge()
        from ragsweep.judge.llm_judge import JudgeItem

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
                    schema=self.schema(),
                    parse=lambda t, fmt=fmt: parse_claims(t, fmt),
                    max_tokens=self.config.max_tokens,
                    owner=q,
                )
            )
            where.append(i)
        self.stats["extractions"] += len(items)
        for i, claims in zip(where, self.judge.ask(items, desc="extracting claims")):
            out[i] = claims
        return out


__all__ = [
    "LLMExtractor",
    "REFCHECKER_COMMIT",
    "SENTENCE_PROMPT",
    "TRIPLET_PROMPT",
    "TRIPLET_PROMPT_Q",
    "claims_schema",
    "parse_claims",
    "refchecker_triplets",
]
