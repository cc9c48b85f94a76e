"""Recursive splitting of a text into spans of at most ``size`` tokens, counted on one tokenization.

Every strategy of :mod:`ragsweep.corpus.chunking` cuts a document at character positions and
measures pieces in tokens of the chunker's tokenizer (MiniLM's by default, as ``chunker=tokens``
does). The document is tokenized once (a batch at a time, by the Rust tokenizer); the tokens of
``text[a:b]`` are then counted from the sorted token offsets (:class:`TokenCount`), never by
tokenizing a piece again. That is what the chunking libraries measured against this module do,
and why they take 1.8-7x the token chunker's time (docs/chunking.md). Cuts fall on whitespace
(or on token boundaries, at the last level), where a WordPiece tokenizer never has a token across
the cut, so the counts are exact for MiniLM; a tokenizer whose tokens carry the space before a word
(SentencePiece) may count one token less at a cut.

:func:`split` is LangChain's recursive character splitter on those counts: cut the span at the
strongest separator (blank lines, then line breaks, then sentences, then whitespace, then single
tokens), merge consecutive pieces greedily up to ``size`` tokens, and split again, one level down,
any piece that alone exceeds ``size``. ``overlap`` tokens of whole pieces are repeated at the
start of the next chunk of the same merge. Spans come back trimmed of surrounding whitespace.
"""

from __future__ import annotations

import bisect
import re
from typing import Callable, Sequence

from ragsweep.corpus.text import sentence_spans

Span = tuple[int, int]

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_LINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
#: the separator levels, strongest first (the last level, single tokens, is not a pattern)
LEVELS = ("paragraph", "line", "sentence", "word", "token")


class TokenCount:
    """Tokens of ``text[a:b]`` from the token offsets of ``text`` (tokens with an empty character
    range dropped): those that start at or after ``a`` and end at or before ``b``."""

    __slots__ = ("starts", "ends")

    def __init__(self, offsets: Sequence[tuple[int, int]]):
        kept = [(a, b) for a, b in offsets if b > a]
        self.starts = [a for a, _ in kept]
        self.ends = [b for _, b in kept]

    def __call__(self, a: int, b: int) -> int:
        return max(0, bisect.bisect_right(self.ends, b) - bisect.bisect_left(self.starts, a))

    def __len__(self) -> int:
        return len(self.starts)


def trim(text: str, a: int, b: int) -> Span | None:
    """``[a, b)`` without surrounding whitespace; None when nothing else is left."""
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return (a, b) if b > a else None


def _cuts(pattern: re.Pattern[str], text: str, a: int, b: int) -> list[Span]:
    """``[a, b)`` cut after each match of ``pattern`` (the separator stays with the piece before)."""
    out, pos = [], a
    for m in pattern.finditer(text, a, b):
        if m.end() > pos and m.end() < b:
            out.append((pos, m.end()))
            pos = m.end()
    out.append((pos, b))
    return out


def pieces(text: str, a: int, b: int, level: int) -> list[Span]:
    """``[a, b)`` cut at separator ``LEVELS[level]`` (paragraph, line, sentence or word)."""
    name = LEVELS[level]
    if name == "paragraph":
        return _cuts(_PARAGRAPH, text, a, b)
    if name == "line":
        return _cuts(_LINE, text, a, b)
    if name == "word":
        return _cuts(_SPACE, text, a, b)
    starts = [a + s for s, _ in sentence_spans(text[a:b])]  # sentences: the splitter TRACe's keys use
    bounds = sorted({a, *starts[1:], b})
    return list(zip(bounds, bounds[1:]))


def merge(text: str, parts: Sequence[tuple[int, int, int]], size: int, overlap: int,
          too_big: Callable[[int, int], list[Span]], overlap_parts: bool = False) -> list[Span]:
    """Consecutive ``parts`` (``(a, b, tokens)``) merged greedily into spans of at most ``size``
    tokens, each next span starting with the trailing parts of the previous one that hold at most
    ``overlap`` tokens (``overlap_parts``: at most ``overlap`` parts, e.g. sentences) and leave room
    for the next part; a part over ``size`` goes to ``too_big(a, b)`` (and ends the overlap)."""
    out: list[Span] = []
    cur: list[tuple[int, int, int]] = []
    total = 0

    def emit() -> None:
        span = trim(text, cur[0][0], cur[-1][1])
        if span is not None and (not out or span != out[-1]):
            out.append(span)

    for a, b, n in parts:
        if n > size:
            if cur:
                emit()
            cur, total = [], 0
            out.extend(too_big(a, b))
            continue
        if cur and total + n > size:
            emit()
            while cur and ((len(cur) if overlap_parts else total) > overlap or total + n > size):
                total -= cur.pop(0)[2]
        cur.append((a, b, n))
        total += n
    if cur:
        emit()
    return out


def split(text: str, a: int, b: int, count: TokenCount, size: int, overlap: int = 0, level: int = 0) -> list[Span]:
    """Spans of ``text[a:b]``, each of at most ``size`` tokens (see the module docstring)."""
    if count(a, b) <= size:
        span = trim(text, a, b)
        return [span] if span is not None else []
    if level >= len(LEVELS) - 1:  # single tokens: windows of `size` tokens, `overlap` shared
        lo, hi = bisect.bisect_left(count.starts, a), bisect.bisect_right(count.ends, b)
        out, i = [], lo
        while i < hi:
            j = min(i + size, hi)
            out.append((count.starts[i], count.ends[j - 1]))
            if j >= hi:
                break
            i = j - overlap if overlap < size else j
        return out
    parts = [(p, q, count(p, q)) for p, q in pieces(text, a, b, level)]
    return merge(text, parts, size, overlap, lambda p, q: split(text, p, q, count, size, overlap, level + 1))
