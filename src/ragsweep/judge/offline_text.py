"""The offline checker's text analyses: citations, numbers, negations, stems, names, sentence
windows and the contradiction rule (pure functions of the texts; :mod:`ragsweep.judge.offline`
turns them into features)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from ragsweep.corpus.text import STOPWORDS, split_sentences, words


_CITATION = re.compile(r"\[\d+(?:\s*[,;\u2013-]\s*\d+)*\]")
_YEAR_RANGE = re.compile(r"\b((?:1[5-9]|20)\d\d)\s*[-\u2013/]\s*(\d\d)\b")
_NUM = re.compile(r"(?<![\w.])[-+]?\d+(?:[.,]\d+)*%?")
_NEG = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without"})
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "twenty": "20", "hundred": "100",
    "thousand": "1000", "million": "1000000", "billion": "1000000000", "first": "1", "second": "2", "third": "3",
}
_SUFFIXES = ("ational", "ization", "ations", "ation", "ments", "ment", "ness", "ingly", "ings", "ing", "edly",
             "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


def _validate(cond: bool, field: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"evaluator.checker.{field}: {msg}")


#: what ``check_pairs(kind=...)`` of the offline and trained checkers accepts: the reference is
#: retrieved ``context`` (RAG responses copy it: a high bar) or an ``answer`` (ground truth vs
#: response: written apart, paraphrased: a lower bar; see offline_model.json)
REFERENCE_KINDS = ("context", "answer")


def _validate_device(device: Any) -> None:
    """``evaluator.checker.device``: cpu, cuda, cuda:N or mps."""
    _validate(isinstance(device, str) and (device in ("cpu", "mps") or device.startswith("cuda")),
              "device", f"({device!r}) must be cpu, cuda, cuda:N or mps")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A light, deterministic suffix stripper (enough to match inflections: runs/running/run)."""
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)]
            if suf in ("ies", "ied"):
                w += "y"
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":  # running -> runn -> run
        w = w[:-1]
    if len(w) > 4 and w.endswith("e"):  # compute / computing / computed
        w = w[:-1]
    return w


