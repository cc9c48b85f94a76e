"""Score records claim by claim: extraction -> entailment checks -> RAGChecker, TRACe, RAGAS.

    records, counters = evaluate_records(records, extractor, checker, cache=cache,
                                         trace=EntailmentTrace(), ragas=Ragas(...))

(the :class:`ragsweep.judge.core.Evaluator` builds those parts from its config; this module
only runs them).

A record is RAGChecker's input schema (``query_id, query, gt_answer, response,
retrieved_context: [{doc_id, text}]``). Each returned record is a copy with RAGChecker's output
fields (orientation in :mod:`ragsweep.judge.ragchecker_metrics`)::

    response_claims, gt_answer_claims            claims (strings or [s, p, o] triplets)
    answer2response[i]       response claim i vs the gt answer
    response2answer[j]       gt claim j vs the response
    retrieved2response[i][c] response claim i vs retrieved chunk c
    retrieved2answer[j][c]   gt claim j vs retrieved chunk c
    metrics                  per example (RAGChecker's as fractions in [0, 1], as RAGChecker
                             writes them, plus "trace/..." and "ragas/..." values)

plus ``trace`` (TRACe sentence annotations, RAGBench's field names) and ``ragas`` (the judge's
generated questions / extracted sentence keys, LLM mode only). A record without a ground truth
(``gt_answer`` missing, null or blank) gets ``gt_answer_claims``, ``answer2response``,
``response2answer`` and ``retrieved2answer`` = None and NaN for every metric that needs it. A
failed extraction leaves the claims None; a failed check leaves its label None; either makes the
metrics that read it NaN, never a guessed label.

Checks: every (claim, reference) pair of the whole batch is de-duplicated, looked up in the cache
(stage ``"entailment"``, key = (checker id, claim text, reference)), and only the rest goes to the
checker; successful labels are stored, failures never. A blank reference (an empty response)
entails nothing: its pairs are Neutral without a check. Claims are extracted through the cache
too (stage ``"claims"``, :func:`ragsweep.judge.claims.extract_cached`). Scoring the same
records twice therefore makes no model call the second time.

TRACe (RAGBench eq. 1-4, :mod:`ragsweep.judge.trace`), documents = the retrieved chunks
split into keyed sentences ``0a, 0b, ...``, response sentences ``a, b, ...``:

- ``trace_mode="entailment"`` (default): which context sentences are *utilized* (by the
  response claims) and *relevant* (to the ground-truth claims) is decided by
  ``trace_attribution``:

  - ``"cover"`` (default): the sentences a claim draws its words from
    (:func:`ragsweep.judge.trace.lexical_cover`: a greedy cover of the claim's content words,
    each sentence adding at least 3 new ones); no check is made. On RAGBench validation this is
    much closer to GPT-4's utilized sentences than entailment (in-sample on the dev rows the choice was made on: RMSE 0.134 vs 0.222,
    a constant 0.173; ``experiments/meta_eval/ragbench.py``): a response sentence usually combines
    several context sentences, none of which entails it alone. Claims whose words are not in the
    context are listed in ``trace.unattributed_*_claims``.
  - ``"entailment"``: a context sentence is utilized when it entails a response claim and relevant
    when it entails a ground-truth claim. To save checks (``prune``, default on) a claim is tested
    only against the sentences of chunks whose chunk-level label for it was Entailment; a claim
    entailed by a chunk but by none of its single sentences marks no sentence and is listed in
    ``trace.unattributed_*_claims``.

  In both, a response claim is *supported* when some chunk entails it;
  *adherence* = every response claim supported; each claim belongs to the response sentence it was
  taken from (offline claims are substrings; LLM claims go to the sentence sharing most content
  words), and a response sentence is supported when all its claims are (vacuously when it has
  none). Relevance and completeness need the ground truth (NaN without it).
- ``trace_mode="annotator"``: the RAGBench labelling prompt (appendix 7.4) through the judge
  (:class:`ragsweep.judge.annotator.TraceAnnotator`); relevant/utilized keys and unsupported
  response sentences from its JSON (cached under stage ``"trace_annotation"`` after it parsed),
  then the same formulas. An unparsable answer is counted and gives NaN.
- ``trace_mode="none"``: no TRACe.

No aggregates here: each record carries its per-question values (``metrics``) and the registry
aggregates them once, with intervals and counts, for a run, ``ragsweep-score`` and the
meta-evaluation alike (:func:`ragsweep.analysis.scoring.score_run`). What is returned beside the records
are the run's counters::

    judge/extractions, judge/checks         texts / pairs sent to the extractor / checker
    judge/cache_hits                        claims, labels, annotations, RAGAS outputs from the cache
    judge/requests, judge/calls             LLM judge chat requests (re-asks included) / HTTP calls
    judge/failures, judge/parse_failures, judge/parse_retries
    judge/retries, judge/rate_limited       HTTP retries, of them answers 429 (rate limits)
    judge/budget_skipped                    requests not sent: the budget was reached
    judge/prompt_tokens, judge/completion_tokens
    judge/extraction_failures, judge/check_failures    claims / labels left missing
    evaluator/examples, evaluator/examples_with_gt
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Mapping, Sequence

from ragsweep.judge import ragchecker_metrics as rcm
from ragsweep.judge import trace as tr
from ragsweep.judge.checking import check_cached, kinded
from ragsweep.judge.claims import claim_text, extract_cached
from ragsweep.judge.components import EvaluatorConfigError  # noqa: F401 - re-exported
from ragsweep.judge.trace_steps import (  # noqa: F401 - re-exported
    TRACE_ATTRIBUTIONS,
    TRACE_MODES,
    AnnotatorTrace,
    EntailmentTrace,
    _chunk_texts,
    _flag,
    _nan_if_none,
    claim_sentences,
)
from ragsweep.records import response_of

log = logging.getLogger(__name__)

JUDGE_COUNTERS = (
    "requests", "calls", "failures", "parse_failures", "parse_retries", "prompt_tokens", "completion_tokens",
    "retries", "rate_limited", "budget_skipped",
)
PIPELINE_COUNTERS = ("extractions", "checks", "cache_hits", "extraction_failures", "check_failures",
                     "trace_failures", "ragas_failures")
RAGAS_KEYS = ("faithfulness", "answer_relevance", "context_relevance")


def _judges(*objs: Any) -> list[Any]:
    seen: list[Any] = []
    for o in objs:
        j = getattr(o, "judge", None)
        if j is not None and all(j is not s for s in seen):
            seen.append(j)
    return seen


def _claims(recs: list[dict], extractor: Any, cache: Any, stats: Counter) -> None:
    """Claims of every response and every ground-truth answer (shared through the cache)."""
    texts, questions, where = [], [], []
    for i, rec in enumerate(recs):
        rec["response_claims"] = rec["gt_answer_claims"] = None
        texts.append(response_of(rec))
        questions.append(str(rec.get("query") or ""))
        where.append((i, "response_claims"))
        if rcm.has_gt(rec):
            texts.append(str(rec["gt_answer"]))
            questions.append(str(rec.get("query") or ""))
            where.append((i, "gt_answer_claims"))
    for (i, field), cl in zip(where, extract_cached(extractor, texts, questions, cache, stats)):
        recs[i][field] = cl


def _matrices(recs: list[dict], checker: Any, cache: Any, stats: Counter, memo: dict) -> None:
    """The four matrices, all pairs of the batch checked together (claim vs retrieved chunk:
    kind "context"; response vs ground truth: kind "answer")."""
    pairs: dict[str, list[tuple[Any, str, str]]] = {"context": [], "answer": []}
    question = ""

    def add(claim_list: list[Any], ref: str, kind: str = "context") -> list[int]:
        start = len(pairs[kind])
        pairs[kind].extend((c, ref, question) for c in claim_list)
        return list(range(start, len(pairs[kind])))

    plan = []
    for rec in recs:
        chunks = _chunk_texts(rec)
        question = str(rec.get("query") or "")  # shown by a checker whose prompt has it (RefChecker's)
        resp = rec["response_claims"]  # strings or triplets: check_cached keys them by claim_text
        gt = rec["gt_answer_claims"]
        slots: dict[str, Any] = {}
        if resp is not None:
            slots["retrieved2response"] = [[add([c], ch)[0] for ch in chunks] for c in resp]
            if gt is not None:
                slots["answer2response"] = add(resp, str(rec["gt_answer"]), "answer")
        if gt is not None:
            slots["response2answer"] = add(gt, response_of(rec), "answer")
            slots["retrieved2answer"] = [[add([c], ch)[0] for ch in chunks] for c in gt]
        plan.append(slots)
    if kinded(checker, "answer"):
        labels = {kind: check_cached(checker, ps, cache, stats, memo, kind) if ps else [] for kind, ps in pairs.items()}
    else:  # one batch: the checker labels both kinds alike
        both = pairs["context"] + pairs["answer"]
        got = check_cached(checker, both, cache, stats, memo) if both else []
        labels = {"context": got[: len(pairs["context"])], "answer": got[len(pairs["context"]) :]}
    for rec, slots in zip(recs, plan):
        for field in rcm.MATRIX_FIELDS:
            idx = slots.get(field)
            if idx is None:
                rec[field] = None
            elif field.startswith("retrieved"):
                rec[field] = [[labels["context"][j] for j in row] for row in idx]
            else:
                rec[field] = [labels["answer"][j] for j in idx]


def _ragas(recs: list[dict], ragas: Any, cache: Any, stats: Counter, checker: Any = None) -> list[Any]:
    examples = []
    for rec in recs:
        r2r = rec.get("retrieved2response")
        supported = [_flag(row) for row in r2r] if r2r is not None else None
        chunks = _chunk_texts(rec)
        sentences = [s for doc in tr.key_sentences(chunks) for s in doc]
        claims = [claim_text(c) for c in rec["response_claims"]] if rec.get("response_claims") is not None else None
        examples.append({"question": rec.get("query"), "response": response_of(rec),
                         "sentences": sentences, "supported": supported, "claims": claims, "chunks": chunks})
    # faithfulness: each statement against all chunks joined, as RAGAS does
    return ragas.score(examples, cache=cache, stats=stats, checker=checker)


def _record_metrics(rec: dict, trc: Any, rg: Any) -> None:
    """The record's ``metrics`` (RAGChecker's as fractions, as RAGChecker writes them), ``trace``
    and ``ragas`` fields."""
    m100 = rcm.compute_example_metrics(rec)
    metrics = {k: (v if k == rcm.N_CLAIMS else v / 100.0) for k, v in m100.items()}
    if trc is not None:
        rec["trace"] = trc
        metrics.update({
            "trace/relevance": trc["relevance_score"],
            "trace/utilization": trc["utilization_score"],
            "trace/completeness": trc["completeness_score"],
            "trace/adherence": _nan_if_none(trc["adherence_score"]),
            "trace/sentence_adherence": trc["sentence_adherence"],
            "trace/overall_supported": _nan_if_none(trc.get("overall_supported")),
        })
    if rg is not None:
        extra = {k: v for k, v in rg.items() if k not in RAGAS_KEYS}
        if extra:
            rec["ragas"] = extra
        metrics.update({f"ragas/{k}": rg[k] for k in RAGAS_KEYS})
    rec["metrics"] = metrics


def evaluate_records(
    records: Sequence[Mapping[str, Any]],
    extractor: Any,
    checker: Any,
    cache: Any = None,
    *,
    trace: Any = None,
    ragas: Any = None,
    progress: Any = None,
) -> tuple[list[dict], dict[str, float]]:
    """Claims, entailment matrices, TRACe and RAGAS of every record; see the module doc.
    ``progress(step)``, if given, is called as each step (claims, entailment, trace, ragas) ends.

    ``extractor`` / ``checker``: built components (:mod:`ragsweep.judge.components`);
    ``trace``: an :class:`EntailmentTrace` / :class:`AnnotatorTrace` step or None (no TRACe);
    ``ragas``: a :class:`ragsweep.judge.ragas.Ragas` or None. Judges the parts hold are
    counted (``judge/*``), never started or closed here.
    """
    from ragsweep.judge.schema import validate_record

    judges = _judges(extractor, checker, trace, ragas)
    before = [Counter(j.stats) for j in judges]
    stats: Counter[str] = Counter()
    recs = [dict(r) for r in records]
    for i, rec in enumerate(recs):
        validate_record(rec, i, "<records>")

    tick = progress or (lambda step: None)
    _claims(recs, extractor, cache, stats)
    tick("claims")
    memo: dict[tuple[str, str], str] = {}
    _matrices(recs, checker, cache, stats, memo)
    tick("entailment")
    traces = trace.annotate(recs, checker, cache, stats, memo) if trace is not None else [None] * len(recs)
    tick("trace")
    ragas_out = _ragas(recs, ragas, cache, stats, checker) if ragas is not None else [None] * len(recs)
    tick("ragas")
    for rec, trc, rg in zip(recs, traces, ragas_out):
        _record_metrics(rec, trc, rg)

    out: dict[str, float] = {}  # counters only: the registry aggregates the per-question values, once
    for k in PIPELINE_COUNTERS:
        out[f"judge/{k}"] = float(stats.get(k, 0))
    for k in JUDGE_COUNTERS:
        out[f"judge/{k}"] = float(sum(j.stats.get(k, 0) - b.get(k, 0) for j, b in zip(judges, before)))
    out["evaluator/examples"] = float(len(recs))
    out["evaluator/examples_with_gt"] = float(sum(1 for r in recs if rcm.has_gt(r)))
    return recs, out


__all__ = [
    "AnnotatorTrace",
    "EntailmentTrace",
    "EvaluatorConfigError",
    "check_cached",
    "claim_sentences",
    "evaluate_records",
]
