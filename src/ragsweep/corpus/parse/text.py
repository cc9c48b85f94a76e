"""Markdown and plain text, kept as they are (decoded as UTF-8, else in the encoding
charset-normalizer finds). Markdown's headings (ATX ``#`` and setext) come from markdown-it-py's
parse, so a ``#`` inside a code block is no heading; the title is the first heading (Markdown),
else none (the loader then shows the file name)."""

from __future__ import annotations

from pathlib import Path

from ragsweep.corpus.parse.base import Parsed, ParseFailure, require_text
from ragsweep.types import Heading

NAME = "text"
LIBRARY = "markdown-it-py"
REVISION = 1


def read_text(path: Path) -> str:
    raw = path.read_bytes()
    if not raw.strip():
        raise ParseFailure("empty", "0 bytes" if not raw else "only whitespace")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        from charset_normalizer import from_bytes

        best = from_bytes(raw).best()
        if best is None:
            raise ParseFailure("not_text", "no text encoding fits its bytes") from None
        text = str(best)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_text(path: Path) -> Parsed:
    return require_text(Parsed(read_text(path)), "only whitespace")


def parse_markdown(path: Path) -> Parsed:
    text = read_text(path)
    headings = markdown_headings(text)
    return require_text(Parsed(text, headings[0].title if headings else None, (), headings), "only whitespace")


def markdown_headings(text: str) -> tuple[Heading, ...]:
    from markdown_it import MarkdownIt

    starts = [0]
    for line in text.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    tokens = MarkdownIt("commonmark").parse(text)
    out = []
    for tok, inline in zip(tokens, tokens[1:]):
        if tok.type != "heading_open" or tok.map is None:
            continue
        title = " ".join(inline.content.split())
        line_start = starts[tok.map[0]]
        line = text[line_start: starts[tok.map[0] + 1] - 1 if tok.map[0] + 1 < len(starts) else len(text)]
        at = line.find(title) if title else -1
        start = line_start + (at if at >= 0 else 0)
        out.append(Heading(start, start + (len(title) if at >= 0 else 0), int(tok.tag[1]), title))
    return tuple(out)
