"""Deterministic text utilities: sentence splitting with character offsets, word tokens.

Used by the offline claim extractor, TRACe sentence keys and lexical checkers. Every function is
total: any string (empty, control characters, huge) gives valid offsets into that string.
"""

from __future__ import annotations

import re
import unicodedata

# Abbreviations after which a period does not end a sentence.
_ABBREV = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "eg", "ie", "no",
    "fig", "figs", "eq", "eqs", "al", "approx", "inc", "ltd", "co", "corp", "dept", "est", "gen", "gov",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mt", "vol",
    "u.s", "u.k", "u.n", "p", "pp", "ca", "cf", "op", "sec", "ch",
}

# A candidate boundary: terminal punctuation, optional closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"[.!?;]+[\"'\u201d\u2019)\]]*(?=\s)|\n\s*\n|\n(?=\s*(?:[-*\u2022]|\d+[.)])\s)")
_WORD = re.compile(r"\w+(?:[.,']\w+)*", re.UNICODE)

STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as into onto over under about
    is are was were be been being am do does did done have has had having it its it's this that these
    those there here which who whom whose what when where why how not no nor so than too very can
    could should would may might must will shall i you he she we they me him her us them my your his
    our their also such only just any all some each other more most many much one both either neither
    up down out off again further once s t don't isn't aren't wasn't weren't""".split()
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of the sentences of ``text``, whitespace trimmed.

    Splits after ``. ! ? ;`` followed by whitespace (not after common abbreviations, initials or
    a lone number like "No. 14"), and at blank lines and list items. Spans are ordered, disjoint
    and never empty; ``text[s:e]`` is a sentence.
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.end()
        token = m.group(0)
        if token[0] == ".":
            before = text[start : m.start()].rstrip()
            last = before.split()[-1].lower() if before.split() else ""
            last = last.lstrip("(\"'")
            if last in _ABBREV or (len(last) == 1 and last.isalpha()):
                continue
            if len(last) <= 3 and re.fullmatch(r"(?:[a-z]\.)+[a-z]?", last):  # U.S.
                continue
            # "No. 14", "3.5": only a boundary when the next word starts like a sentence
            nxt = text[m.end() :].lstrip()[:1]
            if nxt and nxt.islower():
                continue
        _add(text, start, end, spans)
        start = end
    _add(text, start, len(text), spans)
    return spans


def _add(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start and any(not _is_junk(c) for c in text[start:end]):
        spans.append((start, end))


def _is_junk(c: str) -> bool:
    return c.isspace() or unicodedata.category(c)[0] in ("C", "Z")


def split_sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


def words(text: str) -> list[str]:
    """Lower-cased word tokens (numbers keep their inner ``.`` and ``,``: ``6,650`` ``3.5``)."""
    return [w.lower() for w in _WORD.findall(text)]


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOPWORDS]
