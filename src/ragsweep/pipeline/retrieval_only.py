"""Retrieval-only runs (``generator=none``): retrieve and judge what needs no generated answer.

No model server starts and nothing is generated. Every question keeps its retrieved chunks and
goes through the run's evaluator with an empty response, so the judge work that needs no answer
is done exactly as a full run does it, through the shared cache and with the same keys:

- the ground-truth answer's claims (cache stage ``claims``, key = extractor, text, question);
- each ground-truth claim against each retrieved chunk (stage ``entailment``, kind ``context``).

A later full run of the same system (same dataset, chunking, retriever, evaluator) therefore finds
all of them in the cache and re-judges none (``judge/cache_hits``), and a sweep over k reuses the
checks of the chunks that k = 5 and k = 20 share.

What is kept (:data:`RESPONSE_FREE` and the ``retrieval`` family): RAGChecker claim recall and
context precision, TRACe relevance, RAGAS context relevance, the retrieval metrics at their
cutoffs; plus the ``data/*`` corpus figures the pipeline logs anyway. Every other metric of the
evaluator's families needs a response: it is absent from the run (no value, no interval, never a
NaN counted as a failure, never 0) and listed in ``ledger.json`` under ``not_applicable`` with
the reason. The run is named ``<retriever>-k<k>-c<size>o<overlap>-retrieval_only`` and tagged
``ragsweep.mode=retrieval_only``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from ragsweep.records import drop_response
from ragsweep.tracking.identity import MODE, MODE_TAG, is_retrieval_only as is_run, retrieval_only_tags as tags

#: metrics outside the retrieval family that need no response (they read only the ground-truth
#: claims, the retrieved chunks and the question)
RESPONSE_FREE = frozenset({
    "ragchecker/retriever/claim_recall",
    "ragchecker/retriever/context_precision",
    "trace/relevance",
    "ragas/context_relevance",
})
#: families that hold response-free metrics (``baseline`` compares the response with the answer)
FAMILIES = frozenset({"retrieval", "ragchecker", "trace", "ragas"})
REASON = "needs a generated response; this run is retrieval-only (generator=none)"
#: record fields the evaluator derives from the (empty) response: dropped from a retrieval-only record
RESPONSE_FIELDS = ("response_claims", "answer2response", "response2answer", "retrieved2response", "prompt",
                   "raw_response", "generation")
#: TRACe fields that read only the ground-truth claims and the context
TRACE_KEPT = ("relevance_score", "all_relevant_sentence_keys")


def enabled(cfg: Any) -> bool:
    """Whether ``cfg`` is a retrieval-only run (``generator=none``)."""
    gen = cfg.get("generator") if hasattr(cfg, "get") else None
    return gen is not None and hasattr(gen, "get") and gen.get("name") == "none"


def applicable(name: str, family: str) -> bool:
    return family == "retrieval" or name in RESPONSE_FREE


def run_name(cfg: Any) -> str:
    """``bm25-k5-c300o0.2-retrieval_only`` (the prompt and the generator play no part)."""
    from ragsweep.tracking.identity import chunk_label, component_name

    r, c = cfg.retriever, cfg.chunker
    rr = component_name(cfg.reranker) if cfg.get("reranker") is not None else None
    rerank = f"+{rr}" if rr and rr != "none" else ""
    return f"{component_name(r)}{rerank}-k{r.top_k}-{chunk_label(c)}-{MODE}"


def no_outputs(n: int) -> list[Any]:
    """What the generator "returned" for each question of a retrieval-only run: nothing, by design
    (an empty, successful, uncached result with no timing)."""
    from ragsweep.rag.generator.requests import ChatResult

    return [ChatResult(text="") for _ in range(n)]


def strip(records: Iterable[dict[str, Any]]) -> None:
    """Drop from each judged record what came from the empty response, keep the response-free rest."""
    for rec in records:
        for f in RESPONSE_FIELDS:
            rec.pop(f, None)
        drop_response(rec)
        m = rec.get("metrics")
        if isinstance(m, dict):
            # RAGChecker's per-example fractions are keyed by their short names
            keep = {*RESPONSE_FREE, "claim_recall", "context_precision"}
            for key in [k for k in m if not (k.startswith("retrieval/") or k in keep)]:
                del m[key]
        trace = rec.get("trace")
        if isinstance(trace, dict):
            rec["trace"] = {k: trace[k] for k in TRACE_KEPT if k in trace}
        rec.pop("ragas", None)
        rec["mode"] = MODE


def restrict(scores: Any, families: Iterable[str] = ()) -> dict[str, str]:
    """Remove from a :class:`ragsweep.analysis.scoring.RunScores` every metric that needs a response; returns
    them with the reason, with those of ``families`` (the evaluator's) and ``baseline`` that were not
    computed at all (``ledger.json``'s ``not_applicable``)."""
    from ragsweep.judge.metrics import registry

    gone: dict[str, str] = {}
    for name in list(scores.per_question):
        m = registry.find(name)
        if m is not None and not applicable(name, m.family):
            gone[name] = REASON
            scores.per_question.pop(name, None)
            scores.intervals.pop(name, None)
            scores.ledger.pop(name, None)
            scores.undefined.pop(name, None)
    for key in list(scores.metrics):
        base = key
        for suffix in ("/ci_low", "/ci_high", "/n", "/failed", "/undefined", "/judge_sd", "/question_sd"):
            if key.endswith(suffix):
                base = key[: -len(suffix)]
                break
        if base in gone:
            del scores.metrics[key]
    gone = {**not_applicable_all(set(families) | {"baseline"}), **gone}
    scores.metrics["ledger/not_applicable"] = float(len(gone))
    return dict(sorted(gone.items()))


def not_applicable_all(families: Iterable[str]) -> dict[str, str]:
    """Every registered metric of ``families`` that a retrieval-only run cannot compute."""
    from ragsweep.judge.metrics import registry

    fams = set(families)
    return {m.name: REASON for m in registry.all_metrics() if m.family in fams and not applicable(m.name, m.family)}


def ledger_artifact(scores: Any, gone: Mapping[str, str]) -> dict[str, Any]:
    """``ledger.json`` of a retrieval-only run: the usual ledger, ``mode`` and ``not_applicable``."""
    art = scores.artifact()
    art["mode"] = MODE
    art["not_applicable"] = dict(gone)
    return art


__all__ = ["RESPONSE_FREE", "enabled", "run_name", "tags", "strip", "restrict", "ledger_artifact",
           "no_outputs", "MODE", "MODE_TAG", "is_run"]
