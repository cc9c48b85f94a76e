"""One question set, start to end: sample windows (:mod:`ragsweep.corpus.sampling`), ask the model
for a draft per sample (:mod:`.prompts`), locate its evidence (:mod:`.grounding`), pass the
filters (:mod:`.filters`), keep at most ``n``. Every candidate ends kept or dropped with one
reason (:data:`REASONS`, in the order they are tried: cheap ones first, model calls last)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragsweep.corpus.dataset.locate import DocumentIndex
from ragsweep.corpus.sampling import PAIRED, Sample
from ragsweep.judge.llm_judge import RETRY_REMINDER
from ragsweep.pipeline.questions import filters as F
from ragsweep.pipeline.questions.config import QuestionsConfig
from ragsweep.pipeline.questions.grounding import Evidence, both_sides, ground
from ragsweep.pipeline.questions.prompts import Draft, closed_book, messages, parse, schema_for

log = logging.getLogger("ragsweep")

#: why a candidate was dropped, in the order the checks run
REASONS = ("failed", "unparsable", "no_evidence", "one_sided", "copies_evidence", "duplicate", "check_failed",
           "not_entailed", "closed_book")
#: the temperature of a re-ask when the configured one is 0 (a greedy model repeats its answer)
RETRY_TEMPERATURE = 0.3


@dataclass
class Candidate:
    index: int
    sample: Sample
    draft: Draft | None = None
    evidence: list[Evidence] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    drop: str | None = None
    detail: str = ""

    @property
    def alive(self) -> bool:
        return self.drop is None

    @property
    def answerable(self) -> bool:
        return self.sample.kind != "unanswerable"

    def dropped(self, reason: str, detail: str = "") -> None:
        self.drop, self.detail = reason, detail[:300]


@dataclass
class Context:
    """What the steps share: the settings, the model's client, the checker parts, the documents."""

    q: QuestionsConfig
    gen: Any  # GeneratorConfig
    client: Any  # ChatClient
    cache: Any
    documents: dict[str, DocumentIndex]
    titles: dict[str, str]
    extractor: Any = None  # None: evaluator=none, entailment and closed-book not checked
    checker: Any = None
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def run(ctx: Context, samples: Sequence[Sample]) -> list[Candidate]:
    """Every sample through every step; the candidates, each kept (``alive``) or dropped."""
    cands = [Candidate(i, s) for i, s in enumerate(samples)]
    for name, step in (("generate", drafts), ("ground", locate), ("copy", copying), ("duplicate", deduplicate),
                       ("entailment", entailment), ("closed_book", closed_book_filter)):
        t0 = time.perf_counter()
        step(ctx, cands)
        ctx.seconds[name] = round(time.perf_counter() - t0, 3)
    return cands


def _alive(cands: list[Candidate], answerable: bool = False) -> list[Candidate]:
    return [c for c in cands if c.alive and (c.answerable or not answerable)]


def drafts(ctx: Context, cands: list[Candidate]) -> None:
    """A draft per candidate; an answer that does not parse is asked again (a reminder, another seed
    and, at temperature 0, :data:`RETRY_TEMPERATURE`) up to ``parse_retries`` times."""
    from ragsweep.rag.generator.client import ChatRequest

    pending = list(cands)
    for attempt in range(ctx.q.parse_retries + 1):
        if not pending:
            break
        reqs = []
        for c in pending:
            msgs = list(messages(ctx.q.questions, c.sample, ctx.titles))
            if attempt:
                msgs[-1] = (msgs[-1][0], msgs[-1][1] + RETRY_REMINDER)
            temp = float(ctx.gen.temperature) or (RETRY_TEMPERATURE if attempt else 0.0)
            reqs.append(ChatRequest(tuple(msgs), temperature=temp, max_tokens=ctx.q.max_tokens,
                                    seed=(ctx.gen.seed or 0) + attempt, response_format=schema_for(c.sample.kind)))
        outs = ctx.client.chat_many(reqs, desc="questions" if not attempt else f"re-ask {attempt}")
        retry = []
        for c, out in zip(pending, outs):
            if not out.ok:
                c.dropped("failed", str(out.error))
                continue
            c.draft = parse(out.text, c.sample.kind)
            if c.draft is None:
                c.detail = str(out.text)[:300]
                retry.append(c)
        pending = retry
    for c in pending:
        c.dropped("unparsable", c.detail)


def locate(ctx: Context, cands: list[Candidate]) -> None:
    """The evidence of every answerable draft, as spans; none: ``no_evidence``; a two-passage kind
    with evidence in one passage only: ``one_sided``."""
    f = ctx.q.filters
    for c in _alive(cands, answerable=True):
        c.evidence, counts = ground(c.draft.quotes, c.sample, ctx.documents, f.match, f.min_quote_words)
        c.checks["quotes"] = counts
        if not c.evidence:
            c.dropped("no_evidence", f"{counts['quotes']} quote(s): {counts['short']} too short, "
                                     f"{counts['not_found']} not found in the passage's document")
        elif c.sample.kind in PAIRED and not both_sides(c.evidence, c.sample):
            c.dropped("one_sided", "evidence located in one of the two passages only")


