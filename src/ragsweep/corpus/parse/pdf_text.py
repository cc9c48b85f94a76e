"""PDF text artefacts, normalised before any offset is taken (issue 51): ``normalise_pages`` turns
the page texts PDFium gives into the text ragsweep indexes, so page starts, heading spans and
evidence spans all point into the normalised text.

- **Line-break hyphens.** Where a line ends in a hyphen and the next starts with a letter or digit,
  PDFium writes U+FFFE in place of the hyphen and no line break (``FPDFText_GetUnicode`` reports that
  character as U+0002); Chromium's PDF viewer, PDFium's own client, drops U+FFFE from copied and
  searched text (``kPDFSoftHyphenMarker``). A soft hyphen (U+00AD) is the same mark written by the
  producer. PDFium cannot tell a typesetter's hyphenation (``man-`` / ``agement``) from a hyphen
  that belongs to the word (``command-`` / ``line``): TeX hyphenates, word processors mostly do not,
  and both break lines after a real hyphen. Each mark inside a word is therefore either dropped
  (the halves joined) or turned back into ``-``, decided by :func:`hyphen_or_join` from the word's
  halves and the document's own words.
- **Invisible characters**: NUL, the zero-width space (Chromium drops it with U+FFFE), U+FEFF, and
  the C1 control characters (U+0080-009F): no text holds them; PDFium gives a glyph's code as its
  character when the font maps it to none, e.g. U+0088 for the bullets of a dvips-made PDF.
- **Ligatures**: PDFium expands the Latin ligatures U+FB00-FB06 (ﬁ -> fi) in left-to-right text
  itself; any other character of the Alphabetic Presentation Forms block (U+FB00-FB4F) left in the
  text is replaced by its NFKC form.
- **Line breaks**: PDFium's CRLF becomes LF.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Sequence

#: PDFium's mark for a hyphen at a line break (in the text; U+0002 is the same character's code
#: from FPDFText_GetUnicode), and the soft hyphen
BREAK_MARKS = "\ufffe\x02\xad"
INVISIBLE = "\x00\u200b\ufeff\x80-\x9f"  # a character class
_MARK = re.compile(rf"[{BREAK_MARKS}](?:[ \t]*\n[ \t]*)?")
_TOUCHING_MARK = re.compile(rf"\w*[{BREAK_MARKS}](?:\s*)\w*")
_WORD = re.compile(r"\w+")
_HYPHENS = ("-", "\u2010")
_COMPOUND = re.compile(r"\w+(?:[-\u2010]\w+)+")
_LEFT = re.compile(r"\w+$")
_RIGHT = re.compile(r"\w+")
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_PRESENTATION_FORM = re.compile("[\ufb00-\ufb4f]")


class Vocabulary:
    """How often each word, and each pair of words joined by a hyphen, occurs in a document
    (lower-cased), leaving out the words a break mark splits."""

    def __init__(self, texts: Sequence[str]):
        self.words: Counter[str] = Counter()
        self.pairs: Counter[str] = Counter()
        for text in texts:
            rest = _TOUCHING_MARK.sub(" ", text)
            self.words.update(w.lower() for w in _WORD.findall(rest))
            for compound in _COMPOUND.findall(rest):
                parts = re.split(r"[-\u2010]", compound.lower())
                self.pairs.update(f"{a}-{b}" for a, b in zip(parts, parts[1:]))


def hyphen_or_join(left: str, right: str, vocab: Vocabulary, compound: bool = False) -> str:
    """``""`` to join the two halves of a word split by a break mark, ``"-"`` to keep a hyphen.

    In order: a digit in either half keeps the hyphen (hyphenation splits words of letters only);
    so does a break inside a hyphenated compound (``compound``: ``off-`` / ``the-shelf``; a word that
    holds a hyphen is broken only there) and a lower-case half followed by a capital (``Back-`` /
    ``Cover``); then the document
    decides, by how often it writes the joined word and the hyphenated pair elsewhere; a half of
    one letter keeps the hyphen (no hyphenation leaves one); two halves that are both words of the
    document keep it (``command-`` / ``line``); anything else is joined (``man`` / ``agement``)."""
    if compound or any(c.isdigit() for c in left + right):
        return "-"
    if left[-1].islower() and right[0].isupper():
        return "-"
    joined = vocab.words[(left + right).lower()]
    hyphenated = vocab.pairs[f"{left}-{right}".lower()]
    if joined != hyphenated:
        return "" if joined > hyphenated else "-"
    if len(left) < 2 or len(right) < 2:
        return "-"
    if vocab.words[left.lower()] and vocab.words[right.lower()]:
        return "-"
    return ""


def _resolve_marks(text: str, vocab: Vocabulary) -> str:
    def one(m: re.Match) -> str:
        left = _LEFT.search(text, max(0, m.start() - 100), m.start())
        right = _RIGHT.match(text, m.end(), m.end() + 100)
        if not (left and right):  # not inside a word: drop the mark, keep any line break
            return m.group(0)[1:]
        compound = text[left.start() - 1:left.start()] in _HYPHENS or text[right.end():right.end() + 1] in _HYPHENS
        return hyphen_or_join(left.group(0), right.group(0), vocab, compound)

    return _MARK.sub(one, text)


def normalise_pages(pages: Sequence[str]) -> list[str]:
    """Each page's text with PDFium's artefacts normalised (see the module's docstring); the
    vocabulary that decides line-break hyphens is the whole document's."""
    texts = [_INVISIBLE.sub("", t.replace("\r\n", "\n").replace("\r", "\n")) for t in pages]
    vocab = Vocabulary(texts)
    out = []
    for t in texts:
        if any(c in t for c in BREAK_MARKS):
            t = _resolve_marks(t, vocab)
        out.append(_PRESENTATION_FORM.sub(lambda m: unicodedata.normalize("NFKC", m.group(0)), t))
    return out
