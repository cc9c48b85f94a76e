"""Claim extraction: ``extract(text, question=None) -> list[claim]``.

A claim is a string (a statement) or a list of strings (a RefChecker-style ``[subject, predicate,
object]`` triplet, as in RAGChecker's output files). Two extractors share one interface:

- :class:`OfflineExtractor` - deterministic, no model: the text is split into sentences
  (:func:`ragsweep.corpus.text.sentence_spans`; those without a content word are dropped), then each
  sentence into clauses. ``clause_rule="facts"`` (default): cut at every comma, semicolon and
  colon and before "and", "but", "which", "while", "whereas", "although", "because", then merge
  the pieces left to right until each has ``min_content_words`` (4) content words - closer to
  RAGChecker's atomic claims, and measured better against its human labels (overall Pearson 50.7
  vs 44.3 with sentence-like claims; ``experiments/meta_eval/README.md``).
  ``clause_rule="conjunctions"``: cut only at ``;`` and at a comma or conjunction that joins two
  clauses (``", and"``, ``", but"``, ``" whereas "``, ...), keeping a split only when both sides
  have at least ``min_words`` words. Every claim is a substring of the text: ``text[s:e]`` for a
  span of :meth:`OfflineExtractor.spans` - except a short answer ("No.", "1997.", at most
  ``short_answer_words`` words or no claim of its own), which with ``short_answers`` (default)
  and a question is ONE claim read with the question (:func:`with_question`: "Is Paris in
  Spain? No."), instead of no claim or a bare "1997" no checker can verify.
- :class:`~ragsweep.judge.llm_extractor.LLMExtractor` - through the judge (:class:`ragsweep.judge.llm_judge.Judge`) with
  JSON-schema output ``{"claims": [...]}``; ``claim_format`` ``triplet`` (RefChecker) or
  ``sentence`` (RAGAS statements).

:func:`extract_cached` runs an extractor over many texts with the shared cache: stage
``"claims"``, key = (extractor id, text[, question when the extractor's prompt shows it]), so the
claims of a ground-truth answer are extracted once and shared by every system of a sweep. Only
successful extractions are stored; a failed one (``None``) is retried by the next run.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Sequence, Union

from ragsweep.judge.components import component_id
from ragsweep.records import Claim as ClaimRecord
from ragsweep.corpus.text import content_words, sentence_spans

Claim = Union[str, list]  # a claim as JSON (ragsweep.records.ClaimJSON); its typed form: ragsweep.records.Claim

#: Bumped whenever the offline splitting rules change (part of the cache key).
OFFLINE_VERSION = 3
#: ``facts`` (default): cut at every comma / semicolon / colon and before "and", "but", "which",
#: ... and merge the pieces until each has ``min_content_words`` content words (closer to
#: RAGChecker's atomic claims); ``conjunctions``: cut only where a conjunction joins two clauses.
CLAUSE_RULES = ("facts", "conjunctions")
#: Bumped whenever an LLM extraction prompt changes (part of the cache key).
LLM_PROMPT_VERSION = 2
CLAIM_FORMATS = ("triplet", "sentence")

# Where a sentence may be cut into two clauses: "; " anywhere, a comma followed by a
# coordinating/contrasting conjunction, or a contrasting conjunction on its own. The
# conjunction is dropped from both clauses ("It rained, but the match went ahead" ->
# "It rained" + "the match went ahead").
_CLAUSE = re.compile(
    r";\s+"
    r"|,\s+(?:and|but|yet|so|while|whereas|although|though|because|since)\s+"
    r"|\s+(?:but|whereas|although|though)\s+",
    re.IGNORECASE,
)
# the "facts" rule's cut points (then merged up to min_content_words content words per claim)
_FACT_CUT = re.compile(r"(?<=[,;:])\s+|\s+(?=(?:and|but|which|while|whereas|although|because)\s)")
_WORDS = re.compile(r"\w+", re.UNICODE)
_TRAIL = ",;:-\u2013\u2014 \t\r\n"


def claim_text(claim: Any) -> str:
    """The text a claim is checked as: a string as is, a triplet's parts joined by spaces."""
    if isinstance(claim, (str, list, tuple)):
        return ClaimRecord.from_json(claim).text  # the one definition of a claim (ragsweep.records)
    raise TypeError(f"a claim is a string or a list of strings, got {type(claim).__name__}")


