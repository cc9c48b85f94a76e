"""PDF text artefacts (issue 51, part 4): PDFium's line-break hyphen mark (U+FFFE) and soft hyphens
resolved into joined words or kept hyphens, invisible characters dropped, ligatures expanded, on
made-up text and on real PDFs from three kinds of producer (tests/fixtures/files/README.md):
texinfo (pdfTeX), LaTeX (dvips + Ghostscript) and a word processor (Microsoft Word)."""

from __future__ import annotations

import re

import pytest

from ragsweep.corpus.parse import parse_file, parser_for
from ragsweep.corpus.parse.pdf_text import BREAK_MARKS, Vocabulary, hyphen_or_join, normalise_pages
from support import FIXTURES

FILES = FIXTURES / "files"
PRODUCERS = FILES / "producers"
ALL_PDFS = sorted(p for p in FILES.rglob("*.pdf") if p.parent.name != "bad")
LEFT_OVER = re.compile(rf"[{BREAK_MARKS}\u200b\ufeff\x80-\x9f\ufb00-\ufb4f]")


def parse(path):
    return parse_file(path, parser_for(path))


def raw_text(path) -> str:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    try:
        return "".join(pdf[i].get_textpage().get_text_range() for i in range(len(pdf)))
    finally:
        pdf.close()


def test_pdfiums_mark_joins_a_hyphenated_word_and_a_soft_hyphen_at_a_line_end_too():
    [page] = normalise_pages(["structures man\ufffeagement and infor\xad\r\nmation, col\x02lect\r\n"])
    assert page == "structures management and information, collect\n"


def test_a_hyphen_that_belongs_to_the_word_comes_back():
    text = ("an off\ufffethe-shelf part; Back\ufffeCover Texts; cd-hit\ufffev4.6; part 01\xad2301; "
            "user\ufffedefined functions are user-defined; a C\ufffelibrary; command\ufffeline: every command has a line")
    [page] = normalise_pages([text])
    for word in ("off-the-shelf", "Back-Cover", "cd-hit-v4.6", "01-2301", "user-defined functions", "C-library",
                 "command-line"):
        assert word in page, (word, page)


def test_the_document_decides_between_its_own_spellings():
    vocab = Vocabulary(["The software is free.", "An e-mail, another e-mail, one email."])
    assert hyphen_or_join("soft", "ware", vocab) == ""  # "software" elsewhere
    assert hyphen_or_join("e", "mail", vocab) == "-"  # "e-mail" twice, "email" once
    assert hyphen_or_join("man", "agement", vocab) == ""  # neither spelling elsewhere, "agement" no word
    assert hyphen_or_join("free", "is", vocab) == "-"  # both halves are words of the document
    assert hyphen_or_join("Sec", "tion", Vocabulary(["section"])) == ""  # case does not matter


def test_a_mark_outside_a_word_is_dropped_and_the_line_break_kept():
    assert normalise_pages(["end.\ufffe\r\n(next)", "\ufffeword"]) == ["end.\n(next)", "word"]


def test_invisible_characters_and_ligatures():
    [page] = normalise_pages(["\ufeffa\u200bb\x00c \x88 item: \ufb01le \ufb02ow e\ufb03cient \ufb06op\r\n"])
    assert page == "abc  item: file flow efficient stop\n"


def test_a_page_without_marks_is_only_given_lf_line_breaks():
    text = "Plain text - with a dash,\r\nand a second line \u2013 and “quotes”."
    assert normalise_pages([text]) == [text.replace("\r\n", "\n")]


@pytest.mark.parametrize("name, marks, present, absent", [
    ("texinfo_alexandria.pdf", 22, ["built upon, or otherwise exploited", "Alexandria is distributed",
                                    "dimension-limit", "STRING-DESIGNATOR"], ["oth-erwise", "Alexan-dria"]),
    ("latex_haskell98_ffi.pdf", 42, ["grant permission to copy", "system-specific extensions", "nonzero"],
     ["per-mission", "exten-sions"]),
    ("word_clips_abstracts.pdf", 5, ["off-the-shelf electronic", "in-process", "platform-based"], ["offthe"]),
])
def test_real_pdfs_of_three_producers(name, marks, present, absent):
    path = PRODUCERS / name
    raw = raw_text(path)
    assert sum(raw.count(c) for c in BREAK_MARKS) == marks  # what PDFium gives: the fixture has the artefact
    p = parse(path)
    assert not LEFT_OVER.search(p.text), LEFT_OVER.search(p.text)
    flat = " ".join(p.text.split())
    for phrase in present:
        assert phrase in flat, phrase
    for phrase in absent:
        assert phrase not in flat, phrase


def test_offsets_point_into_the_normalised_text():
    p = parse(PRODUCERS / "texinfo_alexandria.pdf")
    assert len(p.pages) == 24 and list(p.pages) == sorted(p.pages)
    assert [h.title for h in p.headings][:3] == ["1 Hash Tables", "2 Data and Control Flow", "3 Conses"]
    assert all(p.text[h.start:h.end] == h.title for h in p.headings)
    paper = parse(FILES / "paper" / "ragbench_paper.pdf")
    title = "RAGBench: Explainable Benchmark for Retrieval-Augmented Generation Systems"
    first = paper.headings[0]  # its title line reads "Gen\ufffeeration" in PDFium's text
    assert first.title == title and paper.text[first.start:first.end] == title
    assert all(paper.text[h.start:h.end] == h.title for h in paper.headings)


@pytest.mark.parametrize("path", ALL_PDFS, ids=lambda p: str(p.relative_to(FILES)))
def test_no_test_pdf_keeps_a_break_mark_or_a_soft_hyphen(path):
    p = parse(path)
    assert not isinstance(p, Exception), p
    found = LEFT_OVER.search(p.text)
    assert not found, (found, p.text[max(0, found.start() - 30):found.end() + 30])
