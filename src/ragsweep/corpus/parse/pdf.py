"""PDF files, with pypdfium2 (PDFium, the PDF engine of Chromium; Apache-2.0/BSD): chosen over
pypdf, pdfminer.six and markitdown by measurement (experiments/results/parse_bench.md): the
fastest of the permissively licensed ones, and its text matches the known text best. PyMuPDF,
as fast, is AGPL-3.0, which an Apache-2.0 package cannot depend on.

Each page's text in order, pages separated by a blank line (``pages``: where each starts); the
headings are the PDF's outline (bookmarks), each placed where its title appears on its page
(else at the page's start); the title is the PDF's metadata title, else its first heading.
The page texts are normalised first (line-break hyphens, invisible characters, ligatures:
:mod:`ragsweep.corpus.parse.pdf_text`), so every offset points into the normalised text.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragsweep.corpus.parse.base import Builder, Parsed, ParseFailure, clean_title
from ragsweep.corpus.parse.pdf_text import normalise_pages
from ragsweep.types import Heading

NAME = "pdf-pypdfium2"
LIBRARY = "pypdfium2"
#: bump when this module's output changes for the same file (part of the parse cache key)
REVISION = 2  # 2: line-break hyphens, invisible characters and ligatures normalised (pdf_text)
_SPACE = re.compile(r"\s+")


def parse(path: Path) -> Parsed:
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        msg = str(exc)
        raise ParseFailure("encrypted" if "password" in msg.lower() else "corrupt", msg) from None
    try:
        return _read(pdf)
    finally:
        pdf.close()


def _read(pdf) -> Parsed:
    import pypdfium2.raw as raw

    raw_texts: list[str] = []
    images = 0
    for i in range(len(pdf)):
        page = pdf[i]
        tp = page.get_textpage()
        text = tp.get_text_range()
        tp.close()
        if not text.strip():
            images += sum(1 for _ in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE], max_depth=2))
        page.close()
        raw_texts.append(text)
    b = Builder()
    for text in normalise_pages(raw_texts):  # before any offset is taken
        b.page()
        b.add(text)
    parsed = b.build()
    if not parsed.text.strip():
        if images:
            raise ParseFailure("no_text_layer", f"{len(pdf)} page(s), {images} image(s), no text")
        raise ParseFailure("empty", f"{len(pdf)} page(s) without text")
    meta = pdf.get_metadata_dict()
    headings = _outline(pdf, parsed)
    title = clean_title(meta.get("Title")) or (headings[0].title if headings else None)
    return Parsed(parsed.text, title, parsed.pages, headings)


def _outline(pdf, parsed: Parsed) -> tuple[Heading, ...]:
    """The outline's entries as headings, each at its title's first place on its page."""
    out: list[Heading] = []
    text, pages = parsed.text, parsed.pages
    try:
        toc = list(pdf.get_toc(max_depth=8))
    except Exception:  # a damaged outline: the text is still good
        return ()
    for item in toc:
        title = " ".join((item.get_title() or "").split())
        dest = item.get_dest()
        index = dest.get_index() if dest is not None else None
        if not title or index is None or not 0 <= index < len(pages):
            continue
        lo = pages[index]
        hi = pages[index + 1] if index + 1 < len(pages) else len(text)
        start, end = _find(text, title, lo, hi)
        out.append(Heading(start, end, int(item.level) + 1, title))
    out.sort(key=lambda h: h.start)
    return tuple(out)


def _find(text: str, title: str, lo: int, hi: int) -> tuple[int, int]:
    """Where ``title`` is in ``text[lo:hi]`` (any whitespace between its words), else ``(lo, lo)``."""
    pattern = r"\s+".join(re.escape(w) for w in title.split())
    m = re.compile(pattern, re.I).search(text, lo, hi)
    return (m.start(), m.end()) if m else (lo, lo)
