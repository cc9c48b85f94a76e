"""The estimate before the work: the model calls, tokens and USD a run or a sweep expects to spend.

Made after retrieval, from the prompts the generator will be sent, before any priced model is
called (:mod:`ragsweep.pipeline.spend`). The stated model (docs/hosted.md):

- **generation**: one call per (system, question) whose request is neither in the cache nor asked
  by an earlier system of the same sweep; prompt tokens counted on the actual messages; an
  answer's tokens measured on the cached answers of these very requests (3 or more), else
  ``estimate.answer_tokens``, else a quarter of ``generator.max_tokens``. Range: answers of 8
  tokens (or the measured length, if shorter) .. ``generator.max_tokens``.
- **judge**: the judge's own pipeline run on stand-in answers with a judge that counts what it
  would be asked (:mod:`ragsweep.analysis.estimate_judge`): extraction of every answer and ground
  truth not in the cache, ``evaluator.checker.batch_size`` claims per check against every chunk
  and the other answer, TRACe and RAGAS calls as configured; claims per answer measured on this
  judge's cached claims of these answers and ground truths (3 or more), else
  ``estimate.claims_per_answer``; range ``estimate.claims_range``. A judge answer of another kind
  (RAGAS, the TRACe annotator) is taken as 10% / 25% / 100% of its ``max_tokens``. Re-asks of
  unreadable answers and HTTP retries are not in it.
- **tokens**: the model's own tokenizer where ragsweep has it (a GGUF's vocabulary, a Hugging Face
  tokenizer); else characters / 4 (the rule of thumb of the hosted APIs for English text), with
  characters / 5 .. / 3 as the range; plus the chat format's 3 tokens per request and 4 per message.

The expected value is the middle scenario; the range is the low and the high one, each run through
the same pipeline, so the number of calls has a range too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ragsweep.analysis.estimate_judge import CountingJudge, Overlay, Scenario, Tally, tokens_of
from ragsweep.rag.generator.price import worst_case

SCENARIOS = ("low", "expected", "high")
SHORTEST_ANSWER = 8
OTHER_SHARE = {"low": 0.1, "expected": 0.25, "high": 1.0}
CHARS_PER_TOKEN = {"low": 5.0, "expected": 4.0, "high": 3.0}
MEASURE_AT_LEAST = 3


@dataclass
class Work:
    """One system's work as the estimate sees it: its generation requests (one per question, with
    their cache keys), its records before generation (query, ground truth, retrieved context), and
    what reads and prices it."""

    name: str
    model: str
    requests: Sequence[Any]
    keys: Sequence[str]
    records: Sequence[dict[str, Any]]
    answer_of: Callable[[str], str]  # a generated text -> the record's response (the answer tag)
    count: Callable[[str], int]  # the generator's token counter
    exact: bool  # the counter is the model's own tokenizer
    max_tokens: int
    generator_price: Any = None
    evaluator: Any = None  # the built Evaluator (None: no judge calls)
    judge_price: Any = None


@dataclass
class Estimate:
    systems: int
    questions: int
    tallies: dict[str, dict[str, Tally]] = field(default_factory=dict)  # scenario -> {generation, judge}
    notes: list[str] = field(default_factory=list)
    models: dict[str, str] = field(default_factory=dict)

    def usd(self, scenario: str = "expected") -> float:
        return sum(t.usd for t in self.tallies[scenario].values())

    def per_question(self) -> dict[str, float]:
        """Expected USD by question text (generation and judge), for planning within a budget."""
        out: dict[str, float] = {}
        for t in self.tallies["expected"].values():
            for q, usd in t.per_question.items():
                out[q] = out.get(q, 0.0) + usd
        return out

    def largest_call(self) -> float:
        """The most one of the expected calls reserves in a budget before it is sent (its worst case)."""
        return max((t.largest for t in self.tallies["expected"].values()), default=0.0)

    def metrics(self) -> dict[str, float]:
        lo, e, hi = (self.tallies[s] for s in SCENARIOS)
        return {
            "estimate/usd": round(self.usd(), 6), "estimate/usd_low": round(self.usd("low"), 6),
            "estimate/usd_high": round(self.usd("high"), 6),
            "estimate/usd_generation": round(e["generation"].usd, 6), "estimate/usd_judge": round(e["judge"].usd, 6),
            "estimate/generation_calls": float(e["generation"].calls),
            "estimate/generation_cached": float(e["generation"].cached),
            "estimate/judge_calls": float(e["judge"].calls),
            "estimate/judge_calls_low": float(lo["judge"].calls), "estimate/judge_calls_high": float(hi["judge"].calls),
            "estimate/prompt_tokens": round(sum(t.prompt_tokens for t in e.values())),
            "estimate/completion_tokens": round(sum(t.completion_tokens for t in e.values())),
        }

    def to_json(self) -> dict[str, Any]:
        return {"systems": self.systems, "questions": self.questions, "models": self.models, "notes": self.notes,
                "metrics": self.metrics(), "scenarios": {s: {k: {"calls": t.calls, "cached": t.cached,
                "prompt_tokens": round(t.prompt_tokens), "completion_tokens": round(t.completion_tokens),
                "usd": round(t.usd, 6)} for k, t in self.tallies[s].items()} for s in SCENARIOS}}

    def lines(self) -> list[str]:
        """The block printed before the work."""
        head = (f"estimate before any model call: {self.systems} system{'s' * (self.systems != 1)}, "
                f"{self.questions} answers (the stated model: docs/hosted.md)")
        out = [head]
        for part in ("generation", "judge"):
            lo, e, hi = (self.tallies[s][part] for s in SCENARIOS)
            calls = f"{e.calls:,} calls" + (f" [{lo.calls:,}, {hi.calls:,}]" if lo.calls != hi.calls else "")
            if part == "generation":
                calls += f" ({e.cached:,} answered from the cache)"
            money = (f"${e.usd:.4f} [${lo.usd:.4f}, ${hi.usd:.4f}]" if part in self.models
                     else "unpriced")
            out.append(f"  {part:<10} {self.models.get(part, ''):<14} {calls}; {round(e.prompt_tokens):,} prompt + "
                       f"{round(e.completion_tokens):,} completion tokens; {money}")
        out.append(f"  total      ${self.usd():.4f}, range ${self.usd('low'):.4f} .. ${self.usd('high'):.4f}")
        out += [f"  {n}" for n in self.notes]
        return out


def _counter(count: Callable[[str], int], exact: bool, scenario: str) -> Callable[[str], float]:
    if exact:
        return lambda text: float(count(text))
    per = CHARS_PER_TOKEN[scenario]
    return lambda text: len(text) / per


def _measured_answer(works: Sequence[Work], cache: Any) -> list[float]:
    lengths: dict[str, float] = {}
    for w in works:
        for key, value in cache.get_many("generation", list(w.keys)).items():
            if isinstance(value, Mapping) and value.get("completion_tokens"):
                lengths[key] = float(value["completion_tokens"])
    return list(lengths.values())


def _measured_claims(works: Sequence[Work], judge: Any, cache: Any) -> list[int]:
    """Claim counts of this judge's cached extractions of these ground truths and cached answers."""
    from ragsweep.judge import components
    from ragsweep.judge.claims import extractor_id
    from ragsweep.store.cache import Cache

    ev = next((w.evaluator for w in works if w.evaluator is not None), None)
    if ev is None or judge is None:
        return []
    extractor = components.build("extractor", ev.config.extractor, judge)
    use_q = bool(getattr(extractor, "uses_question", False))
    eid = extractor_id(extractor)
    keys = set()
    for w in works:
        answers = cache.get_many("generation", list(w.keys))
        for rec, key in zip(w.records, w.keys):
            q = str(rec.get("query") or "") if use_q else None
            texts = [str(rec.get("gt_answer") or "")] + ([w.answer_of(answers[key]["text"])] if key in answers else [])
            keys |= {Cache.key("claims", eid, t, q) for t in texts if t.strip()}
    return [len(v) for v in cache.get_many("claims", sorted(keys)).values() if isinstance(v, list)]


