"""Finding a passage inside a longer document as a character span.

Relevance in ragsweep is a set of character spans, so that it survives any chunking. Benchmarks
often give the gold context as a passage's text instead (RAGChecker's ``gt_context``), cut from
a document whose text may differ in whitespace or tokenization ("Examiner 's office" against
"Examiner's office"). :func:`locate` tries, in order:

1. ``exact``: the passage (stripped) as a substring;
2. ``whitespace``: the same sequence of whitespace-separated tokens, any whitespace between;
3. ``words``: the same sequence of lower-cased word tokens (``\\w+``), any punctuation or
   spacing between (handles tokenized vs plain text);
4. ``fuzzy``: the window of the document's word tokens that shares the most word 4-grams with
   the passage, accepted when at least ``threshold`` of the passage's 4-grams are found in it.

It returns ``(start, end, method)`` or None when the passage cannot be located.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

_WORD = re.compile(r"\w+", re.UNICODE)
_NONSPACE = re.compile(r"\S+")
SHINGLE = 4
METHODS = ("exact", "whitespace", "words", "fuzzy")


@dataclass
class _Tokens:
    """Tokens of a text with their character offsets, and the tokens joined by single spaces
    (with each token's offset in that joined string), for substring search."""

    starts: list[int]
    ends: list[int]
    joined: str
    joined_starts: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, text: str, pattern: re.Pattern, lower: bool) -> "_Tokens":
        starts, ends, toks = [], [], []
        for m in pattern.finditer(text):
            starts.append(m.start())
            ends.append(m.end())
            toks.append(m.group().lower() if lower else m.group())
        js, pos = [], 0
        for t in toks:
            js.append(pos)
            pos += len(t) + 1
        return cls(starts, ends, " ".join(toks), js)

    def words(self) -> list[str]:
        return self.joined.split(" ") if self.joined else []


class DocumentIndex:
    """Token views of one document, computed once and reused for every passage."""

    def __init__(self, text: str):
        self.text = text
        self._ws: _Tokens | None = None
        self._w: _Tokens | None = None

    @property
    def ws(self) -> _Tokens:
        if self._ws is None:
            self._ws = _Tokens.of(self.text, _NONSPACE, lower=False)
        return self._ws

    @property
    def w(self) -> _Tokens:
        if self._w is None:
            self._w = _Tokens.of(self.text, _WORD, lower=True)
        return self._w


def _find_tokens(doc: _Tokens, needle: _Tokens) -> tuple[int, int] | None:
    """Character span of ``needle``'s token sequence inside ``doc`` (token-aligned)."""
    if not needle.joined:
        return None
    pos = 0
    while True:
        i = doc.joined.find(needle.joined, pos)
        if i < 0:
            return None
        first = bisect_left(doc.joined_starts, i)
        if first < len(doc.joined_starts) and doc.joined_starts[first] == i:  # starts on a token
            last = first + len(needle.starts) - 1
            return doc.starts[first], doc.ends[last]
        pos = i + 1


def _fuzzy(doc: _Tokens, needle: _Tokens, threshold: float) -> tuple[int, int, float] | None:
    pw, dw = needle.words(), doc.words()
    n = SHINGLE if len(pw) >= SHINGLE else len(pw)
    if n == 0 or len(dw) < n:
        return None
    want = {tuple(pw[i : i + n]) for i in range(len(pw) - n + 1)}
    hits = [j for j in range(len(dw) - n + 1) if tuple(dw[j : j + n]) in want]
    if not hits:
        return None
    width = len(pw)
    best, best_lo, best_hi = 0, 0, 0
    for a in range(len(hits)):  # the window of passage length with most hits (two pointers)
        b = bisect_right(hits, hits[a] + width - n) - 1
        if b - a + 1 > best:
            best, best_lo, best_hi = b - a + 1, a, b
    score = best / len(want)
    if score < threshold:
        return None
    first, last = hits[best_lo], hits[best_hi] + n - 1
    return doc.starts[first], doc.ends[last], score


def locate(passage: str, doc: DocumentIndex | str, threshold: float = 0.5) -> tuple[int, int, str] | None:
    """``(start, end, method)`` of ``passage`` inside ``doc``, or None; see the module docstring."""
    if isinstance(doc, str):
        doc = DocumentIndex(doc)
    p = passage.strip()
    if not p:
        return None
    i = doc.text.find(p)
    if i >= 0:
        return i, i + len(p), "exact"
    found = _find_tokens(doc.ws, _Tokens.of(p, _NONSPACE, lower=False))
    if found:
        return found[0], found[1], "whitespace"
    words = _Tokens.of(p, _WORD, lower=True)
    found = _find_tokens(doc.w, words)
    if found:
        return found[0], found[1], "words"
    fz = _fuzzy(doc.w, words, threshold)
    if fz:
        return fz[0], fz[1], "fuzzy"
    return None


def probes(passage: str, width: int = 6) -> list[str]:
    """A few lower-cased word phrases of the passage (start, middle, end) that a document holding
    it, even loosely, very likely contains: a cheap filter before :func:`locate` over a corpus."""
    w = [m.group().lower() for m in _WORD.finditer(passage)]
    if len(w) <= width:
        return [" ".join(w)] if w else []
    mid = (len(w) - width) // 2
    return list(dict.fromkeys(" ".join(w[i : i + width]) for i in (0, mid, len(w) - width)))
