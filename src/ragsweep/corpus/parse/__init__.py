"""File parsers, one module per kind (:mod:`.pdf`, :mod:`.html`, :mod:`.docx`, :mod:`.text`),
each chosen by measurement (experiments/results/parse_bench.md): :func:`parser_for` picks one
by the file's extension, :func:`parse_file` runs it and turns any failure into a
:class:`~.base.ParseFailure` with a reason the parse ledger shows with its fix."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable

from ragsweep.corpus.parse import docx, html, pdf, text
from ragsweep.corpus.parse.base import REASONS, Parsed, ParseFailure


@dataclass(frozen=True)
class Parser:
    """One kind's parser: its name, the library (and its version) it runs, and the function."""

    name: str
    library: str
    revision: int
    fn: Callable[[Path], Parsed]

    @functools.cached_property
    def version(self) -> str:
        """Part of the parse cache key: this module's revision and the library's version."""
        try:
            lib = metadata.version(self.library)
        except metadata.PackageNotFoundError:
            lib = "?"
        return f"{self.revision}+{self.library}=={lib}"


PDF = Parser(pdf.NAME, pdf.LIBRARY, pdf.REVISION, pdf.parse)
HTML = Parser(html.NAME, html.LIBRARY, html.REVISION, html.parse)
DOCX = Parser(docx.NAME, docx.LIBRARY, docx.REVISION, docx.parse)
MARKDOWN = Parser("markdown", text.LIBRARY, text.REVISION, text.parse_markdown)
TEXT = Parser("text", "charset-normalizer", text.REVISION, text.parse_text)
#: extension (lower case) -> parser
BY_EXTENSION: dict[str, Parser] = {".pdf": PDF, ".html": HTML, ".htm": HTML, ".xhtml": HTML, ".docx": DOCX,
                                   ".md": MARKDOWN, ".markdown": MARKDOWN, ".txt": TEXT}


def parser_for(path: str | Path) -> Parser | None:
    return BY_EXTENSION.get(Path(path).suffix.lower())


def parse_file(path: Path, parser: Parser) -> Parsed | ParseFailure:
    """``parser`` run on ``path``: its text, or why there is none (never raises for a bad file)."""
    try:
        return parser.fn(path)
    except ParseFailure as exc:
        return exc
    except MemoryError:
        raise
    except Exception as exc:  # a library's own error on a damaged file
        return ParseFailure("corrupt", f"{parser.library}: {type(exc).__name__}: {exc}"[:500])


__all__ = ["BY_EXTENSION", "REASONS", "Parsed", "ParseFailure", "Parser", "parse_file", "parser_for"]
