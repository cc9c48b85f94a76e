"""The RAGBench paper's text (the source of ``dataset=ragbench_paper_longdoc``) typeset as the
files a user would have: HTML (written here), PDF (pandoc + pdflatex from Debian's packages) and
DOCX (pandoc). Their text is known, so a parser's fidelity and the retrieval recall over the
parsed file can be measured against the text itself (tests/unit/corpus/test_paper_round_trip.py,
experiments/benchmarks/parse_bench.py).

    apt-get install pandoc texlive-latex-base texlive-latex-recommended texlive-fonts-recommended lmodern
    python experiments/benchmarks/own_docs/make_paper_docs.py [OUT_DIR]   # default tests/fixtures/files/paper

Headings are the text's numbered section lines ("3.1 Component Datasets") after its table of
contents; every other line is a paragraph (blank lines separate them in the text). Characters
pdflatex has no glyph for (math italic letters, arrows) are typeset as their plain form.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HEADING = re.compile(r"^(\d+)((?:\.\d+)*) [A-Z]")
#: pdflatex has no glyph for these: typeset as their plain form (the extracted text differs there)
PLAIN = {"\u2062": "", "\u2211": r"\ensuremath{\sum}", "\u2229": r"\ensuremath{\cap}",
         "\u2191": r"\ensuremath{\uparrow}", "\u2193": r"\ensuremath{\downarrow}", "\u2217": r"\ensuremath{*}",
         "\u2026": r"\ldots{}", "\u2013": "--"}


def paper_text() -> str:
    sys.path.insert(0, str(ROOT / "src"))
    from ragsweep.corpus.dataset.longdoc import RagbenchPaperLongDoc

    return RagbenchPaperLongDoc(split="none").load().documents[0].text


def to_html(text: str) -> str:
    """The text as a plain HTML page: its title, its numbered section lines as h1-h3 (after the
    table of contents, which stays a list of paragraphs), every other non-blank line a paragraph."""
    lines = text.split("\n")
    title = lines[0].strip()
    body_start = text.index(title, len(title))  # the title's second occurrence: the paper after its contents
    out, pos = [], 0
    for line in lines:
        s = line.strip()
        start, pos = pos, pos + len(line) + 1
        if not s:
            continue
        m = HEADING.match(s)
        if start == body_start:
            out.append(f"<h1>{html.escape(s)}</h1>")
        elif m and start > body_start:
            level = min(2 + m.group(2).count("."), 4)
            out.append(f"<h{level}>{html.escape(s)}</h{level}>")
        else:
            out.append(f"<p>{html.escape(s)}</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title></head>\n<body>\n" + "\n".join(out) + "\n</body></html>\n")


def header_tex() -> str:
    chars = set(paper_text())
    rows = []
    for ch in sorted(chars):
        if ord(ch) > 0x2000 and ch not in "‘’":
            plain = PLAIN.get(ch)
            if plain is None and 0x1D400 <= ord(ch) <= 0x1D7FF:  # math italic letters: the letter
                import unicodedata

                plain = unicodedata.name(ch).split()[-1]
                plain = plain.lower() if "SMALL" in unicodedata.name(ch) else plain
            rows.append(rf"\DeclareUnicodeCharacter{{{ord(ch):04X}}}{{{plain if plain is not None else '?'}}}")
    return "\n".join(rows) + "\n"


def main(out: Path) -> None:
    if not shutil.which("pandoc") or not shutil.which("pdflatex"):
        raise SystemExit("needs pandoc and pdflatex: apt-get install pandoc texlive-latex-base "
                         "texlive-latex-recommended texlive-fonts-recommended lmodern")
    out.mkdir(parents=True, exist_ok=True)
    page = to_html(paper_text())
    (out / "ragbench_paper.html").write_text(page, encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        header = Path(tmp) / "header.tex"
        header.write_text(header_tex(), encoding="utf-8")
        src = out / "ragbench_paper.html"
        subprocess.run(["pandoc", str(src), "-o", str(out / "ragbench_paper.pdf"), "--pdf-engine=pdflatex",
                        "-H", str(header), "-V", "geometry:margin=2.5cm", "-V", "colorlinks"],
                       check=True)
        subprocess.run(["pandoc", str(src), "-o", str(out / "ragbench_paper.docx")], check=True)
    for name in ("html", "pdf", "docx"):
        p = out / f"ragbench_paper.{name}"
        print(f"{p}: {p.stat().st_size / 1024:.0f} kB")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "fixtures" / "files" / "paper")
