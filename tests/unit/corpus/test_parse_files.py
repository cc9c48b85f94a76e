"""Each kind's parser on real files (tests/fixtures/files/README.md says where each came from):
text, title, page offsets and headings; and the files that give no text, each with its reason."""

from __future__ import annotations

import pytest

from ragsweep.corpus.parse import parse_file, parser_for
from ragsweep.corpus.parse.base import REASONS, Builder, ParseFailure
from ragsweep.corpus.place import heading_path, page_of, place
from ragsweep.types import Document, Heading
from support import FIXTURES

FILES = FIXTURES / "files"


def parse(rel):
    path = FILES / rel
    return parse_file(path, parser_for(path))


def test_pdf_pages_title_and_outline_headings():
    p = parse("paper/ragbench_paper.pdf")
    assert len(p.pages) == 32 and p.pages[0] == 0 and list(p.pages) == sorted(p.pages)
    assert p.title == "RAGBench: Explainable Benchmark for Retrieval-Augmented Generation Systems"
    h = {x.title: x for x in p.headings}
    assert {"1 Introduction", "3.1 Component Datasets", "4.2 Fine-tuned Judge"} <= set(h)
    sub = h["3.1 Component Datasets"]
    assert p.text[sub.start:sub.end] == "3.1 Component Datasets" and sub.level == 3
    assert "a comprehensive dataset for training and benchmarking RAG evaluation" in " ".join(p.text.split())
    crazy = parse("pdf/crazyones.pdf")
    assert "to the crazy ones. The misfits. The rebels." in crazy.text and crazy.pages == (0,)


def test_html_main_text_and_headings_without_the_sites_navigation():
    p = parse("html/sqlite_quickstart.html")
    assert p.title == "SQLite In 5 Minutes Or Less"
    assert [h.title for h in p.headings] == ["Download The Code", "Create A New Database", "Write Programs That Use SQLite"]
    assert all(p.text[h.start:h.end] == h.title for h in p.headings)
    assert "sqlite3 test.db" in p.text
    assert "Small. Fast. Reliable." not in p.text  # the site's header is no content


def test_docx_heading_styles_and_markdown_headings():
    d = parse("docx/python_docx_test.docx")
    assert d.text == "python-docx was here!\n\npython-docx was here too!"
    assert d.headings == (Heading(0, 21, 1, "python-docx was here!"),) and d.title == "python-docx was here!"
    paper = parse("paper/ragbench_paper.docx")
    assert "3.2 TRACe Evaluation Framework" in [h.title for h in paper.headings]
    md = parse("md/pypdf_README.md")
    assert md.text == (FILES / "md" / "pypdf_README.md").read_text(encoding="utf-8")  # Markdown kept as it is
    assert md.title == "pypdf" and "Installation" in [h.title for h in md.headings]
    assert all(md.text[h.start:h.end] == h.title for h in md.headings)
    assert not any(h.title.startswith("pip") for h in md.headings)  # '#' in a code block is no heading


@pytest.mark.parametrize("rel, reason", [
    ("bad/encrypted.pdf", "encrypted"), ("bad/scanned.pdf", "no_text_layer"), ("bad/truncated.pdf", "corrupt"),
    ("bad/empty.md", "empty"),
])
def test_a_file_without_text_fails_with_its_reason(rel, reason):
    out = parse(rel)
    assert isinstance(out, ParseFailure) and out.reason == reason
    assert parser_for(FILES / "bad" / "sqlite_logo.gif") is None  # unsupported: no parser at all
    assert "ocrmypdf" in REASONS["no_text_layer"] and "qpdf --decrypt" in REASONS["encrypted"]


def test_a_misnamed_or_damaged_docx_and_html(tmp_path):
    bad = tmp_path / "report.docx"
    bad.write_bytes((FILES / "pdf" / "crazyones.pdf").read_bytes())
    assert parse_file(bad, parser_for(bad)).reason == "corrupt"
    blank = tmp_path / "blank.html"
    blank.write_text("<html><head><title>t</title><script>var x = 1;</script></head><body><nav>Home</nav></body></html>")
    assert parse_file(blank, parser_for(blank)).reason == "empty"


def test_builder_keeps_page_starts_and_heading_offsets():
    b = Builder()
    b.page()
    b.add("Install", heading=1)
    b.add("Run   pip\ninstall.")
    b.page()
    b.page()  # a page without text starts where the next one does
    b.add("Linux", heading=2)
    p = b.build()
    assert p.text == "Install\n\nRun   pip\ninstall.\n\nLinux"
    assert p.pages == (0, 29, 29) and p.title == "Install"
    assert [p.text[h.start:h.end] for h in p.headings] == ["Install", "Linux"]


def test_place_says_file_page_and_heading_path():
    text = "Manual\n\nInstall\n\nsteps\n\nLinux\n\napt\n\nUsage\n\nrun"
    hs = (Heading(0, 6, 1, "Manual"), Heading(8, 15, 2, "Install"), Heading(24, 29, 3, "Linux"),
          Heading(36, 41, 2, "Usage"))
    doc = Document("guide/manual.pdf", text, "Manual", pages=(0, 24), headings=hs)
    assert place(doc, text.index("apt")) == "guide/manual.pdf p. 2, § Manual › Install › Linux"
    assert place(doc, text.index("run")) == "guide/manual.pdf p. 2, § Manual › Usage"
    assert page_of(doc, 3) == 1 and heading_path(doc, 10) == ["Manual", "Install"]
    assert place(Document("notes.md", "x", headings=()), 0) == "notes.md"