def copying(ctx: Context, cands: list[Candidate]) -> None:
    for c in _alive(cands, answerable=True):
        c.checks["copy_overlap"] = round(F.copy_overlap(c.draft.question, [e.quote for e in c.evidence]), 3)
        if c.checks["copy_overlap"] >= ctx.q.filters.copy_overlap:
            c.dropped("copies_evidence", f"{c.checks['copy_overlap']:.0%} of its word 3-grams are in its evidence")


def deduplicate(ctx: Context, cands: list[Candidate]) -> None:
    alive = _alive(cands)
    vectors = F.embed([c.draft.question for c in alive], ctx.cache)
    for c, (dup, cos) in zip(alive, F.duplicates(vectors, ctx.q.filters.duplicate_cosine)):
        c.checks["max_cosine"] = round(cos, 3)
        if dup is not None:
            c.dropped("duplicate", f"cosine {cos:.3f} to {alive[dup].draft.question!r}")


def _claims(ctx: Context, cands: list[Candidate]) -> None:
    from ragsweep.judge.claims import claim_text, extract_cached

    got = extract_cached(ctx.extractor, [c.draft.answer for c in cands], [c.draft.question for c in cands], ctx.cache)
    for c, cl in zip(cands, got):
        c.claims = [claim_text(x) for x in (cl or [])]


def _check(ctx: Context, groups: list[list[tuple[str, str]]], kind: str) -> list[list[Any]]:
    from ragsweep.judge.checking import check_cached

    flat = [p for g in groups for p in g]
    labels = check_cached(ctx.checker, flat, ctx.cache, kind=kind) if flat else []
    out, i = [], 0
    for g in groups:
        out.append(labels[i : i + len(g)])
        i += len(g)
    return out


def entailment(ctx: Context, cands: list[Candidate]) -> None:
    """The reference answer's claims against the evidence (the configured checker)."""
    alive = _alive(cands, answerable=True)
    if ctx.checker is None or ctx.q.filters.entailment <= 0 or not alive:
        return
    _claims(ctx, alive)
    groups = [[(cl, "\n".join(e.quote for e in c.evidence)) for cl in c.claims] for c in alive]
    for c, labels in zip(alive, _check(ctx, groups, "context")):
        share = F.entailed_share(labels) if c.claims else 0.0
        c.checks["entailed"] = None if share is None else round(share, 3)
        if share is None:
            c.dropped("check_failed", "the checker gave no label for a claim of the answer")
        elif share < ctx.q.filters.entailment:
            c.dropped("not_entailed", f"{share:.0%} of the answer's {len(c.claims)} claim(s) entailed by its evidence")


def closed_book_filter(ctx: Context, cands: list[Candidate]) -> None:
    """The model asked each surviving question with no context; one it answers is dropped."""
    from ragsweep.rag.generator.client import ChatRequest

    alive = _alive(cands, answerable=True)
    if not ctx.q.filters.closed_book or ctx.checker is None or not alive:
        return
    if not all(c.claims for c in alive):
        _claims(ctx, [c for c in alive if not c.claims])
    reqs = [ChatRequest(closed_book(ctx.q.questions, c.draft.question), temperature=0.0, max_tokens=64,
                        seed=ctx.gen.seed) for c in alive]
    outs = ctx.client.chat_many(reqs, desc="closed-book")
    groups = [[(cl, out.text or "") for cl in c.claims] if out.ok else [] for c, out in zip(alive, outs)]
    for c, out, labels in zip(alive, outs, _check(ctx, groups, "answer")):
        if not out.ok:
            c.checks["closed_book"] = None  # not asked: kept, and said so
            continue
        c.checks["closed_book_answer"] = (out.text or "").strip()[:300]
        c.checks["closed_book"] = F.answered_closed_book(out.text, labels)
        if c.checks["closed_book"]:
            c.dropped("closed_book", f"answered with no context: {out.text.strip()[:120]!r}")


def keep(cands: list[Candidate], n: int) -> tuple[list[Candidate], int]:
    """The first ``n`` survivors in sample order (the samples are spread over the documents in
    that order) and how many more survived (not needed)."""
    alive = [c for c in cands if c.alive]
    return alive[:n], max(0, len(alive) - n)


def counts(cands: list[Candidate], kept: list[Candidate], surplus: int) -> dict[str, int]:
    """``candidates``, ``kept``, ``surplus``, ``dropped``, ``dropped_<reason>`` (every reason, 0 too),
    ``kept_<kind>``, ``after_<reason>`` (candidates left after each check, in order)."""
    by = Counter(c.drop for c in cands if c.drop)
    out = {"candidates": len(cands), "kept": len(kept), "surplus": surplus, "dropped": sum(by.values())}
    left = len(cands)
    for r in REASONS:
        out[f"dropped_{r}"] = by.get(r, 0)
        left -= by.get(r, 0)
        out[f"after_{r}"] = left
    for kind, n in Counter(c.sample.kind for c in kept).items():
        out[f"kept_{kind}"] = n
    return out


__all__ = ["REASONS", "Candidate", "Context", "counts", "keep", "run"]
