"""What the estimate runs the judge's own pipeline with: a judge that counts instead of asking, and
a cache view that keeps everything the estimate makes up to itself.

The judge's calls depend on the evaluator's configuration in many ways (claims per answer in
batches of ``evaluator.checker.batch_size`` against every retrieved chunk and the other answer,
TRACe's sentence checks, RAGAS's calls, what the cache already holds, what another system of the
sweep asks first). Rather than a second copy of those rules, the estimate runs the real pipeline
(:func:`ragsweep.judge.pipeline.evaluate_records`) on stand-in answers with a
:class:`CountingJudge`: every item it is asked is counted (its prompt's tokens, its answer's) and
answered the way the stated model says (so many claims, one label per claim), never sent.
:class:`Overlay` is the shared cache as the estimate sees it: what is stored is read as is
(cached work costs nothing), what the estimate makes up is kept in memory (a later system of the
sweep finds it, as it will find the real one), and nothing reaches the cache.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ragsweep.rag.generator.price import worst_case
from ragsweep.store.cache import MISSING, afetch, fetch, fetch_one

#: the chat format's tokens around the messages (OpenAI's rule: 3 per request, 4 per message)
REQUEST_OVERHEAD, MESSAGE_OVERHEAD = 3, 4


class Overlay:
    """Reads: what this estimate stood in first, then the cache. Writes: kept here only."""

    enabled = True

    def __init__(self, base: Any):
        self.base = base
        self.mem: dict[str, Any] = {}
        self.stats: Counter[str] = Counter()

    def get(self, stage: str, key: str, default: Any = MISSING, count: bool = True) -> Any:
        found = self.get_many(stage, [key])
        return found.get(key, default)

    def get_many(self, stage: str, keys: Iterable[str], accept: Callable[[Any], bool] | None = None) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        found = {k: self.mem[k] for k in keys if k in self.mem}
        rest = [k for k in keys if k not in found]
        if rest and self.base is not None:
            found.update(self.base.get_many(stage, rest))
        return {k: v for k, v in found.items() if accept is None or accept(v)}

    def put(self, stage: str, key: str, value: Any) -> None:
        self.mem[key] = value

    def put_many(self, stage: str, items: dict[str, Any]) -> None:
        self.mem.update(items)

    def get_or_compute(self, stage: str, key: str, fn: Callable[[], Any]) -> Any:
        return fetch_one(self, stage, key, fn)

    fetch = fetch
    afetch = afetch


@dataclass
class Tally:
    """Calls, tokens and USD of one model in one scenario of the estimate."""

    calls: int = 0
    cached: int = 0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    usd: float = 0.0
    per_question: Counter = field(default_factory=Counter)  # USD by question text
    largest: float = 0.0  # the most one call reserves in a budget (its worst case)

    def add(self, prompt: float, completion: float, price: Any, question: str | None, reserve: float = 0.0) -> None:
        self.largest = max(self.largest, reserve)
        self.calls += 1
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        usd = price.usd(prompt, completion) if price is not None else 0.0
        self.usd += usd
        self.per_question[question or ""] += usd


@dataclass(frozen=True)
class Scenario:
    """One end of the estimate's range, or its expected value."""

    name: str
    claims: float  # claims per answer and per ground truth
    answer_tokens: float  # tokens of a generated answer
    label: str  # the label every check answers (Neutral: TRACe's entailment attribution checks no sentence)
    other_share: float  # completion tokens of a judge answer of another kind (RAGAS, TRACe annotator) / its max_tokens


def tokens_of(messages: Sequence[tuple[str, str]], count: Callable[[str], float]) -> float:
    return REQUEST_OVERHEAD + sum(MESSAGE_OVERHEAD + count(content) for _, content in messages)


def _fraction(text: str) -> float:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF


def how_many(mean: float, text: str) -> int:
    """An integer per text whose average over texts is ``mean`` (its fraction spread by a hash)."""
    whole = math.floor(mean)
    return int(whole + (1 if _fraction(text) < mean - whole else 0))


class CountingJudge:
    """Stands in for a :class:`ragsweep.judge.llm_judge.Judge`: same identity (so cache keys are
    the real ones), same config; ``ask`` counts and answers by the scenario, sends nothing."""

    def __init__(self, judge: Any, scenario: Scenario, count: Callable[[str], float], price: Any, tally: Tally):
        self.real = judge
        self.config = judge.config
        self.identity = judge.identity
        self.model_name = judge.model_name
        self.scenario, self.count, self.price, self.tally = scenario, count, price, tally
        self.stats: Counter[str] = Counter()
        self.cut: set[Any] = set()
        self.budget = None

    def close(self) -> None:
        pass

    def ask(self, items: Sequence[Any], desc: str = "judging") -> list[Any]:
        out = []
        for item in items:
            prompt = tokens_of(item.messages, self.count)
            text, parsed = self._answer(item, desc)
            completion = self.count(text) if text else self.scenario.other_share * float(item.max_tokens)
            reserve = worst_case(self.price, item.messages, item.max_tokens) if self.price is not None else 0.0
            self.tally.add(prompt, completion, self.price, item.owner, reserve)
            out.append(parsed)
        return out

    def _answer(self, item: Any, desc: str) -> tuple[str | None, Any]:
        prompt = item.messages[-1][1]
        if desc == "extracting claims":
            tag = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:6]
            n = how_many(self.scenario.claims, prompt)
            for claims in ([[f"{tag} {i}", "is stated in", f"part {i} of the text"] for i in range(n)],
                           [f"{tag} {i} is stated in part {i} of the text." for i in range(n)]):
                text = json.dumps({"claims": claims})
                parsed = item.parse(text)
                if parsed is not None:
                    return text, parsed
            return None, None
        if desc == "checking claims":
            for n in range(1, 65):  # the item's claim count: the one its parser accepts
                text = "\n".join([self.scenario.label] * n)
                parsed = item.parse(text)
                if parsed is not None:
                    return text, parsed
        return None, None  # RAGAS, the TRACe annotator: counted, answered with nothing


__all__ = ["CountingJudge", "Overlay", "Scenario", "Tally", "how_many", "tokens_of"]
