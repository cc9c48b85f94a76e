"""The LLM checker: several claims against one reference per judge call, JSON-schema output
``{"labels": [...]}`` with exactly one label per claim (:class:`ragsweep.evaluator.judge.Judge`
does the asking, re-asking and failure counting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ragsweep.evaluator.components import JudgeComponent
from ragsweep.evaluator.judge import JudgeItem, parse_json_object
from ragsweep.evaluator.labels import LABELS, normalize_label

#: Bumped whenever the checking prompt changes (part of the cache keys).
CHECK_PROMPT_VERSION = 1


CHECK_PROMPT = """\
Decide, for each claim below, whether the reference text entails it.
- "Entailment": the reference supports the claim.
- "Contradiction": the reference says that the claim is false.
- "Neutral": the reference neither supports nor contradicts the claim (it is not mentioned, or \
only partly).
Judge from the reference only, not from what you know.

reference:
\"\"\"
{reference}
\"\"\"

claims:
{claims}

Answer with a JSON object {{"labels": [...]}} holding exactly {n} labels, one per claim in the \
order given, each "Entailment", "Neutral" or "Contradiction", and nothing else."""


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
    """Exactly ``n`` labels from ``{"labels": [...]}``; None otherwise (wrong count, unknown label)."""
    obj = parse_json_object(text)
    if obj is None or not isinstance(obj.get("labels"), list) or len(obj["labels"]) != n:
        return None
    labels = [normalize_label(v) for v in obj["labels"]]
    return None if any(lab is None for lab in labels) else labels


class LLMChecker(JudgeComponent):
    """Entailment labels from the judge, ``batch_size`` claims against one reference per call."""

    @dataclass
    class Config:
        batch_size: int = 8  # claims per call (all against the same reference)
        max_tokens_per_claim: int = 12  # completion budget: 24 + this x claims

        def __post_init__(self) -> None:
            for name in ("batch_size", "max_tokens_per_claim"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ValueError(f"evaluator.checker.{name} must be an integer >= 1, got {v!r}")

    name = "llm"
    config_prefix = "evaluator.checker"

    @property
    def cache_id(self) -> dict[str, Any]:
        return {
            "checker": "llm",
            "prompt_version": CHECK_PROMPT_VERSION,
            "batch_size": self.config.batch_size,
            "judge": self.need_judge().identity,
        }

    def prompt(self, claims: Sequence[str], reference: str) -> str:
        numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
        return CHECK_PROMPT.format(reference=reference, claims=numbered, n=len(claims))

    def check(self, claims: Sequence[str], reference: str) -> list[str | None]:
        return self.check_pairs([(c, reference) for c in claims])

    def check_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        """A label per (claim, reference) pair, None where the judge failed."""
        self.need_judge()
        pairs = [(str(c), str(r)) for c, r in pairs]
        by_ref: dict[str, list[int]] = {}
        for i, (_, ref) in enumerate(pairs):
            by_ref.setdefault(ref, []).append(i)
        items, groups = [], []
        bs = self.config.batch_size
        for ref, idx in by_ref.items():
            for b in range(0, len(idx), bs):
                group = idx[b : b + bs]
                claims = [pairs[i][0] for i in group]
                n = len(claims)
                items.append(
                    JudgeItem(
                        messages=[("user", self.prompt(claims, ref))],
                        schema=labels_schema(n),
                        parse=lambda t, n=n: parse_labels(t, n),
                        max_tokens=24 + self.config.max_tokens_per_claim * n,
                    )
                )
                groups.append(group)
        self.stats["pairs"] += len(pairs)
        self.stats["calls"] += len(items)
        out: list[str | None] = [None] * len(pairs)
        for group, labels in zip(groups, self.judge.ask(items, desc="checking claims")):
            if labels is not None:
                for i, lab in zip(group, labels):
                    out[i] = lab
        return out


__all__ = ["CHECK_PROMPT", "LLMChecker", "labels_schema", "parse_labels"]