def _stand_in(rec: Mapping[str, Any], tokens: float, count: Callable[[str], float], tag: str) -> str:
    """An answer of about ``tokens`` tokens made of the question's own context (a RAG answer's words)."""
    source = " ".join([str(c.get("text") or "") for c in rec.get("retrieved_context") or []] +
                      [str(rec.get("gt_answer") or ""), str(rec.get("query") or "")]).split() or ["answer"]
    words, n = [f"({tag})"], 0
    while count(" ".join(words)) < tokens and n < 20 * max(1.0, tokens):
        words.append(source[n % len(source)])
        n += 1
    return " ".join(words)


def _generate(w: Work, index: int, scen: Scenario, overlay: Overlay, tally: Tally) -> list[dict[str, Any]]:
    """The records of one system with their answers: cached ones as stored, the others stood in (counted)."""
    count = _counter(w.count, w.exact, scen.name)
    records = []
    for req, key, rec in zip(w.requests, w.keys, w.records):
        stored = overlay.get_many("generation", [key]).get(key)
        if stored is None:
            answer = min(float(w.max_tokens), scen.answer_tokens)
            reserve = worst_case(w.generator_price, req.messages, req.max_tokens) if w.generator_price else 0.0
            tally.add(tokens_of(req.messages, count), answer, w.generator_price, str(rec.get("query") or ""), reserve)
            stored = {"text": _stand_in(rec, answer, count, f"{index}"), "stand_in": True}
            overlay.put("generation", key, stored)
        elif not stored.get("stand_in"):
            tally.cached += 1
        records.append({**rec, "response": w.answer_of(stored["text"])})
    return records