def has_content(text: str) -> bool:
    """A content word with a letter in it (citation markers "[4]" and list markers "1." have none):
    whether ``text`` can state anything."""
    return any(any(ch.isalpha() for ch in w) for w in content_words(text))


def _n_words(text: str) -> int:
    return len(_WORDS.findall(text))


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and (text[e - 1] in _TRAIL or text[e - 1].isspace()):  # "0\x1f:" -> "0"
        e -= 1
    return s, e


def _config_from(schema: type, kwargs: dict, prefix: str) -> Any:
    from ragsweep.errors import build_config

    return build_config(schema, kwargs, prefix)


def _positive_int(value: Any, name: str, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


class OfflineExtractor:
    """Deterministic sentence + clause splitter; claims are substrings of the text."""

    @dataclass
    class Config:
        split_clauses: bool = True
        clause_rule: str = "facts"  # see CLAUSE_RULES
        min_words: int = 3  # conjunctions: a split is kept only when both clauses have this many words
        min_content_words: int = 4  # facts: each claim has this many content words (a short tail joins the last)
        short_answers: bool = True  # a short answer ("No.", "1997.") is one claim read with the question
        short_answer_words: int = 3  # at most this many words (or no claim of its own) = a short answer

        def __post_init__(self) -> None:
            if not isinstance(self.split_clauses, bool):
                raise ValueError(
                    f"evaluator.extractor.split_clauses must be true or false, got {self.split_clauses!r}"
                )
            if self.clause_rule not in CLAUSE_RULES:
                raise ValueError(
                    f"evaluator.extractor.clause_rule must be one of {', '.join(CLAUSE_RULES)}, got {self.clause_rule!r}"
                )
            _positive_int(self.min_words, "evaluator.extractor.min_words")
            _positive_int(self.min_content_words, "evaluator.extractor.min_content_words")
            if not isinstance(self.short_answers, bool):
                raise ValueError(
                    f"evaluator.extractor.short_answers must be true or false, got {self.short_answers!r}"
                )
            _positive_int(self.short_answer_words, "evaluator.extractor.short_answer_words")

    name = "offline"

    @property
    def uses_question(self) -> bool:
        """The question is read (and part of the cache key) for short answers."""
        return self.config.short_answers

    def __init__(self, **kwargs: Any) -> None:
        self.config = _config_from(self.Config, kwargs, "evaluator.extractor")
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"OfflineExtractor({self.config})"

    @property
    def cache_id(self) -> dict[str, Any]:
        return {"extractor": "offline", "version": OFFLINE_VERSION, **asdict(self.config)}

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans ``[start, end)`` of the claims, ordered and disjoint."""
        out: list[tuple[int, int]] = []
        facts = self.config.split_clauses and self.config.clause_rule == "facts"
        for s, e in sentence_spans(text):
            if facts and not has_content(text[s:e]):
                continue  # a bare list marker ("1.") or a table rule states nothing
            pieces = [(s, e)]
            if facts:
                pieces = self._facts(text, s, e)
            elif self.config.split_clauses:
                pieces = self._clauses(text, s, e)
            for ps, pe in pieces:
                ps, pe = _trim(text, ps, pe)
                if pe > ps and _WORDS.search(text, ps, pe):
                    out.append((ps, pe))
        return out

    def _facts(self, text: str, s: int, e: int) -> list[tuple[int, int]]:
        """The ``facts`` rule: cut at every cut point, merge left to right until a piece has
        ``min_content_words`` content words; a shorter tail joins the last piece."""
        k = self.config.min_content_words
        bounds, start = [], s
        for m in _FACT_CUT.finditer(text, s, e):
            bounds.append((start, m.start()))
            start = m.end()
        bounds.append((start, e))
        out: list[tuple[int, int]] = []
        cur: tuple[int, int] | None = None
        for ps, pe in bounds:
            cur = (cur[0], pe) if cur else (ps, pe)
            if len(content_words(text[cur[0] : cur[1]])) >= k:
                out.append(cur)
                cur = None
        if cur:  # a tail with fewer than k content words
            if out:
                out[-1] = (out[-1][0], cur[1])
            else:
                out.append(cur)
        return out

    def _clauses(self, text: str, s: int, e: int) -> list[tuple[int, int]]:
        pieces: list[tuple[int, int]] = []
        start = s
        sentence = text[s:e]
        for m in _CLAUSE.finditer(sentence):
            cut, nxt = s + m.start(), s + m.end()
            left = text[start:cut]
            right = text[nxt:e]
            if _n_words(left) >= self.config.min_words and _n_words(right) >= self.config.min_words:
                pieces.append((start, cut))
                start = nxt
        pieces.append((start, e))
        return pieces

    def is_short_answer(self, text: str, spans: Sequence[tuple[int, int]] | None = None) -> bool:
        """A text with a word that states nothing on its own: no claim of its own ("No.",
        "1997.": no content word with a letter) or at most ``short_answer_words`` words."""
        n = _n_words(text)
        if n == 0:
            return False
        spans = self.spans(text) if spans is None else spans
        return not spans or n <= self.config.short_answer_words

    def extract(self, text: str, question: str | None = None) -> list[str]:
        """The claims of ``text`` (substrings of it). With ``short_answers`` and a question, a
        short answer is one claim, the question and the answer read together
        (``"Was it built in 1889? No."``, ``"capital of France: Paris."``): the answer alone
        states nothing a checker can verify, and dropping it would leave the response claimless."""
        if not isinstance(text, str):
            raise TypeError(f"extract() needs a string, got {type(text).__name__}")
        spans = self.spans(text)
        q = question.strip() if isinstance(question, str) else ""
        if self.config.short_answers and q and self.is_short_answer(text, spans):
            return [with_question(q, text)]
        return [text[s:e] for s, e in spans]

    def extract_many(
        self, texts: Sequence[str], questions: Sequence[str | None] | None = None
    ) -> list[list[str] | None]:
        self.stats["extractions"] += len(texts)
        questions = list(questions) if questions is not None else [None] * len(texts)
        return [self.extract(t, q) for t, q in zip(texts, questions)]


def with_question(question: str, answer: str) -> str:
    """A short answer read with its question, as one claim: ``"<question> <answer>"`` after a
    question mark (or other final punctuation), else ``"<question>: <answer>"``."""
    q, a = question.strip(), " ".join(answer.split())
    return f"{q} {a}" if q[-1:] in "?.!:" else f"{q}: {a}"



# --------------------------------------------------------------------------------------------
# cached extraction
# --------------------------------------------------------------------------------------------
extractor_id = component_id


def extract_cached(
    extractor: Any,
    texts: Sequence[str],
    questions: Sequence[str | None] | None = None,
    cache: Any = None,
    stats: Counter | None = None,
) -> list[list[Claim] | None]:
    """Claims of every text, through the cache (stage ``"claims"``); identical (text, question)
    inputs are extracted once. ``stats`` gets ``cache_hits``, ``extractions`` and
    ``extraction_failures``."""
    from ragsweep.store.cache import Cache, fetch

    stats = stats if stats is not None else Counter()
    questions = list(questions) if questions is not None else [None] * len(texts)
    use_q = bool(getattr(extractor, "uses_question", False))
    inputs = [(t, q if use_q else None) for t, q in zip(texts, questions)]
    unique = list(dict.fromkeys(inputs))
    if cache is not None:
        eid = extractor_id(extractor)
        keys = {u: Cache.key("claims", eid, u[0], u[1]) for u in unique}
    else:
        keys = {u: f"{u[0]}\x00{u[1]}" for u in unique}  # distinct inputs, nothing stored
    done: list[tuple] = []

    def compute(todo: list[tuple]) -> dict[tuple, Any]:
        done.extend(todo)
        claims = extractor.extract_many([t for t, _ in todo], [q for _, q in todo])
        if len(claims) != len(todo):
            raise RuntimeError(f"{extractor!r} returned {len(claims)} results for {len(todo)} texts")
        return dict(zip(todo, claims))

    result = fetch(cache, "claims", keys, compute, keep=lambda c: c is not None) if unique else {}
    stats["cache_hits"] += len(unique) - len(done)
    if done:
        stats["extractions"] += len(done)
        stats["extraction_failures"] += sum(1 for u in done if result[u] is None)
    return [copy.deepcopy(result[u]) for u in inputs]


__all__ = [
    "Claim",
    "OfflineExtractor",
    "claim_text",
    "extract_cached",
    "extractor_id",
    "with_question",
]
