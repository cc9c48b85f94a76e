"""HTML files, with lxml: the page's main part (``<main>``, ``<article>`` or ``role=main`` when
it has one, else ``<body>``) without scripts, styles, navigation, headers, footers, asides and
forms (by tag, or by a class or id such as ``menu``, ``sidebar``: :data:`CHROME`), block by block; ``<h1>``-``<h6>`` are the headings; the title is ``<title>``, else the
first heading. Chosen by measurement (experiments/results/parse_bench.md) over trafilatura
(which drops section headings and some paragraphs of a clean page), readability-lxml (which
keeps only part of some manual pages) and markitdown (slower, Markdown syntax in the text).
"""

from __future__ import annotations

import re
from pathlib import Path

from ragsweep.corpus.parse.base import Builder, Parsed, ParseFailure, clean_title, require_text

NAME = "html-lxml"
LIBRARY = "lxml"
REVISION = 1
#: never text of the page's content
DROP = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "svg", "button",
        "iframe", "select", "head")
BLOCKS = {"p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "pre",
          "blockquote", "figure", "figcaption", "address", "details", "summary", "body", "hr", "br", "td", "th",
          "caption", "center", "tbody", "thead", "tfoot"}
#: a class or id token naming a page's chrome (menus, banners, breadcrumbs), as readability's
#: "unlikely candidates": such an element is dropped with all it holds
CHROME = re.compile(r"^(nav|navbar|navigation|menu|mainmenu|submenu|menubar|header|masthead|footer|sidebar|"
                    r"breadcrumbs?|tagline|search|searchbox|nosearch|skip|skiplink|cookies?|banner|toc)$", re.I)
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


def parse(path: Path) -> Parsed:
    import lxml.etree
    import lxml.html

    raw = path.read_bytes()
    if not raw.strip():
        raise ParseFailure("empty", "0 bytes" if not raw else "only whitespace")
    try:
        root = lxml.html.document_fromstring(raw)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ParseFailure("corrupt", f"not HTML ({exc})") from None
    title = clean_title(root.findtext(".//title"))
    main = _main(root)
    for el in list(main.iter(*DROP)) + [e for e in main.iter() if e is not main and _chrome(e)]:
        if el.getparent() is not None:
            el.drop_tree()
    b = Builder()
    _walk(main, b, [])
    return require_text(b.build(title), "no text in the page's content")


def _main(root):
    for xpath in ("//main", "//*[@role='main']", "//article"):
        found = root.xpath(xpath)
        if len(found) == 1:
            return found[0]
    body = root.find("body")
    return body if body is not None else root


def _chrome(el) -> bool:
    if not isinstance(el.tag, str):
        return False
    names = (el.get("class") or "").split() + (el.get("id") or "").split()
    return any(CHROME.match(n) for n in names) or el.get("role") in ("navigation", "banner", "contentinfo")


def _walk(el, b: Builder, line: list[str]) -> None:
    """Append ``el``'s text to ``b``: a block element closes the current line of inline text."""
    tag = el.tag if isinstance(el.tag, str) else ""
    level = HEADINGS.get(tag)
    if level is not None:
        _flush(b, line)
        b.add(el.text_content(), heading=level)
        if el.tail:
            line.append(el.tail)
        return
    block = tag in BLOCKS
    if block:
        _flush(b, line)
    if tag == "pre":
        b.add(el.text_content())
    else:
        if el.text and isinstance(el.tag, str):
            line.append(el.text)
        for child in el:
            _walk(child, b, line)
    if block:
        _flush(b, line)
    if el.tail:
        line.append(el.tail)


def _flush(b: Builder, line: list[str]) -> None:
    if line:
        b.add(" ".join("".join(line).split()))
        line.clear()
