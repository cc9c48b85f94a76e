"""Score records claim by claim: extraction -> entailment checks -> RAGChecker, TRACe, RAGAS.

    records, metrics = evaluate_records(records, extractor, checker, cache=cache)

A record is RAGChecker's input schema (``query_id, query, gt_answer, response,
retrieved_context: [{doc_id, text}]``). Each returned record is a copy with RAGChecker's output
fields (orientation in :mod:`ragsweep.evaluator.ragchecker_metrics`)::

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
too (stage ``"claims"``, :func:`ragsweep.evaluator.claims.extract_cached`). Scoring the same
records twice therefore makes no model call the second time.

TRACe (RAGBench eq. 1-4, :mod:`ragsweep.evaluator.trace`), documents = the retrieved chunks
split into keyed sentences ``0a, 0b, ...``, response sentences ``a, b, ...``:

- ``trace_mode="entailment"`` (default): which context sentences are *utilized* (by the
  response claims) and *relevant* (to the ground-truth claims) is decided by
  ``trace_attribution``:

  - ``"cover"`` (default): the sentences a claim draws its words from
    (:func:`ragsweep.evaluator.trace.lexical_cover`: a greedy cover of the claim's content words,
    each sentence adding at least 3 new ones); no check is made. On RAGBench validation this is
    much closer to GPT-4's utilized sentences than entailment (RMSE of utilization 0.134 vs 0.222,
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
  (:class:`ragsweep.evaluator.judge.TraceAnnotator`); relevant/utilized keys and unsupported
  response sentences from its JSON (cached under stage ``"trace_annotation"`` after it parsed),
  then the same formulas. An unparsable answer is counted and gives NaN.
- ``trace_mode="none"``: no TRACe.

Aggregate metrics (stable names)::

    ragchecker/overall/{precision,recall,f1,n_response_claims}      0-100 (RAGChecker's scale)
    ragchecker/retriever/{claim_recall,context_precision}            0-100
    ragchecker/generator/{context_utilization,noise_sensitivity_in_relevant,
        noise_sensitivity_in_irrelevant,hallucination,self_knowledge,faithfulness}   0-100
    trace/relevance, trace/utilization, trace/completeness          mean over examples, [0, 1]
    trace/adherence_rate        share of examples whose every response claim/sentence is supported
    trace/sentence_adherence    mean share of supported response sentences (RAGBench's granular A)
    ragas/faithfulness, ragas/answer_relevance, ragas/context_relevance   [0, 1], see ragas.py
    judge/extractions, judge/checks         texts / pairs sent to the extractor / checker
    judge/cache_hits                        claims, labels, annotations, RAGAS outputs from the cache
    judge/requests, judge/calls             LLM judge chat requests (re-asks included) / HTTP calls
    judge/failures, judge/parse_failures, judge/parse_retries
    judge/prompt_tokens, judge/completion_tokens
    judge/extraction_failures, judge/check_failures    claims / labels left missing
    evaluator/examples, evaluator/examples_with_gt

Means skip NaN; a metric no example defines is NaN.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

from ragsweep.errors import ConfigError
from ragsweep.evaluator import ragchecker_metrics as rcm
from ragsweep.evaluator import trace as tr
from ragsweep.evaluator.claims import (
    LLMExtractor,
    OfflineExtractor,
    claim_text,
    component_id,
    extract_cached,
)
from ragsweep.text import content_words, sentence_spans

log = logging.getLogger(__name__)

ENTAILMENT = "Entailment"
LABELS = ("Entailment", "Neutral", "Contradiction")
TRACE_MODES = ("entailment", "annotator", "none")
#: how trace_mode="entailment" finds relevant / utilized context sentences (see the module doc)
TRACE_ATTRIBUTIONS = ("cover", "entailment")
_NAN = float("nan")

JUDGE_COUNTERS = (
    "requests", "calls", "failures", "parse_failures", "parse_retries", "prompt_tokens", "completion_tokens",
)
PIPELINE_COUNTERS = ("extractions", "checks", "cache_hits", "extraction_failures", "check_failures")
TRACE_METRICS = ("relevance", "utilization", "completeness", "adherence_rate", "sentence_adherence")


class EvaluatorConfigError(ConfigError, ValueError):
    """An extractor/checker/annotator spec that cannot be built (e.g. an LLM part without a judge)."""


# --------------------------------------------------------------------------------------------
# building components from specs
# --------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    from ragsweep.evaluator.judge import _plain as plain

    return plain(value)


def _instantiate(spec: Mapping[str, Any]) -> Any:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.create(dict(spec)), _convert_="all")


def _attach_judge(obj: Any, judge: Any, what: str) -> Any:
    if hasattr(obj, "judge") and obj.judge is None:
        if judge is None:
            raise EvaluatorConfigError(f"evaluator.{what} {type(obj).__name__} needs a judge: set evaluator.judge")
        obj.judge = judge
    return obj


def _offline_extractor(judge: Any, opts: dict) -> Any:
    return OfflineExtractor(**opts)


def _llm_extractor(judge: Any, opts: dict) -> Any:
    return LLMExtractor(judge=judge, **opts)


def _offline_checker(judge: Any, opts: dict) -> Any:
    from ragsweep.evaluator.offline import OfflineChecker

    return OfflineChecker(**opts)


def _nli_checker(judge: Any, opts: dict) -> Any:
    from ragsweep.evaluator.nli import NLIChecker

    return NLIChecker(**opts)


def _llm_checker(judge: Any, opts: dict) -> Any:
    from ragsweep.evaluator.judge import LLMChecker

    return LLMChecker(judge=judge, **opts)


def _build(kind: str, spec: Any, judge: Any, modes: dict[str, Callable[[Any, dict], Any]], methods: tuple[str, ...]) -> Any:
    """A component from a mode name, a mapping (``mode`` or ``_target_`` plus options) or an
    object that already has one of ``methods``."""
    spec = _plain(spec)
    if spec is None:
        spec = "offline"
    if isinstance(spec, str):
        spec = {"mode": spec}
    if isinstance(spec, Mapping):
        opts = dict(spec)
        if "_target_" in opts:
            return _attach_judge(_instantiate(opts), judge, kind)
        mode = opts.pop("mode", "offline")
        if mode not in modes:
            raise EvaluatorConfigError(f"evaluator.{kind}.mode must be {', '.join(modes)}, got {mode!r}")
        if mode == "llm" and judge is None:
            raise EvaluatorConfigError(f"evaluator.{kind} mode llm needs a judge: set evaluator.judge")
        return modes[mode](judge, opts)
    if not any(hasattr(spec, m) for m in methods):
        raise TypeError(f"a {kind} needs {'/'.join(m + '()' for m in methods)}, got {type(spec).__name__}")
    return _attach_judge(spec, judge, kind)


def build_extractor(spec: Any = "offline", judge: Any = None) -> Any:
    """An extractor from ``"offline"`` / ``"llm"``, a mapping (``mode`` or ``_target_`` plus
    options, e.g. ``{mode: llm, claim_format: sentence}``) or an extractor object."""
    return _build("extractor", spec, judge, {"offline": _offline_extractor, "llm": _llm_extractor}, ("extract_many", "extract"))


def build_checker(spec: Any = "offline", judge: Any = None) -> Any:
    """A checker from ``"offline"`` / ``"llm"`` / ``"nli"``, a mapping (``mode`` or ``_target_``
    plus options) or a checker object (anything with ``check_pairs``)."""
    return _build("checker", spec, judge, {"offline": _offline_checker, "nli": _nli_checker, "llm": _llm_checker}, ("check_pairs",))


# --------------------------------------------------------------------------------------------
# cached checking
# --------------------------------------------------------------------------------------------
checker_id = component_id  # the same identity rule as extractors


def _kinded(checker: Any, kind: str) -> bool:
    """Whether ``checker`` labels ``kind`` references differently (its ``reference_kinds``)."""
    return kind != "context" and kind in (getattr(checker, "reference_kinds", None) or ())


def _call_checker(checker: Any, pairs: list[tuple[str, str]], cache: Any, kind: str = "context") -> list[Any]:
    fn = checker.check_pairs
    try:
        takes_cache = "cache" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover
        takes_cache = False
    kw: dict[str, Any] = {"cache": cache} if takes_cache else {}
    if _kinded(checker, kind):
        kw["kind"] = kind
    labels = list(fn(pairs, **kw))
    if len(labels) != len(pairs):
        raise RuntimeError(f"{checker!r} returned {len(labels)} labels for {len(pairs)} pairs")
    for lab in labels:
        if lab is not None and lab not in LABELS:
            raise ValueError(f"{checker!r} returned the label {lab!r}; expected one of {LABELS} or None")
    return labels


def check_cached(
    checker: Any,
    pairs: Sequence[tuple[str, str]],
    cache: Any = None,
    stats: Counter | None = None,
    memo: dict | None = None,
    kind: str = "context",
) -> list[str | None]:
    """A label per (claim, reference) pair; identical pairs are checked once, cached ones never.

    ``stats`` gets ``cache_hits``, ``checks`` (pairs sent to the checker) and ``check_failures``.
    ``memo``: labels already known in this run (updated), so that a pair asked again in a later
    round (a one-sentence chunk is also its own sentence) costs nothing. ``kind``: the references
    are retrieved ``context`` or ``answer`` texts; a checker that tells them apart
    (``reference_kinds``, the offline checker's two thresholds) gets it, and its answer labels are
    cached and memoised apart.
    """
    from ragsweep.cache import Cache

    stats = stats if stats is not None else Counter()
    kinded = _kinded(checker, kind)
    memo = {} if kinded or memo is None else memo
    pairs = [(str(c), str(r)) for c, r in pairs]
    unique = list(dict.fromkeys(pairs))
    result: dict[tuple[str, str], Any] = {}
    todo = []
    for p in unique:
        if not p[1].strip():
            result[p] = "Neutral"  # an empty reference entails nothing
        elif p in memo:
            result[p] = memo[p]
        else:
            todo.append(p)
    keys: dict[tuple[str, str], str] = {}
    if cache is not None and todo:
        cid = checker_id(checker)
        extra = (f"kind={kind}",) if kinded else ()
        keys = {p: Cache.key("entailment", cid, *extra, p[0], p[1]) for p in todo}
        found = cache.get_many("entailment", keys.values())
        for p in todo:
            if keys[p] in found:
                result[p] = memo[p] = found[keys[p]]
        stats["cache_hits"] += sum(1 for p in todo if p in result)
        todo = [p for p in todo if p not in result]
    if todo:
        stats["checks"] += len(todo)
        labels = _call_checker(checker, todo, cache, kind)
        new = {}
        for p, lab in zip(todo, labels):
            result[p] = lab
            if lab is None:
                stats["check_failures"] += 1
                continue
            memo[p] = lab
            if cache is not None:
                new[keys[p]] = lab
        if new:
            cache.put_many("entailment", new)
    return [result[p] for p in pairs]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _chunk_texts(record: Mapping[str, Any]) -> list[str]:
    return [str(c.get("text") or "") for c in record.get("retrieved_context") or []]


def claim_sentences(response: str, claims: Sequence[Any]) -> list[int | None]:
    """Index of the response sentence each claim belongs to (None when the response has no
    sentence). A claim found verbatim in the response belongs to the sentence it starts in
    (searched left to right); any other claim to the sentence sharing most content words with it
    (ties: the first)."""
    spans = sentence_spans(response)
    if not spans:
        return [None] * len(claims)
    sent_words = [set(content_words(response[s:e])) for s, e in spans]
    out: list[int | None] = []
    cursor = 0
    for claim in claims:
        text = claim_text(claim)
        pos = response.find(text, cursor) if isinstance(claim, str) and text else -1
        if pos < 0 and isinstance(claim, str) and text:
            pos = response.find(text)
        if pos >= 0:
            cursor = pos + len(text)
            idx = next((k for k, (s, e) in enumerate(spans) if s <= pos < e), None)
            if idx is None:  # starts in whitespace between sentences
                idx = next((k for k, (s, _) in enumerate(spans) if s >= pos), len(spans) - 1)
            out.append(idx)
            continue
        words = set(content_words(text))
        best = max(range(len(spans)), key=lambda k: (len(words & sent_words[k]), -k))
        out.append(best)
    return out


def _flag(labels: Sequence[Any] | None) -> bool | None:
    """Supported by some reference: True on any Entailment, None if unknown, else False."""
    if labels is None:
        return None
    if any(lab == ENTAILMENT for lab in labels):
        return True
    if any(lab is None for lab in labels):
        return None
    return False


def _mean(values: Sequence[Any]) -> float:
    vals = []
    for v in values:
        if v is None:
            continue
        v = float(v)
        if not math.isnan(v):
            vals.append(v)
    return sum(vals) / len(vals) if vals else _NAN


def _nan_if_none(v: Any) -> float:
    return _NAN if v is None else float(v)


# --------------------------------------------------------------------------------------------
# TRACe
# --------------------------------------------------------------------------------------------
def _trace_result(keyed: list, resp_sents: list, rel: list[str] | None, util: list[str] | None,
                  sentence_flags: list[bool | None] | None, adherent: bool | None) -> dict[str, Any]:
    scores = tr.trace_scores(keyed, rel or [], util or [])
    relevance, utilization, completeness = scores["relevance"], scores["utilization"], scores["completeness"]
    documents = scores["documents"]
    if rel is None:
        relevance = completeness = _NAN
        documents = [{**d, "relevance": _NAN, "completeness": _NAN} for d in documents]
    if util is None:
        utilization = completeness = _NAN
        documents = [{**d, "utilization": _NAN, "completeness": _NAN} for d in documents]
    if sentence_flags is None or any(f is None for f in sentence_flags) or not resp_sents:
        sentence_adherence = _NAN
    else:
        sentence_adherence = tr.adherence_rate(resp_sents, [bool(f) for f in sentence_flags])
    unsupported = (
        [k for (k, _), f in zip(resp_sents, sentence_flags) if f is False] if sentence_flags is not None else None
    )
    return {
        "documents_sentences": [[list(s) for s in doc] for doc in keyed],
        "response_sentences": [list(s) for s in resp_sents],
        "all_relevant_sentence_keys": rel,
        "all_utilized_sentence_keys": util,
        "unsupported_response_sentence_keys": unsupported,
        "adherence_score": adherent,
        "relevance_score": relevance,
        "utilization_score": utilization,
        "completeness_score": completeness,
        "sentence_adherence": sentence_adherence,
        "documents": documents,
        "unknown_keys": scores["unknown_keys"],
    }


def _trace_entailment(recs: list[dict], checker: Any, cache: Any, stats: Counter, prune: bool,
                      memo: dict | None = None, attribution: str = "cover") -> list[dict]:
    """Sentence-level TRACe annotations from entailment checks (see the module doc)."""
    plans = []
    pairs: list[tuple[str, str]] = []
    for rec in recs:
        keyed = tr.key_sentences(_chunk_texts(rec))
        resp_sents = tr.key_response(str(rec.get("response") or ""))
        plan = {"keyed": keyed, "resp_sents": resp_sents, "util": [], "rel": [],
                "util_known": True, "rel_known": rcm.has_gt(rec), "cover": {}}
        for role, claims_field, matrix_field in (
            ("util", "response_claims", "retrieved2response"),
            ("rel", "gt_answer_claims", "retrieved2answer"),
        ):
            claims, matrix = rec.get(claims_field), rec.get(matrix_field)
            if role == "rel" and not plan["rel_known"]:
                continue
            if attribution == "cover":
                if claims is None:
                    plan[f"{role}_known"] = False
                else:  # lexical attribution: no check needed
                    plan["cover"][role] = tr.lexical_cover([claim_text(c) for c in claims], keyed)
                continue
            if claims is None or matrix is None:
                plan[f"{role}_known"] = False
                continue
            for i, claim in enumerate(claims):
                ctext = claim_text(claim)
                for c, sents in enumerate(keyed):
                    lab = matrix[i][c]
                    if prune:
                        if lab is None:
                            plan[f"{role}_known"] = False
                        if lab != ENTAILMENT:
                            continue
                    for key, sent in sents:
                        plan[role].append((i, c, key, len(pairs)))
                        pairs.append((ctext, sent))
        plans.append(plan)
    labels = check_cached(checker, pairs, cache, stats, memo) if pairs else []

    out = []
    for rec, plan in zip(recs, plans):
        found: dict[str, Any] = {}
        unattributed: dict[str, list[int]] = {}
        for role, matrix_field in (("util", "retrieved2response"), ("rel", "retrieved2answer")):
            if attribution == "cover":
                per_claim = plan["cover"].get(role)
                known = plan[f"{role}_known"] and per_claim is not None
                found[role] = list(dict.fromkeys(k for keys in per_claim for k in keys)) if known else None
                unattributed[role] = [i for i, keys in enumerate(per_claim) if not keys] if known else []
                continue
            keys: list[str] = []
            hit_claims: set[tuple[int, int]] = set()
            for i, c, key, j in plan[role]:
                lab = labels[j]
                if lab is None:
                    plan[f"{role}_known"] = False
                elif lab == ENTAILMENT:
                    keys.append(key)
                    hit_claims.add((i, c))
            found[role] = list(dict.fromkeys(keys)) if plan[f"{role}_known"] else None
            matrix = rec.get(matrix_field)
            claims_field = "response_claims" if role == "util" else "gt_answer_claims"
            un = []
            if matrix is not None and rec.get(claims_field) is not None and plan[f"{role}_known"]:
                for i, row in enumerate(matrix):
                    chunks = [c for c, lab in enumerate(row) if lab == ENTAILMENT]
                    if chunks and not any((i, c) in hit_claims for c in chunks):
                        un.append(i)
            unattributed[role] = un

        claims = rec.get("response_claims")
        r2r = rec.get("retrieved2response")
        if claims is None or r2r is None:
            claim_flags, sentence_flags, adherent = None, None, None
        else:
            claim_flags = [_flag(row) for row in r2r]
            owner = claim_sentences(str(rec.get("response") or ""), claims)
            sentence_flags = []
            for k in range(len(plan["resp_sents"])):
                sentence_flags.append(tr.adherence(f for f, o in zip(claim_flags, owner) if o == k))
            adherent = tr.adherence(claim_flags)
        res = _trace_result(plan["keyed"], plan["resp_sents"], found["rel"], found["util"], sentence_flags, adherent)
        res["mode"] = "entailment"
        res["attribution"] = attribution
        res["unattributed_response_claims"] = unattributed["util"]
        res["unattributed_gt_answer_claims"] = unattributed["rel"]
        out.append(res)
    return out


def _trace_annotator(recs: list[dict], annotator: Any, cache: Any, stats: Counter) -> list[dict]:
    """TRACe annotations from the RAGBench labelling prompt through the judge."""
    from ragsweep.cache import Cache

    examples = []
    for rec in recs:
        keyed = tr.key_sentences(_chunk_texts(rec))
        resp_sents = tr.key_response(str(rec.get("response") or ""))
        examples.append((keyed, str(rec.get("query") or ""), resp_sents))
    aid = annotator.cache_id if cache is not None else None
    keys = [Cache.key("trace_annotation", aid, [[list(s) for s in d] for d in k], q, [list(s) for s in r])
            for k, q, r in examples] if cache is not None else [None] * len(examples)
    found = cache.get_many("trace_annotation", [k for k in keys]) if cache is not None else {}
    results: list[Any] = [found.get(k) if cache is not None else None for k in keys]
    stats["cache_hits"] += sum(1 for r in results if r is not None)
    todo: dict[Any, list[int]] = {}
    for i, (k, r) in enumerate(zip(keys, results)):
        if r is None:
            todo.setdefault(k if cache is not None else i, []).append(i)
    if todo:
        idx = [v[0] for v in todo.values()]
        answers = annotator.annotate_many([examples[i] for i in idx])
        new = {}
        for (k, members), ans in zip(todo.items(), answers):
            for i in members:
                results[i] = ans
            if ans is not None and cache is not None:
                new[k] = ans
        if new:
            cache.put_many("trace_annotation", new)
    out = []
    for (keyed, _, resp_sents), ann in zip(examples, results):
        if ann is None:
            res = _trace_result(keyed, resp_sents, None, None, None, None)
        else:
            flags = tr.sentence_support(resp_sents, ann["unsupported_response_sentence_keys"])
            res = _trace_result(
                keyed, resp_sents, list(ann["all_relevant_sentence_keys"]),
                list(ann["all_utilized_sentence_keys"]), flags, tr.adherence(flags),
            )
            res["sentence_support_information"] = ann["sentence_support_information"]
            res["overall_supported"] = ann.get("overall_supported")
        res["mode"] = "annotator"
        res["annotation_failed"] = ann is None
        out.append(res)
    return out


# --------------------------------------------------------------------------------------------
# the pipeline
# --------------------------------------------------------------------------------------------
def _judges(*objs: Any) -> list[Any]:
    seen: list[Any] = []
    for o in objs:
        j = o if (o is not None and hasattr(o, "ask") and hasattr(o, "identity")) else getattr(o, "judge", None)
        if j is not None and all(j is not s for s in seen):
            seen.append(j)
    return seen


def evaluate_records(
    records: Sequence[Mapping[str, Any]],
    extractor: Any = "offline",
    checker: Any = "offline",
    cache: Any = None,
    trace_mode: str = "entailment",
    annotator: Any = None,
    ragas: Any = True,
    embedder: Any = None,
    *,
    judge: Any = None,
    base_url: str | None = None,
    model: str | None = None,
    prune: bool = True,
    trace_attribution: str = "cover",
    context_threshold: float = 0.5,
    n_questions: int = 3,
    embedding_model: str = "minilm",
) -> tuple[list[dict], dict[str, float]]:
    """Claims, entailment matrices, TRACe and RAGAS of every record; see the module doc.

    ``extractor`` / ``checker``: objects, or specs for :func:`build_extractor` /
    :func:`build_checker` (``"offline"``, ``"llm"``, ``"nli"``, mappings). ``judge``: a
    :class:`ragsweep.evaluator.judge.Judge` for the LLM parts (with a judge, RAGAS uses its LLM
    variants); ``base_url`` + ``model`` build one for an external endpoint (and ``model`` names the
    NLI model for ``checker="nli"``). A judge built here is closed here; one passed in is left to
    its owner. ``annotator``: a :class:`~ragsweep.evaluator.judge.TraceAnnotator` for
    ``trace_mode="annotator"`` (default: one on ``judge``). ``ragas``: True, False or a
    :class:`~ragsweep.evaluator.ragas.Ragas`; ``embedder``: an object with ``encode(texts)``
    returning unit-norm rows (default: :class:`~ragsweep.evaluator.ragas.Embedder` of
    ``embedding_model``).
    """
    from ragsweep.evaluator.judge import Judge, TraceAnnotator
    from ragsweep.evaluator.ragas import Ragas
    from ragsweep.evaluator.ragas import aggregate as ragas_aggregate
    from ragsweep.evaluator.schema import validate_record

    if trace_mode not in TRACE_MODES:
        raise EvaluatorConfigError(f"evaluator.trace_mode must be one of {', '.join(TRACE_MODES)}, got {trace_mode!r}")
    if trace_attribution not in TRACE_ATTRIBUTIONS:
        raise EvaluatorConfigError(
            f"evaluator.trace_attribution must be one of {', '.join(TRACE_ATTRIBUTIONS)}, got {trace_attribution!r}"
        )
    own_judge = None
    if judge is None and base_url:
        judge = own_judge = Judge(base_url=base_url, model=model)
    if model and isinstance(checker, str) and checker == "nli":
        checker = {"mode": "nli", "model": model}
    try:
        extractor = build_extractor(extractor, judge)
        checker = build_checker(checker, judge)
        if trace_mode == "annotator" and annotator is None:
            if judge is None:
                raise EvaluatorConfigError("evaluator.trace_mode annotator needs a judge: set evaluator.judge")
            annotator = TraceAnnotator(judge)
        if ragas is True:
            if embedder is None:
                embedder = _default_embedder(embedding_model, cache)
            ragas = Ragas(judge=judge, embedder=embedder, n_questions=n_questions,
                          context_threshold=context_threshold)
        judges = _judges(extractor, checker, annotator, ragas if ragas else None, judge)
        before = [Counter(j.stats) for j in judges]
        stats: Counter[str] = Counter()

        recs = [dict(r) for r in records]
        for i, rec in enumerate(recs):
            validate_record(rec, i, "<records>")

        # 1. claims of every response and every ground-truth answer (shared through the cache)
        texts, questions, where = [], [], []
        for i, rec in enumerate(recs):
            texts.append(str(rec.get("response") or ""))
            questions.append(str(rec.get("query") or ""))
            where.append((i, "response_claims"))
            if rcm.has_gt(rec):
                texts.append(str(rec["gt_answer"]))
                questions.append(str(rec.get("query") or ""))
                where.append((i, "gt_answer_claims"))
        claims = extract_cached(extractor, texts, questions, cache, stats)
        for rec in recs:
            rec["response_claims"] = None
            rec["gt_answer_claims"] = None
        for (i, field), cl in zip(where, claims):
            recs[i][field] = cl

        # 2. the four matrices, all pairs of the batch checked together
        # (claim vs retrieved chunk: kind "context"; response vs ground truth: kind "answer")
        pairs: dict[str, list[tuple[str, str]]] = {"context": [], "answer": []}
        plan = []
        for rec in recs:
            chunks = _chunk_texts(rec)
            resp = [claim_text(c) for c in rec["response_claims"]] if rec["response_claims"] is not None else None
            gt = [claim_text(c) for c in rec["gt_answer_claims"]] if rec["gt_answer_claims"] is not None else None
            slots: dict[str, Any] = {}

            def add(claim_list: list[str], ref: str, kind: str = "context") -> list[int]:
                start = len(pairs[kind])
                pairs[kind].extend((c, ref) for c in claim_list)
                return list(range(start, len(pairs[kind])))

            if resp is not None:
                slots["retrieved2response"] = [[add([c], ch)[0] for ch in chunks] for c in resp]
                if gt is not None:
                    slots["answer2response"] = add(resp, str(rec["gt_answer"]), "answer")
            if gt is not None:
                slots["response2answer"] = add(gt, str(rec.get("response") or ""), "answer")
                slots["retrieved2answer"] = [[add([c], ch)[0] for ch in chunks] for c in gt]
            plan.append(slots)
        memo: dict[tuple[str, str], str] = {}
        if _kinded(checker, "answer"):
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

        # 3. TRACe
        if trace_mode == "entailment":
            traces = _trace_entailment(recs, checker, cache, stats, prune, memo, trace_attribution)
        elif trace_mode == "annotator":
            traces = _trace_annotator(recs, annotator, cache, stats)
        else:
            traces = [None] * len(recs)

        # 4. RAGAS
        ragas_out: list[Any] = [None] * len(recs)
        if ragas:
            examples = []
            for rec in recs:
                r2r = rec.get("retrieved2response")
                supported = [_flag(row) for row in r2r] if r2r is not None else None
                sentences = [s for doc in tr.key_sentences(_chunk_texts(rec)) for s in doc]
                examples.append({"question": rec.get("query"), "response": rec.get("response"),
                                 "sentences": sentences, "supported": supported})
            ragas_out = ragas.score(examples, cache=cache, stats=stats)

        # 5. per-example metrics
        per_example = []
        trace_rows = []
        for rec, trc, rg in zip(recs, traces, ragas_out):
            m100 = rcm.compute_example_metrics(rec)
            per_example.append(m100)
            metrics = {k: (v if k == rcm.N_CLAIMS else v / 100.0) for k, v in m100.items()}
            if trc is not None:
                rec["trace"] = trc
                row = {
                    "relevance": trc["relevance_score"],
                    "utilization": trc["utilization_score"],
                    "completeness": trc["completeness_score"],
                    "adherence": _nan_if_none(trc["adherence_score"]),
                    "sentence_adherence": trc["sentence_adherence"],
                }
                trace_rows.append(row)
                metrics.update({f"trace/{k}": v for k, v in row.items()})
            if rg is not None:
                extra = {k: v for k, v in rg.items() if k not in ("faithfulness", "answer_relevance", "context_relevance")}
                if extra:
                    rec["ragas"] = extra
                metrics.update({f"ragas/{k}": rg[k] for k in ("faithfulness", "answer_relevance", "context_relevance")})
            rec["metrics"] = metrics

        # 6. aggregates
        out: dict[str, float] = {}
        out.update(rcm.flatten(rcm.aggregate(per_example), "ragchecker/"))
        if trace_mode != "none":
            out["trace/relevance"] = _mean([r["relevance"] for r in trace_rows])
            out["trace/utilization"] = _mean([r["utilization"] for r in trace_rows])
            out["trace/completeness"] = _mean([r["completeness"] for r in trace_rows])
            out["trace/adherence_rate"] = _mean([r["adherence"] for r in trace_rows])
            out["trace/sentence_adherence"] = _mean([r["sentence_adherence"] for r in trace_rows])
        if ragas:
            out.update({f"ragas/{k}": v for k, v in ragas_aggregate(ragas_out).items()})
        for k in PIPELINE_COUNTERS:
            out[f"judge/{k}"] = float(stats.get(k, 0))
        for k in JUDGE_COUNTERS:
            out[f"judge/{k}"] = float(sum(j.stats.get(k, 0) - b.get(k, 0) for j, b in zip(judges, before)))
        out["evaluator/examples"] = float(len(recs))
        out["evaluator/examples_with_gt"] = float(sum(1 for r in recs if rcm.has_gt(r)))
        return recs, out
    finally:
        if own_judge is not None:
            own_judge.close()


def _default_embedder(model: str, cache: Any) -> Any:
    """The default RAGAS embedder (loads nothing until a text must be encoded)."""
    from ragsweep.evaluator.ragas import Embedder

    return Embedder(model=model, cache=cache)


__all__ = [
    "build_checker",
    "build_extractor",
    "EvaluatorConfigError",
    "check_cached",
    "checker_id",
    "claim_sentences",
    "evaluate_records",
]
