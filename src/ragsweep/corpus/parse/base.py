"""What every file parser returns, how it fails, and the text builder they share.

A parser turns one file into :class:`Parsed`: the text a retriever indexes, a title, the
character offset where each page starts (PDF) and the headings (``text[start:end]`` is a
heading's title). A file it cannot turn into text raises :class:`ParseFailure` with one of
:data:`REASONS`; the loader writes it to the parse ledger with the reason's fix and goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragsweep.types import Heading

#: why a file gave no text, and what the user does about it
REASONS: dict[str, str] = {
    "encrypted": "the file is password-protected: decrypt it (qpdf --decrypt --password=PASSWORD in.pdf out.pdf) "
                 "or leave it out (dataset.exclude)",
    "no_text_layer": "no text layer (scanned or image-only pages): run OCR first (ocrmypdf in.pdf out.pdf)",
    "corrupt": "the file cannot be read as its kind (damaged, truncated or misnamed): re-export or download it again",
    "empty": "the file holds no text: remove it or leave it out (dataset.exclude)",
    "unsupported": "not a kind ragsweep parses (.pdf .html .htm .xhtml .docx .md .markdown .txt): convert it "
                   "to one, or leave it out (dataset.exclude='*.EXT')",
    "not_text": "not UTF-8 and no other text encoding fits: re-save it as UTF-8 text",
}


class ParseFailure(Exception):
    """A file that gives no text: ``reason`` (a key of :data:`REASONS`) and what was seen."""

    def __init__(self, reason: str, detail: str = ""):
        if reason not in REASONS:
            raise ValueError(f"unknown parse failure reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True)
class Parsed:
    """One parsed file: ``pages`` are the offsets where pages 1, 2, ... start (empty: no pages)."""

    text: str
    title: str | None = None
    pages: tuple[int, ...] = ()
    headings: tuple[Heading, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "title": self.title, "pages": list(self.pages),
                "headings": [[h.start, h.end, h.level, h.title] for h in self.headings]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Parsed":
        return cls(d["text"], d.get("title"), tuple(d.get("pages") or ()),
                   tuple(Heading(*h) for h in d.get("headings") or ()))


class Builder:
    """Text assembled block by block, keeping where pages start and where headings are.

    ``add("Installation", heading=2)`` appends a block (blocks are separated by a blank line) and
    records it as a level-2 heading; ``page()`` marks that the next block starts a new page."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._n = 0
        self.pages: list[int] = []
        self.headings: list[Heading] = []

    def page(self) -> None:
        if self._parts:
            self._sep()
        self.pages.append(self._n)

    def _sep(self) -> None:
        if self._parts and not self._parts[-1].endswith("\n\n"):
            sep = "\n" if self._parts[-1].endswith("\n") else "\n\n"
            self._parts.append(sep)
            self._n += len(sep)

    def add(self, text: str, heading: int | None = None) -> None:
        text = text.strip()
        if not text:
            return
        if not (self.pages and self.pages[-1] == self._n):
            self._sep()
        if heading is not None:
            title = " ".join(text.split())
            text = title
            self.headings.append(Heading(self._n, self._n + len(title), int(heading), title))
        self._parts.append(text)
        self._n += len(text)

    def build(self, title: str | None = None) -> Parsed:
        text = "".join(self._parts)
        pages = tuple(p for p in self.pages) if self.pages else ()
        first = self.headings[0].title if self.headings else None
        return Parsed(text, clean_title(title) or first, pages, tuple(self.headings))


def clean_title(title: Any) -> str | None:
    """A metadata title worth showing: one line, not blank, not a placeholder ("untitled")."""
    if not isinstance(title, str):
        return None
    t = " ".join(title.split())
    return t if t and t.lower() not in {"untitled", "untitled document", "microsoft word"} else None


def require_text(parsed: Parsed, what: str = "no text") -> Parsed:
    """``parsed``, or ``ParseFailure("empty")`` when it holds no visible character."""
    if not parsed.text.strip():
        raise ParseFailure("empty", what)
    return parsed
