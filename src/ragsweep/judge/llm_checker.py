"""The LLM checker: RAGChecker's checker, which is RefChecker's ``LLMChecker`` in joint mode.

RAGChecker calls ``checker.check(..., batch_questions=[query], is_joint=True,
joint_check_num=5)``: up to 5 claims against ONE reference per call, with RefChecker's
``JOINT_CHECKING_PROMPT_Q`` - copied here VERBATIM (amazon-science/RefChecker
``refchecker/checker/checker_prompts.py`` at commit
:data:`ragsweep.judge.llm_extractor.REFCHECKER_COMMIT`, Apache-2.0; the copy in
``tests/fixtures/refchecker/`` is compared by ``tests/contract/test_prompts_golden.py``) and filled the
way RefChecker fills it: ``[QUESTION]``, ``[REFERENCE]`` and ``[CLAIMS]`` replaced in that order,
each triplet claim written ``("subject", "predicate", "object")`` on its own line; the
completion budget is RefChecker's ``joint_check_num * 10 + 100`` tokens. The answer is read as
RefChecker reads it: the words Entailment / Neutral / Contradiction in order.

Pairs are ``(claim, reference)`` or ``(claim, reference, question)``; a claim is a triplet
(list of three strings) or a string (written as is: RefChecker's joint prompt has no
string-claim form). The question is shown where it is given (RAGChecker always gives it).

Differences from RefChecker, all on the side of never guessing a label: an answer with a
different number of labels than claims is re-asked and then counted as a failed check (labels
None, metrics NaN), where RefChecker pads with Neutral or truncates. ``structured=true``
additionally constrains the answer by the JSON schema ``{"labels": [...]}`` (for small local
judges; not what the paper did); a JSON answer is read either way. The asking, re-asking and
failure counting is :class:`ragsweep.judge.llm_judge.Judge`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ragsweep.judge.components import JudgeComponent
from ragsweep.judge.llm_judge import JudgeItem, parse_json_object
from ragsweep.judge.labels import LABELS, normalize_label

#: Bumped whenever the checking prompt changes (part of the cache keys).
CHECK_PROMPT_VERSION = 2

# ---- RefChecker refchecker/checker/checker_prompts.py, verbatim (Apache-2.0) --------------------
# (a trailing space at a line end is written \x20 so that no editor strips it)
JOINT_CHECKING_PROMPT_Q = """I have a list of claims that made by a language model to a question, please help me for checking whether the claims can be entailed according to the provided reference which is related to the question.\x20
The reference is a list of passages, and each of the claims is represented as a triplet formatted with ("subject", "predicate", "object").

If the claim is supported by ANY passage in the reference, answer 'Entailment'.\x20
If NO passage in the reference entail the claim, and the claim is contradicted with some passage in the reference, answer 'Contradiction'.
If NO passage entail or contradict with claim, or DOES NOT contain information to verify the claim, answer 'Neutral'.\x20

Please DO NOT use your own knowledge for the judgement, just compare the reference and the claim to get the answer.

### Question:
[QUESTION]

### Reference:
[REFERENCE]

### Claims:
[CLAIMS]


Your answer should always be only a list of labels, each of the labels is a single word in ['Entailment', 'Neutral', 'Contradiction'], for example, you should output a list like follows:

Entailment
Neutral
Contradiction
Neutral


