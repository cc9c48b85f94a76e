"""TRACe (RAGBench eq. 1-4) sentence annotations of scored records: the two ways to find the
relevant / utilized context sentences and the supported response sentences (the module doc of
:mod:`ragsweep.judge.pipeline` describes both):

- :class:`EntailmentTrace` (``trace_mode: entailment``): from the claims and the entailment
  matrices, ``attribution`` ``cover`` (lexical) or ``entailment`` (sentence-level checks);
- :class:`AnnotatorTrace` (``trace_mode: annotator``): the RAGBench labelling prompt through the
  judge (cached under stage ``"trace_annotation"`` after it parsed). A response sentence the
  judge did not label is a judge failure (:func:`annotated_support` gives it None): adherence and
  sentence adherence are NaN, the keys are listed in ``unlabelled_response_sentence_keys`` and
  ``stats["trace_failures"]`` counts the question; the judge's ``overall_supported`` is kept.

Each step's ``annotate(records, checker, cache, stats, memo) -> [trace dict]``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ragsweep.judge import ragchecker_metrics as rcm
from ragsweep.judge import trace as tr
from ragsweep.judge.checking import check_cached
from ragsweep.judge.claims import claim_text
from ragsweep.judge.labels import ENTAILMENT
from ragsweep.corpus.text import content_words, sentence_spans
from ragsweep.records import response_of

TRACE_MODES = ("entailment", "annotator", "none")
#: how trace_mode="entailment" finds relevant / utilized context sentences
TRACE_ATTRIBUTIONS = ("cover", "entailment")
_NAN = float("nan")


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



def _nan_if_none(v: Any) -> float:
    return _NAN if v is None else float(v)


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
        question = str(rec.get("query") or "")  # shown by a checker whose prompt has it
        resp_sents = tr.key_response(response_of(rec))
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
                for c, sents in enumerate(keyed):
                    lab = matrix[i][c]
                    if prune:
                        if lab is None:
                            plan[f"{role}_known"] = False
                        if lab != ENTAILMENT:
                            continue
                    for key, sent in sents:
                        plan[role].append((i, c, key, len(pairs)))
                        pairs.append((claim, sent, question))
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
            owner = claim_sentences(response_of(rec), claims)
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

def annotated_support(resp_sents: Sequence[Sequence[str]], ann: Mapping[str, Any]) -> list[bool | None]:
    """Per response sentence, the annotator's verdict: False when its key is listed unsupported
    (or its ``fully_supported`` is false), True when the judge labelled it fully supported, None
    when the judge did not label it at all (a judge failure, never taken as supported)."""
    bad = {tr._norm_key(k) for k in ann.get("unsupported_response_sentence_keys") or []}
    labelled: dict[str, bool] = {}
    for entry in ann.get("sentence_support_information") or []:
        key = tr._norm_key(entry.get("response_sentence_key"))
        labelled[key] = labelled.get(key, True) and entry.get("fully_supported") is True
    out: list[bool | None] = []
    for key, _ in resp_sents:
        k = tr._norm_key(key)
        out.append(False if k in bad or labelled.get(k) is False else (True if k in labelled else None))
    return out


def _trace_annotator(recs: list[dict], annotator: Any, cache: Any, stats: Counter) -> list[dict]:
    """TRACe annotations from the RAGBench labelling prompt through the judge."""
    from ragsweep.store.cache import Cache, fetch

    examples = []
    for rec in recs:
        keyed = tr.key_sentences(_chunk_texts(rec))
        resp_sents = tr.key_response(response_of(rec))
        examples.append((keyed, str(rec.get("query") or ""), resp_sents))
    if cache is not None:
        aid = annotator.cache_id
        keys = {i: Cache.key("trace_annotation", aid, [[list(s) for s in d] for d in k], q, [list(s) for s in r])
                for i, (k, q, r) in enumerate(examples)}
    else:
        keys = {i: str(i) for i in range(len(examples))}  # nothing shared, nothing stored
    asked: list[int] = []

    def compute(todo: list[int]) -> dict[int, Any]:
        asked.extend(todo)
        return dict(zip(todo, annotator.annotate_many([examples[i] for i in todo])))

    got = fetch(cache, "trace_annotation", keys, compute, keep=lambda a: a is not None) if examples else {}
    results = [got[i] for i in range(len(examples))]
    asked_keys = {keys[i] for i in asked}
    stats["cache_hits"] += sum(1 for i in keys if keys[i] not in asked_keys)  # per example, as before
    out = []
    for (keyed, _, resp_sents), ann in zip(examples, results):
        if ann is None:
            res = _trace_result(keyed, resp_sents, None, None, None, None)
        else:
            flags = annotated_support(resp_sents, ann)
            unlabelled = [k for (k, _), f in zip(resp_sents, flags) if f is None]
            # a response sentence the judge did not label is a judge failure, not "supported":
            # adherence and sentence adherence are unknown (NaN) for this question
            adherent = None if unlabelled else tr.adherence(flags)
            res = _trace_result(
                keyed, resp_sents, list(ann["all_relevant_sentence_keys"]),
                list(ann["all_utilized_sentence_keys"]), flags, adherent,
            )
            res["sentence_support_information"] = ann["sentence_support_information"]
            res["unlabelled_response_sentence_keys"] = unlabelled
            if unlabelled:
                stats["trace_failures"] += 1
        res["overall_supported"] = ann.get("overall_supported") if ann is not None else None
        res["mode"] = "annotator"
        res["annotation_failed"] = ann is None
        out.append(res)
    return out


@dataclass
class EntailmentTrace:
    """TRACe from the claims and entailment checks (``trace_mode: entailment``)."""

    attribution: str = "cover"  # see TRACE_ATTRIBUTIONS
    prune: bool = True  # attribution entailment: test sentences only inside entailing chunks

    def __post_init__(self) -> None:
        if self.attribution not in TRACE_ATTRIBUTIONS:
            from ragsweep.judge.components import EvaluatorConfigError

            raise EvaluatorConfigError(
                f"evaluator.trace_attribution must be one of {', '.join(TRACE_ATTRIBUTIONS)}, got {self.attribution!r}"
            )

    def annotate(self, recs: list[dict], checker: Any, cache: Any, stats: Counter, memo: dict) -> list[dict]:
        return _trace_entailment(recs, checker, cache, stats, self.prune, memo, self.attribution)


@dataclass
class AnnotatorTrace:
    """TRACe from the RAGBench annotator prompt (``trace_mode: annotator``)."""

    annotator: Any  # a ragsweep.judge.llm_judge.TraceAnnotator

    @property
    def judge(self) -> Any:
        return getattr(self.annotator, "judge", None)

    def annotate(self, recs: list[dict], checker: Any, cache: Any, stats: Counter, memo: dict) -> list[dict]:
        return _trace_annotator(recs, self.annotator, cache, stats)


__all__ = ["AnnotatorTrace", "EntailmentTrace", "TRACE_ATTRIBUTIONS", "TRACE_MODES", "claim_sentences"]
