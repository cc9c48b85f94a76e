"""The windows questions are generated from: seeded, spread over documents and their sections or
pages before any is used twice, capped per document, independent of chunking, with the kinds mixed
as asked and two-passage kinds given a related partner."""

from __future__ import annotations

from collections import Counter

import pytest

from ragsweep.corpus.sampling import SamplingConfig, counts, cut, draw, strata, windows_of
from ragsweep.types import Document, Heading

SENT = "The {w} system stores {i} records in its {w} table and reads them back in order."


def doc(doc_id: str, word: str, n: int = 60, **kw) -> Document:
    return Document(doc_id, " ".join(SENT.format(w=word, i=i) for i in range(n)), **kw)


def corpus() -> list[Document]:
    return [doc(f"d{i}", w) for i, w in enumerate(["alpha", "bravo", "charlie", "delta", "echo"])]


def test_the_same_seed_gives_the_same_samples_and_another_seed_others():
    cfg = SamplingConfig(n=8, kinds={"single": 0.5, "multi_hop": 0.25, "unanswerable": 0.25}, seed=3)
    a, _ = draw(corpus(), cfg)
    b, _ = draw(corpus(), cfg)
    c, _ = draw(corpus(), SamplingConfig(n=8, kinds=cfg.kinds, seed=4))
    assert a == b and a != c


def test_every_document_is_used_before_any_is_used_twice_and_per_doc_caps():
    samples, stats = draw(corpus(), SamplingConfig(n=5, seed=0))
    assert sorted(s.windows[0].doc_id for s in samples) == ["d0", "d1", "d2", "d3", "d4"]
    capped, stats = draw(corpus(), SamplingConfig(n=20, seed=0, per_doc=2))
    assert max(Counter(s.windows[0].doc_id for s in capped).values()) == 2
    assert stats["samples"] == 10 and stats["short"] == 10  # 5 documents x 2: the rest is said, not hidden


def test_windows_are_whole_sentences_of_the_text_with_their_offsets():
    d = doc("d", "alpha")
    for group in windows_of(d, SamplingConfig(n=1, window_chars=300, min_chars=100)):
        for w in group:
            assert d.text[w.start : w.end] == w.text
            assert w.text.startswith("The ") and w.text.endswith(".")
            assert 100 <= len(w.text) <= 300 + len(SENT) + 10
    assert cut("short.", 0, 6, 300, 100) == []  # under min_chars: no window


def test_strata_are_sections_else_pages_else_parts():
    text = "Intro\n\n" + "A line here. " * 200 + "\n\nSetup\n\n" + "B line here. " * 200
    setup = text.index("Setup")
    with_headings = Document("h", text, headings=(Heading(0, 5, 1, "Intro"), Heading(setup, setup + 5, 1, "Setup")))
    assert [s[0] for s in strata(with_headings)] == ["§ Intro", "§ Setup"]
    paged = Document("p", text, pages=(0, 1000, 2000))
    assert [s[0] for s in strata(paged)] == ["p. 1", "p. 2", "p. 3"]
    assert [s[0] for s in strata(Document("t", text), parts=2)] == ["part 1/2", "part 2/2"]


def test_a_documents_sections_are_visited_round_robin():
    text = "".join(f"Part {k}\n\n" + f"Section {k} says {k} things about tables and rows. " * 40 + "\n\n" for k in range(4))
    heads = tuple(Heading(text.index(f"Part {k}"), text.index(f"Part {k}") + 6, 1, f"Part {k}") for k in range(4))
    samples, _ = draw([Document("one", text, headings=heads)], SamplingConfig(n=4, seed=1, min_chars=100, window_chars=400))
    assert sorted(s.windows[0].stratum for s in samples) == [f"§ Part {k}" for k in range(4)]


def test_kinds_follow_the_mix_by_largest_remainder():
    assert counts(10, {"single": 0.55, "multi_hop": 0.15, "comparison": 0.15, "unanswerable": 0.15}) == {
        "single": 6, "multi_hop": 2, "comparison": 1, "unanswerable": 1}
    samples, stats = draw(corpus(), SamplingConfig(n=10, kinds={"single": 0.5, "unanswerable": 0.5}, seed=0))
    assert Counter(s.kind for s in samples) == {"single": 5, "unanswerable": 5}


def test_two_passage_kinds_get_the_most_related_partner_elsewhere():
    docs = [doc("cats1", "feline"), doc("cars", "engine"), doc("cats2", "feline"), doc("boats", "sailing")]
    cfg = SamplingConfig(n=4, kinds={"multi_hop": 1.0}, seed=0, per_doc=4, min_distance=3000)
    samples, stats = draw(docs, cfg)
    assert stats["paired_to_single"] == 0
    for s in samples:
        a, b = s.windows
        assert a.doc_id != b.doc_id or abs(a.start - b.start) >= cfg.min_distance  # two documents or two distant parts
        assert a.doc_id.startswith("cats") == b.doc_id.startswith("cats")  # the feline passages pair with each other
        assert (a.doc_id, a.start) != (b.doc_id, b.start)


def test_a_single_short_document_has_no_partner_and_says_so():
    samples, stats = draw([doc("only", "alpha", n=4)], SamplingConfig(n=1, kinds={"comparison": 1.0}, min_chars=50))
    assert [s.kind for s in samples] == ["single"] and stats["paired_to_single"] == 1


@pytest.mark.parametrize("bad, field", [
    ({"n": 0}, "n"), ({"n": 5, "kinds": {"single": 0.5}}, "sum to 1"), ({"n": 5, "kinds": {"trivia": 1.0}}, "unknown kind"),
    ({"n": 5, "per_doc": 0}, "per_doc"), ({"n": 5, "window_chars": 10}, "window_chars"),
])
def test_bad_settings_name_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        SamplingConfig(**bad)
