"""RAGAS (Es et al., 2023, sec. 3): faithfulness, answer relevance, context relevance, in [0, 1].

With a judge (``evaluator.judge`` set), as in the paper:

- ``ragas/faithfulness`` = |supported statements| / |statements|: the statements are the response
  claims of the configured extractor and "supported" = entailed by the WHOLE retrieved context,
  all chunks joined with newlines, as RAGAS checks them (``"\n".join(retrieved_contexts)`` in
  ``ragas/metrics/_faithfulness.py``), by the configured checker. This needs the example's
  ``claims`` and ``chunks`` and a checker (:meth:`Ragas.score`); an example carrying only
  ``supported`` flags falls back to "entailed by at least one chunk" (RAGChecker's
  ``retrieved2response``), which misses a statement that needs two chunks together.
- ``ragas/answer_relevance`` = mean cosine similarity between the question and ``n_questions``
  questions the judge writes for the answer (the paper's prompt), embedded with
  ``embedding_model`` (default: the bundled all-MiniLM-L6-v2 instead of the paper's
  text-embedding-ada-002).
- ``ragas/context_relevance`` = |context sentences the judge extracts as needed for the question|
  / |context sentences|. The paper's prompt is used, but the context is shown split into keyed
  sentences (``0a``, ``0b`` ... as TRACe) and the judge is asked for the keys. A judge that
  answers with sentence TEXT instead is matched back (:func:`match_sentences`: a returned item
  names the sentence whose normalised text - lower case, punctuation and extra spaces dropped -
  equals it, or every sentence whose normalised text it contains); "Insufficient Information"
  is an empty extraction (0). A non-empty reply of which no item matches a key or a sentence is
  a judge failure: NaN, counted in ``ragas_failures`` - never a silent 0.

Without a judge (the offline evaluator) two of them are honest substitutes, not RAGAS:

- faithfulness: unchanged (statements = offline claims, support = the offline checker);
- answer relevance -> cosine(question, answer) with the embedding model (no generated questions);
- context relevance -> share of context sentences whose cosine with the question is at least
  ``context_threshold`` (default 0.5, all-MiniLM-L6-v2).

Undefined values are NaN: faithfulness with no statement or a failed check, context relevance
without context, any LLM variant whose judge answer failed. An empty response has answer
relevance 0 (it does not address the question).

Embeddings are cached per (model, text) under stage ``"embeddings"`` with the key that the dense
retriever and the offline checker use; judge outputs (generated questions, extracted sentence
keys) under stage ``"ragas"`` after they parsed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from ragsweep.judge.ragas_parse import (  # re-exported: the import paths of before the split
    SENTENCE_KEYS_SCHEMA,
    match_sentences,
    parse_questions,
    parse_sentence_keys,
    questions_schema,
)
from ragsweep.records import response_of

_NAN = float("nan")
PROMPT_VERSION = 1
METRICS = ("faithfulness", "answer_relevance", "context_relevance")

# Paper, sec. 3 "Answer relevance" (verbatim), then how to answer.
ANSWER_RELEVANCE_PROMPT = """\
Generate a question for the given answer.
answer: {answer}

Write {n} different questions that this answer would answer. Answer with a JSON object \
{{"questions": [question, ...]}} holding exactly {n} questions, and nothing else."""

# Paper, sec. 3 "Context relevance" (verbatim), with the context split into keyed sentences.
CONTEXT_RELEVANCE_PROMPT = """\
Please extract relevant sentences from the provided context that can potentially help answer the \
following question. If no relevant sentences are found, or if you believe the question cannot be \
answered from the given context, return the phrase "Insufficient Information". While extracting \
candidate sentences you're not allowed to make any changes to sentences from given context.

question: {question}

context (each sentence starts with its key):
{context}

Answer with a JSON object {{"sentence_keys": [key, ...]}} listing the keys of the extracted \
sentences (an empty list for "Insufficient Information"), and nothing else."""


# --------------------------------------------------------------------------------------------
# embeddings
# --------------------------------------------------------------------------------------------
def _load_sentence_transformer(model: str, device: str) -> Any:
    from ragsweep.corpus.embeddings import load_sentence_transformer

    return load_sentence_transformer(model, device)


class Embedder:
    """Unit-norm sentence embeddings (sentence-transformers), cached per (model, text).

    ``model``: ``"minilm"`` (the bundled all-MiniLM-L6-v2, loaded offline) or any
    sentence-transformers name or path. The model loads on the first text not in the cache.
    """

    def __init__(self, model: str = "minilm", device: str = "cpu", batch_size: int = 64, cache: Any = None):
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.cache = cache
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"Embedder(model={self.model!r})"

    @property
    def model_key(self) -> str:
        from ragsweep.rag.retriever.dense import model_id

        # the key the dense retriever (max_seq_length null) and the offline checker use
        return f"{model_id(self.model)}|max_seq_length=None"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row L2-normalised."""
        texts = [str(t) for t in texts]
        from ragsweep.judge.embeddings import embed_cached

        unique = list(dict.fromkeys(texts))

        def encode(todo: list[str]) -> Any:
            model = _load_sentence_transformer(self.model, self.device)
            return model.encode(todo, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False)

        vecs, n_cached = embed_cached(self.cache, self.model_key, unique, encode)
        self.stats["cached"] += n_cached
        self.stats["encoded"] += len(unique) - n_cached
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = np.stack([vecs[t] for t in texts]).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------
def faithfulness(supported: Sequence[bool | None] | None) -> float:
    """|supported statements| / |statements|; NaN with no statement or an unknown (None) one."""
    if supported is None:
        return _NAN
    flags = list(supported)
    if not flags or any(f is None for f in flags):
        return _NAN
    return sum(1 for f in flags if f) / len(flags)