def estimate(works: Sequence[Work], cache: Any, stated: Mapping[str, Any]) -> Estimate:
    """The estimate of ``works`` (one per system, in the order they run) against the shared ``cache``."""
    from ragsweep.judge.llm_judge import Judge
    from ragsweep.rag.tokens import counter_for, estimate as rough

    out = Estimate(systems=len(works), questions=sum(len(w.records) for w in works))
    first = works[0] if works else None
    if first is not None and first.generator_price is not None:
        out.models["generation"] = first.model
    measured = _measured_answer(works, cache)
    max_tokens = max((w.max_tokens for w in works), default=256)
    if len(measured) >= MEASURE_AT_LEAST:
        answer = sum(measured) / len(measured)
        out.notes.append(f"an answer: {answer:.0f} tokens, measured on {len(measured)} cached answers")
    elif stated.get("answer_tokens"):
        answer = float(stated["answer_tokens"])
        out.notes.append(f"an answer: {answer:.0f} tokens (estimate.answer_tokens)")
    else:
        answer = max_tokens / 4.0
        out.notes.append(f"an answer: {answer:.0f} tokens (a quarter of generator.max_tokens; none cached to measure)")
    judge_spec = next((w.evaluator.config.judge for w in works if w.evaluator is not None and w.judge_price), None)
    judge = Judge.from_spec(judge_spec) if judge_spec is not None else None
    low, high = (float(x) for x in stated.get("claims_range") or (1, 10))
    claims = float(stated.get("claims_per_answer") or 4)
    if judge is not None:
        out.models["judge"] = judge.model_name
        counts = _measured_claims(works, judge, cache)
        if len(counts) >= MEASURE_AT_LEAST:
            claims = sum(counts) / len(counts)
            low, high = min(low, claims), max(high, claims)
            out.notes.append(f"claims per answer: {claims:.1f}, measured on {len(counts)} cached extractions "
                             f"(range {low:g} .. {high:g})")
        else:
            out.notes.append(f"claims per answer: {claims:g} (estimate.claims_per_answer; range {low:g} .. {high:g})")
        judge_count = counter_for(judge.server)
        judge_exact = judge_count is not rough
    gen_exact = all(w.exact for w in works)
    if not gen_exact or (judge is not None and not judge_exact):
        out.notes.append("tokens: characters / 4 where the model's tokenizer is not at hand (range / 5 .. / 3)")
    for name in SCENARIOS:
        scen = Scenario(
            name,
            claims={"low": low, "expected": claims, "high": high}[name],
            answer_tokens={"low": min(SHORTEST_ANSWER, answer), "expected": answer, "high": float(max_tokens)}[name],
            label="Neutral" if name == "low" else "Entailment", other_share=OTHER_SHARE[name])
        overlay, tallies = Overlay(cache), {"generation": Tally(), "judge": Tally()}
        for i, w in enumerate(works):
            records = _generate(w, i, scen, overlay, tallies["generation"])
            if judge is not None and w.evaluator is not None and w.judge_price is not None and records:
                from ragsweep.judge.pipeline import evaluate_records

                counting = CountingJudge(judge, scen, _counter(judge_count, judge_exact, name), w.judge_price,
                                         tallies["judge"])
                evaluate_records(records, cache=overlay, **w.evaluator.parts(counting, overlay))
        out.tallies[name] = tallies
    return out


def write_json(est: Estimate) -> str:
    return json.dumps(est.to_json(), indent=1)


__all__ = ["Estimate", "SCENARIOS", "Work", "estimate"]