DO NOT add explanations or you own reasoning to the output, only output the label list.
"""
# ---- end of the verbatim copy ---------------------------------------------------------------

#: The prompt this checker sends (the old name).
CHECK_PROMPT = JOINT_CHECKING_PROMPT_Q

_LABEL_WORD = re.compile(r"\b(Entailment|Neutral|Contradiction)\b", re.IGNORECASE)


def claim_line(claim: Any) -> str:
    """A claim as RefChecker writes it in the joint prompt: ``("s", "p", "o")`` for a triplet,
    a string as is."""
    if isinstance(claim, (list, tuple)) and len(claim) == 3:
        return f'("{claim[0]}", "{claim[1]}", "{claim[2]}")'
    return str(claim)


def render_prompt(claims: Sequence[Any], reference: str, question: str | None) -> str:
    """RefChecker's joint checking prompt for ``claims`` against one reference, filled exactly as
    ``LLMChecker._check(is_joint=True)`` fills it (a missing question is left empty)."""
    claims_text = "".join(claim_line(c) + "\n" for c in claims)
    prompt = JOINT_CHECKING_PROMPT_Q.replace("[QUESTION]", question or "")
    prompt = prompt.replace("[REFERENCE]", reference)
    return prompt.replace("[CLAIMS]", claims_text.strip())


def labels_schema(n: int) -> dict[str, Any]:
    return {
        "title": "labels",
        "type": "object",
        "properties": {
            "labels": {
                "type": "array",
                "items": {"type": "string", "enum": list(LABELS)},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["labels"],
    }


def parse_labels(text: str | None, n: int) -> list[str] | None:
    """Exactly ``n`` labels; None otherwise (wrong count, unknown label).

    A JSON object ``{"labels": [...]}`` is read strictly; any other answer as RefChecker's
    ``_parse_joint_checking_labels`` reads it (every whole word Entailment / Neutral /
    Contradiction, any case, in order)."""
    if not isinstance(text, str):
        return None
    obj = parse_json_object(text)
    if obj is not None:
        if not isinstance(obj.get("labels"), list) or len(obj["labels"]) != n:
            return None
        labels = [normalize_label(v) for v in obj["labels"]]
        return None if any(lab is None for lab in labels) else labels
    found = [m.title() for m in _LABEL_WORD.findall(text)]
    return found if len(found) == n else None


class LLMChecker(JudgeComponent):
    """Entailment labels from the judge, ``batch_size`` claims against one reference per call."""

    @dataclass
    class Config:
        batch_size: int = 5  # claims per call (RAGChecker's joint_check_num)
        max_tokens_per_claim: int = 10  # completion budget: max_tokens_base + this x claims
        max_tokens_base: int = 100
        structured: bool = False  # also constrain the answer by a JSON schema (not RefChecker's)

        def __post_init__(self) -> None:
            for name in ("batch_size", "max_tokens_per_claim", "max_tokens_base"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ValueError(f"evaluator.checker.{name} must be an integer >= 1, got {v!r}")
            if not isinstance(self.structured, bool):
                raise ValueError(f"evaluator.checker.structured must be true or false, got {self.structured!r}")

    name = "llm"
    config_prefix = "evaluator.checker"
    #: the prompt shows the question: pairs may carry it as a third element
    uses_question = True

    @property
    def cache_id(self) -> dict[str, Any]:
        return {
            "checker": "llm",
            "prompt_version": CHECK_PROMPT_VERSION,
            "batch_size": self.config.batch_size,
            "structured": self.config.structured,
            "judge": self.need_judge().identity,
        }

    def prompt(self, claims: Sequence[Any], reference: str, question: str | None = None) -> str:
        return render_prompt(claims, reference, question)

    def check(self, claims: Sequence[Any], reference: str, question: str | None = None) -> list[str | None]:
        return self.check_pairs([(c, reference, question) for c in claims])

    def check_pairs(self, pairs: Sequence[Sequence[Any]]) -> list[str | None]:
        """A label per ``(claim, reference[, question])``, None where the judge failed."""
        self.need_judge()
        norm: list[tuple[Any, str, str | None]] = []
        for p in pairs:
            claim = list(p[0]) if isinstance(p[0], (list, tuple)) else str(p[0])
            question = p[2] if len(p) > 2 and p[2] else None
            norm.append((claim, str(p[1]), None if question is None else str(question)))
        groups_of: dict[tuple[str, str | None], list[int]] = {}
        for i, (_, ref, q) in enumerate(norm):
            groups_of.setdefault((ref, q), []).append(i)
        items, groups = [], []
        bs = self.config.batch_size
        for (ref, q), idx in groups_of.items():
            for b in range(0, len(idx), bs):
                group = idx[b : b + bs]
                claims = [norm[i][0] for i in group]
                n = len(claims)
                items.append(
                    JudgeItem(
                        messages=[("user", self.prompt(claims, ref, q))],
                        schema=labels_schema(n) if self.config.structured else None,
                        parse=lambda t, n=n: parse_labels(t, n),
                        max_tokens=self.config.max_tokens_base + self.config.max_tokens_per_claim * n,
                        owner=q,
                    )
                )
                groups.append(group)
        self.stats["pairs"] += len(norm)
        self.stats["calls"] += len(items)
        out: list[str | None] = [None] * len(norm)
        for group, labels in zip(groups, self.judge.ask(items, desc="checking claims")):
            if labels is not None:
                for i, lab in zip(group, labels):
                    out[i] = lab
        return out


__all__ = [
    "CHECK_PROMPT",
    "JOINT_CHECKING_PROMPT_Q",
    "LLMChecker",
    "claim_line",
    "labels_schema",
    "parse_labels",
    "render_prompt",
]