def _cosines(embedder: Any, anchor: str, others: Sequence[str]) -> np.ndarray:
    vecs = embedder.encode([anchor, *others])
    return vecs[1:] @ vecs[0]


def _cosines_of(rows: dict[str, np.ndarray], anchor: str, others: Sequence[str]) -> np.ndarray:
    """:func:`_cosines` from vectors already encoded (``rows``: text -> unit vector)."""
    return np.stack([rows[t] for t in others]) @ rows[anchor]


class Ragas:
    """The three RAGAS metrics of many examples; LLM variants when ``judge`` is given."""

    def __init__(
        self,
        judge: Any = None,
        embedder: Any = None,
        n_questions: int = 3,
        context_threshold: float = 0.5,
        max_tokens: int = 256,
        checker: Any = None,
    ):
        self.judge = judge
        self.checker = checker  # checks statements against the whole context (faithfulness)
        self.embedder = embedder if embedder is not None else Embedder()
        self.n_questions = int(n_questions)
        self.context_threshold = float(context_threshold)
        self.max_tokens = int(max_tokens)

    def _judge_cached(self, kind: str, items: list[tuple[Any, Any]], cache: Any, stats: Counter) -> list[Any]:
        """``items``: (key parts, JudgeItem); parsed results through the cache (stage "ragas")."""
        from ragsweep.store.cache import Cache, fetch

        jid = {"ragas": kind, "prompt_version": PROMPT_VERSION, "judge": self.judge.identity}
        keys = {i: Cache.key("ragas", jid, parts) for i, (parts, _) in enumerate(items)}
        asked = 0

        def compute(todo: list[int]) -> dict[int, Any]:
            nonlocal asked
            asked += len(todo)
            return dict(zip(todo, self.judge.ask([items[i][1] for i in todo], desc=f"RAGAS {kind}")))

        got = fetch(cache, "ragas", keys, compute, keep=lambda a: a is not None) if items else {}
        stats["cache_hits"] += len(set(keys.values())) - asked
        return [got.get(i) for i in range(len(items))]

    def whole_context_support(self, examples: Sequence[Mapping[str, Any]], checker: Any, cache: Any,
                              stats: Counter) -> list[list[bool | None] | None]:
        """Per example, per response statement: entailed by all its chunks joined with newlines
        (RAGAS's context string); None where the claims are unknown or a check failed."""
        from ragsweep.judge.checking import check_cached
        from ragsweep.judge.labels import ENTAILMENT

        uses_q = bool(getattr(checker, "uses_question", False))  # RefChecker's prompt shows the question
        pairs: list[tuple[str, ...]] = []
        spans: list[Any] = []
        for ex in examples:
            claims = ex.get("claims")
            chunks = [str(c) for c in ex.get("chunks") or []]
            if claims is None:
                spans.append(None)
            elif len(chunks) == 1 and ex.get("supported") is not None and len(ex["supported"]) == len(claims):
                spans.append(list(ex["supported"]))  # one chunk: the joined context is that chunk
            else:
                spans.append((len(pairs), len(pairs) + len(claims)))
                context = "\n".join(chunks)
                q = str(ex.get("question") or "")
                pairs.extend((str(c), context, q) if uses_q else (str(c), context) for c in claims)
        labels = check_cached(checker, pairs, cache, stats) if pairs else []
        return [
            span if span is None or isinstance(span, list)
            else [None if lab is None else lab == ENTAILMENT for lab in labels[span[0]:span[1]]]
            for span in spans
        ]

    def score(self, examples: Sequence[Mapping[str, Any]], cache: Any = None,
              stats: Counter | None = None, checker: Any = None) -> list[dict[str, Any]]:
        """Per example ``{"faithfulness", "answer_relevance", "context_relevance"}`` (plus
        ``generated_questions`` / ``context_sentence_keys`` with a judge).

        Each example: ``question``, ``response``, ``sentences`` (the keyed context sentences,
        ``[(key, text), ...]``), and for faithfulness either ``claims`` (the response statements'
        texts, None when unknown) with ``chunks`` (the retrieved texts), checked against the
        chunks joined by ``checker`` (else this object's ``checker``), or only ``supported``
        (per statement True/False/None: the per-chunk fallback).
        """
        from ragsweep.judge.llm_judge import JudgeItem

        stats = stats if stats is not None else Counter()
        if self.embedder is not None and getattr(self.embedder, "cache", None) is None and cache is not None:
            try:
                self.embedder.cache = cache
            except AttributeError:  # pragma: no cover - a stand-in without the attribute
                pass
        checker = checker if checker is not None else self.checker
        whole = (self.whole_context_support(examples, checker, cache, stats)
                 if checker is not None and any("claims" in ex for ex in examples) else [None] * len(examples))
        out: list[dict[str, Any]] = []
        for ex, flags in zip(examples, whole):
            if "claims" in ex and checker is not None:
                out.append({"faithfulness": faithfulness(flags)})
            else:
                out.append({"faithfulness": faithfulness(ex.get("supported"))})
        if self.judge is None:
            # every question, answer and sentence of every example in one encode call: batches of
            # many texts, not two calls per example (each call has a fixed cost)
            texts: list[str] = []
            for ex in examples:
                a = response_of(ex)
                texts += [str(ex.get("question") or ""), *([a] if a.strip() else []), *(t for _, t in ex.get("sentences") or [])]
            unique = list(dict.fromkeys(texts))
            rows = dict(zip(unique, self.embedder.encode(unique))) if unique else {}
            for ex, res in zip(examples, out):
                q, a = str(ex.get("question") or ""), response_of(ex)
                res["answer_relevance"] = float(_cosines_of(rows, q, [a])[0]) if a.strip() else 0.0
                sents = [t for _, t in ex.get("sentences") or []]
                if sents:
                    cos = _cosines_of(rows, q, sents)
                    res["context_relevance"] = float(np.mean(cos >= self.context_threshold))
                else:
                    res["context_relevance"] = _NAN
            return out

        n = self.n_questions
        # answer relevance: the judge writes n questions for each (non-empty) answer
        q_items, q_where = [], []
        for i, ex in enumerate(examples):
            a = response_of(ex)
            if not a.strip():
                out[i]["answer_relevance"] = 0.0
                out[i]["generated_questions"] = []
                continue
            q_items.append(((n, a), JudgeItem(
                messages=[("user", ANSWER_RELEVANCE_PROMPT.format(answer=a, n=n))],
                schema=questions_schema(n),
                parse=lambda t, n=n: parse_questions(t, n),
                max_tokens=self.max_tokens,
                owner=str(ex.get("question") or ""),
            )))
            q_where.append(i)
        # context relevance: the judge picks the needed sentences (by key)
        c_items, c_where = [], []
        for i, ex in enumerate(examples):
            sents = list(ex.get("sentences") or [])
            if not sents:
                out[i]["context_relevance"] = _NAN
                out[i]["context_sentence_keys"] = []
                continue
            q = str(ex.get("question") or "")
            context = "\n".join(f"{k}. {t}" for k, t in sents)
            c_items.append(((q, [list(s) for s in sents]), JudgeItem(
                messages=[("user", CONTEXT_RELEVANCE_PROMPT.format(question=q, context=context))],
                schema=SENTENCE_KEYS_SCHEMA,
                parse=parse_sentence_keys,
                max_tokens=self.max_tokens,
                owner=q,
            )))
            c_where.append(i)
        for i, qs in zip(q_where, self._judge_cached("questions", q_items, cache, stats)):
            out[i]["generated_questions"] = qs
            if qs is None:
                out[i]["answer_relevance"] = _NAN
            else:
                cos = _cosines(self.embedder, str(examples[i].get("question") or ""), qs)
                out[i]["answer_relevance"] = float(np.mean(cos))
        for i, keys in zip(c_where, self._judge_cached("context", c_items, cache, stats)):
            if keys is None:
                out[i]["context_sentence_keys"] = None
                out[i]["context_relevance"] = _NAN
                continue
            sents = list(examples[i]["sentences"])
            picked, unmatched = match_sentences(keys, sents)
            out[i]["context_sentence_keys"] = picked
            if unmatched:
                out[i]["context_unmatched"] = unmatched
            if unmatched and not picked:
                # a reply that names no sentence is a failed judgement, not "nothing relevant"
                stats["ragas_failures"] += 1
                out[i]["context_relevance"] = _NAN
            else:
                out[i]["context_relevance"] = len(picked) / len(sents)
        return out


__all__ = [
    "ANSWER_RELEVANCE_PROMPT",
    "CONTEXT_RELEVANCE_PROMPT",
    "Embedder",
    "Ragas",
    "faithfulness",
    "match_sentences",
]
