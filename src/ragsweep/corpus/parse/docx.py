"""Word files (.docx), with python-docx: paragraphs and tables in document order (a table row is
one line, its cells separated by " | "); paragraphs styled "Title" or "Heading N" are the
headings; the title is the document's core property, else the first heading. Chosen by
measurement (experiments/results/parse_bench.md) over mammoth and markitdown (slower, through
HTML or Markdown).
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

from ragsweep.corpus.parse.base import Builder, Parsed, ParseFailure, clean_title, require_text

NAME = "docx-python-docx"
LIBRARY = "python-docx"
REVISION = 1
_LEVEL = re.compile(r"^heading\s*(\d)$", re.I)


def parse(path: Path) -> Parsed:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    if _encrypted(path):
        raise ParseFailure("encrypted", "an encrypted Office file")
    try:
        doc = docx.Document(str(path))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ParseFailure("corrupt", f"not a Word .docx file ({type(exc).__name__}: {exc})") from None
    b = Builder()
    for block in doc.iter_inner_content():
        if isinstance(block, Paragraph):
            b.add(block.text, heading=_level(block))
        elif isinstance(block, Table):
            for row in block.rows:
                cells = list(dict.fromkeys(c.text.strip() for c in row.cells))  # merged cells repeat
                b.add(" | ".join(c for c in cells if c))
    return require_text(b.build(clean_title(doc.core_properties.title)), "no paragraph holds text")


def _level(paragraph) -> int | None:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name.lower() == "title":
        return 1
    m = _LEVEL.match(name)
    return int(m.group(1)) if m else None


def _encrypted(path: Path) -> bool:
    """A password-protected .docx is an OLE compound file, not a zip."""
    with open(path, "rb") as fh:
        return fh.read(8) == b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
