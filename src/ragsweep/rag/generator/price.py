"""What a priced model's tokens cost: ``price_per_1k_tokens`` of the generator and of the judge.

A price is USD per 1,000 tokens, either one number for prompt and completion tokens alike or a
mapping ``{prompt: p, completion: c}`` (hosted APIs price the two apart, completion tokens
several times higher). ``null`` (the default) is an unpriced model: a local one costs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Price:
    """USD per 1,000 prompt tokens and per 1,000 completion tokens."""

    prompt: float
    completion: float

    def usd(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (float(prompt_tokens) * self.prompt + float(completion_tokens) * self.completion) / 1000.0

    def describe(self) -> str:
        if self.prompt == self.completion:
            return f"${self.prompt:g} per 1k tokens"
        return f"${self.prompt:g} / ${self.completion:g} per 1k prompt / completion tokens"


def worst_case(price: Price, messages: Any, max_tokens: int) -> float:
    """The most a call could cost: its prompt counted generously (characters / 3, over what any
    tokenizer gives for prose, plus the chat format) and ``max_tokens`` of completion. What a call
    reserves in a budget before it is sent."""
    prompt = sum(len(content) // 3 + 5 for _, content in messages) + 3
    return price.usd(prompt, max_tokens)


def _amount(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} must be a number >= 0 (USD per 1,000 tokens), got {value!r}")
    return float(value)


def parse_price(value: Any, field: str) -> Price | None:
    """The :class:`Price` of a config value (None: unpriced); a ``ValueError`` naming ``field``
    and what it takes for anything else."""
    if value is None or isinstance(value, Price):
        return value
    if hasattr(value, "keys") and not isinstance(value, Mapping):  # an OmegaConf DictConfig
        value = {k: value[k] for k in value.keys()}
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"prompt", "completion"})
        if unknown or "prompt" not in value or "completion" not in value:
            raise ValueError(
                f"{field}: a mapping needs both prompt and completion prices and nothing else "
                f"(e.g. {{prompt: 0.15, completion: 0.6}}), got {dict(value)!r}"
            )
        return Price(_amount(value["prompt"], f"{field}.prompt"), _amount(value["completion"], f"{field}.completion"))
    amount = _amount(value, field)
    return Price(amount, amount)


__all__ = ["Price", "parse_price", "worst_case"]