_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]\s+|\(?\d{1,2}[.)]\s+)|(?<=[.!?:;\"\u201d])\s+\d{1,2}[.)]?\s*$")


def strip_citations(text: str) -> str:
    """Drop citation markers ("[4]") and list markers ("1. ", "- ", a trailing " 6.") before lexical analysis."""
    if "[" in text:
        text = _CITATION.sub(" ", text)
    return _LIST_MARKER.sub(" ", text)


def _norm_number(tok: str) -> str:
    t = tok.replace(",", "").lstrip("+").rstrip("%")
    if "." in t:
        t = t.rstrip("0").rstrip(".") or "0"
    return t


def numbers(text: str) -> set[str]:
    """Normalised numbers of ``text`` (``7,000`` -> ``7000``, ``3.50`` -> ``3.5``); years included."""
    text = strip_citations(text)
    out = {_norm_number(m.group(0)) for m in _NUM.finditer(text)}
    for m in _YEAR_RANGE.finditer(text):  # "2018-19" also states 2019
        out.add(m.group(1)[:2] + m.group(2))
    return {n for n in out if n not in ("", "-")}


def _number_words(ws: list[str]) -> set[str]:
    return {_NUMBER_WORDS[w] for w in ws if w in _NUMBER_WORDS}


@lru_cache(maxsize=100_000)
def _names(text: str) -> frozenset[str]:
    """Lower-cased capitalised words that are not sentence-initial and not stopwords (names, places)."""
    out = set()
    for sent in split_sentences(strip_citations(text)):
        toks = re.findall(r"[A-Za-z][\w'-]*", sent)
        for i, t in enumerate(toks):
            if i > 0 and t[0].isupper() and t.lower() not in STOPWORDS and len(t) > 1:
                out.add(t.lower())
    return frozenset(out)


@dataclass
class _Text:
    """Precomputed lexical view of one claim or reference sentence."""

    stems: tuple[str, ...]  # content-word stems in order
    stem_set: frozenset[str]
    bigrams: frozenset[tuple[str, str]]
    nums: frozenset[str]
    neg: bool
    all_words: frozenset[str]  # every lower-cased word (stopwords included), stems too


@lru_cache(maxsize=100_000)
def _analyse(text: str) -> _Text:
    text = strip_citations(text)
    ws = words(text)
    content = [w for w in ws if w not in STOPWORDS and not _NUM.fullmatch(w)]
    stems = tuple(stem(w) for w in content)
    nums = numbers(text) | _number_words(ws)
    neg = any(w in _NEG or w.endswith("n't") for w in ws)
    return _Text(
        stems=stems,
        stem_set=frozenset(stems),
        bigrams=frozenset(zip(stems, stems[1:])),
        nums=frozenset(nums),
        neg=neg,
        all_words=frozenset(ws) | frozenset(stem(w) for w in ws),
    )


@dataclass
class _Ref:
    sentences: list[str]
    infos: list[_Text]
    stem_set: frozenset[str]
    nums: frozenset[str]
    all_words: frozenset[str]


@lru_cache(maxsize=1024)
def _reference(text: str) -> _Ref:
    sents = split_sentences(text) or [text if text.strip() else ""]
    infos = [_analyse(s) for s in sents]
    return _Ref(
        sentences=sents,
        infos=infos,
        stem_set=frozenset().union(*[i.stem_set for i in infos]),
        nums=frozenset().union(*[i.nums for i in infos]),
        all_words=frozenset().union(*[i.all_words for i in infos]),
    )


_CLAUSE = re.compile(r"[,;:()\u2013\u2014]|\s(?:and|but|which|who|while|whereas|although|because|after|before|when)\s")


def _clauses(text: str) -> list[str]:
    return [p for p in _CLAUSE.split(text) if p and p.strip()]


@lru_cache(maxsize=100_000)
def _rare(text: str) -> frozenset[str]:
    """Stems of the words of ``text`` that look rare: >= 7 letters, capitalised mid-sentence, or digits."""
    out = set()
    for i, tok in enumerate(re.findall(r"\w+(?:[.,']\w+)*", strip_citations(text))):
        low = tok.lower()
        if low in STOPWORDS:
            continue
        if len(tok) >= 7 or (i > 0 and tok[:1].isupper()) or any(ch.isdigit() for ch in tok):
            out.add(stem(low))
    return frozenset(out)


@lru_cache(maxsize=1024)
def _windows(text: str, w: int) -> tuple[list[frozenset], list[frozenset], list[frozenset]]:
    """Stem sets and bigram sets of every window of ``w`` sentences, and stem sets of ``w + 1``."""
    ref = _reference(text)
    n = len(ref.infos)

    def union(attr: str, i: int, size: int) -> frozenset:
        return frozenset().union(*[getattr(ref.infos[j], attr) for j in range(i, min(n, i + size))])

    return ([union("stem_set", i, w) for i in range(n)], [union("bigrams", i, w) for i in range(n)],
            [union("stem_set", i, w + 1) for i in range(n)])


def _recall(claim: Sequence[str], have: frozenset[str] | set[str]) -> float:
    if not claim:
        return 1.0
    return sum(1 for s in claim if s in have) / len(claim)


def _weight(s: str) -> float:
    # a rarity proxy that needs no corpus statistics: long words are rarer than short ones
    return min(len(s), 10) / 10.0


def split_claims(text: str, unit: str = "sentence", min_words: int = 4) -> list[str]:
    """Deterministic offline claims of ``text``.

    ``unit="sentence"``: the sentences of :func:`ragsweep.corpus.text.split_sentences` that have a content
    word with a letter (list markers such as "1." come out as sentences of their own: dropped).
    ``unit="clause"``: the claims of the default evaluator's extractor
    (:class:`ragsweep.judge.claims.OfflineExtractor`, ``clause_rule="facts"`` with
    ``min_content_words=min_words``): each sentence cut at commas / semicolons / colons and before
    "and", "but", "which", ...; pieces merged until each has ``min_words`` content words.
    """
    if unit not in ("sentence", "clause"):
        raise ValueError(f"unit ({unit!r}) must be 'sentence' or 'clause'")
    from ragsweep.judge.claims import OfflineExtractor, has_content

    if unit == "clause":
        return OfflineExtractor(clause_rule="facts", min_content_words=min_words).extract(text)
    return [s for s in split_sentences(text) if has_content(s)]


def _significant(num: str) -> bool:
    """A number worth a contradiction: not a small count / list index (>= 2 digits, or a decimal)."""
    return len(num.replace(".", "").lstrip("-")) >= 2 or "." in num


def _contradicts(ci: _Text, best: _Text, num_missing: Sequence[str]) -> bool:
    """Concrete evidence only: the best-aligned sentence is a near-paraphrase of the claim (most
    words shared both ways) that states another number, or the same thing with the negation flipped."""
    if len(ci.stems) < 3 or not best.stems:
        return False
    rec = _recall(ci.stems, best.stem_set)  # claim words found in the sentence
    back = _recall(best.stems, ci.stem_set)  # sentence words found in the claim
    if rec >= 0.7 and back >= 0.5 and any(_significant(n) for n in num_missing) \
            and any(_significant(n) for n in best.nums - ci.nums):
        return True
    # a negation flip counts only between sentences with the same content words (negation elsewhere
    # in a long sentence, "avoid" vs "do not", "If not, ..." are far too common to count as evidence)
    return ci.neg != best.neg and rec == 1.0 and back == 1.0
