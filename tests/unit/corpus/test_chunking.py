"""The chunking strategies (ragsweep.corpus.chunking): offsets, sizes in MiniLM tokens, each
strategy's own rule on real text (the RAGBench paper, a Markdown page with headings), config
errors that name the field, the cache, and the token-budget selection that makes strategies
compare at equal retrieved tokens."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.corpus.chunker import TokenChunker, _backend
from ragsweep.corpus.chunking import MarkdownChunker, RecursiveChunker, SemanticChunker, SentenceChunker
from ragsweep.corpus.chunking.markdown import sections, text_headings
from ragsweep.corpus.chunking.splitter import TokenCount, split
from ragsweep.corpus.text import sentence_spans
from ragsweep.types import Document, Heading

STRATEGIES = [RecursiveChunker, SentenceChunker, MarkdownChunker]

MARKDOWN = """Preamble line before any heading, a short one.

# Installation

ragsweep installs with one command. It needs Python 3.10 or newer and about 3 GB of disk.

## Linux

Run the setup script from the repository root. It creates a virtual environment when none is active.

```bash
# this line is a comment inside a code block, not a heading
bash scripts/setup.sh
```

## macOS

Apple silicon works with the Metal build of llama.cpp.

Usage
=====

Call ragsweep with a dataset and a retriever. Every stage is cached by content.
"""


@pytest.fixture(scope="module")
def paper() -> list[Document]:
    """The RAGBench paper's section documents (real text: paragraphs, lists, references)."""
    from ragsweep.corpus.dataset import RagbenchPaperLongDoc

    return list(RagbenchPaperLongDoc().load().documents)


def ntokens(text: str) -> int:
    return len(_backend("minilm").encode(text, add_special_tokens=False).ids)


def check_invariants(doc: Document, chunks, size: int) -> None:
    """Offsets into the document, text == document.text[start:end], at most `size` tokens, in
    order, and every non-space character of the document in some chunk."""
    covered = np.zeros(len(doc.text), dtype=bool)
    prev = -1
    for n, c in enumerate(chunks):
        assert c.chunk_id == f"{doc.doc_id}#{n}" and c.doc_id == doc.doc_id
        assert 0 <= c.start < c.end <= len(doc.text)
        assert c.text == doc.text[c.start:c.end] and c.text == c.text.strip()
        assert ntokens(c.text) <= size, (c.chunk_id, ntokens(c.text))
        assert c.start > prev
        prev = c.start
        covered[c.start:c.end] = True
    lost = [i for i, ch in enumerate(doc.text) if not covered[i] and not ch.isspace()]
    assert not lost, doc.text[lost[0]:lost[0] + 40]


@pytest.mark.parametrize("cls", STRATEGIES)
@pytest.mark.parametrize("size", [64, 300])
def test_every_strategy_keeps_offsets_and_size_on_the_paper(cls, size, paper):
    chunker = cls(size=size)
    chunks = chunker.chunk(paper)
    for doc in paper:
        check_invariants(doc, [c for c in chunks if c.doc_id == doc.doc_id], size)


def test_recursive_cuts_at_paragraphs_first(paper):
    doc = max(paper, key=lambda d: len(d.text))
    count = TokenCount(_backend("minilm").encode(doc.text, add_special_tokens=False).offsets)
    paragraph_starts = {0} | {i + 1 for i in range(len(doc.text) - 1) if doc.text[i] == "\n"}
    chunks = RecursiveChunker(size=300, overlap=0).chunk_text(doc)
    # a chunk starts inside a line only where its paragraph alone was over the size
    for c in chunks:
        if c.start not in paragraph_starts:
            line_start = doc.text.rfind("\n", 0, c.start) + 1
            line_end = doc.text.find("\n", c.start)
            assert count(line_start, len(doc.text) if line_end < 0 else line_end) > 300 or c.start > 0
    inside = sum(c.start not in paragraph_starts for c in chunks)
    assert inside < len(chunks) / 2
    tokens = TokenChunker(size=300, overlap=0).chunk_text(doc)
    assert sum(c.start not in paragraph_starts for c in tokens) > inside  # token windows ignore paragraphs


def test_recursive_overlap_repeats_whole_pieces_up_to_the_overlap(paper):
    doc = max(paper, key=lambda d: len(d.text))
    chunks = RecursiveChunker(size=120, overlap=40).chunk_text(doc)
    shared = [a.end - b.start for a, b in zip(chunks, chunks[1:]) if b.start < a.end]
    assert shared, "no consecutive chunks share text"
    for a, b in zip(chunks, chunks[1:]):
        if b.start < a.end:
            assert ntokens(doc.text[b.start:a.end]) <= 40
    no = RecursiveChunker(size=120, overlap=0).chunk_text(doc)
    assert all(b.start >= a.end for a, b in zip(no, no[1:]))


def test_sentences_are_whole_and_overlap_in_sentences(paper):
    doc = max(paper, key=lambda d: len(d.text))
    sents = sentence_spans(doc.text)
    starts, ends = {a for a, _ in sents}, {b for _, b in sents}
    chunks = SentenceChunker(size=200, overlap=1).chunk_text(doc)
    long = {(a, b) for a, b in sents if ntokens(doc.text[a:b]) > 200}
    for c in chunks:
        inside_long = any(a <= c.start and c.end <= b for a, b in long)
        assert inside_long or (c.start in starts and c.end in ends), c.text[:60]
    # the next chunk starts with the last sentence of the previous one, unless that sentence and
    # the next new one would not fit together
    repeated = 0
    for a, b in zip(chunks, chunks[1:]):
        if any(x <= a.start < y for x, y in long) or any(x <= b.start < y for x, y in long):
            continue
        last = max(s for s, e in sents if a.start <= s < a.end)
        if b.start != last:
            nxt = min((s, e) for s, e in sents if s >= a.end)
            assert b.start == nxt[0] and ntokens(doc.text[last:nxt[1]]) > 200
        repeated += b.start == last
    assert repeated > len(chunks) / 2
    zero = SentenceChunker(size=200, overlap=0).chunk_text(doc)
    assert all(b.start >= a.end for a, b in zip(zero, zero[1:]))


def test_markdown_headings_from_the_text_atx_and_setext_not_code():
    heads = text_headings(MARKDOWN)
    assert [(h.level, h.title) for h in heads] == [(1, "Installation"), (2, "Linux"), (2, "macOS"), (1, "Usage")]
    for h in heads:
        assert MARKDOWN[h.start:h.end] == h.title


def test_markdown_chunks_never_cross_a_heading_and_carry_the_path():
    doc = Document("guide.md", MARKDOWN)
    chunks = MarkdownChunker(size=300).chunk_text(doc)
    check_invariants(doc, chunks, 300)
    bounds = [s for s, _, _ in sections(MARKDOWN, text_headings(MARKDOWN))]
    for c in chunks:
        assert not any(c.start < b < c.end for b in bounds), c.text
    paths = {c.text.split("\n")[0]: c.heading for c in chunks}
    assert paths["## Linux"] == "Installation > Linux"
    assert paths["## macOS"] == "Installation > macOS"
    assert paths["Usage"] == "Usage"
    assert paths["Preamble line before any heading, a short one."] == ""
    linux = next(c for c in chunks if c.heading == "Installation > Linux")
    assert linux.search_text == "Installation > Linux\n" + linux.text  # what a retriever indexes
    assert "# this line is a comment" in linux.text  # the code block stays in its section
    # the whole page fits one 300-token chunk: recursive ignores the headings, markdown does not
    assert len(RecursiveChunker(size=300).chunk_text(doc)) == 1 and len(chunks) == 5
    assert all(c.heading == "" for c in MarkdownChunker(size=300, prepend_headings=False).chunk_text(doc))


def test_markdown_uses_the_parsed_headings_when_the_document_has_them():
    text = "Intro words here.\nSetup\nInstall it with pip. Then run it.\nUse\nCall the command."
    heads = (Heading(18, 23, 1, "Setup"), Heading(58, 61, 2, "Use"))
    assert text[18:23] == "Setup" and text[58:61] == "Use"
    chunks = MarkdownChunker(size=100).chunk_text(Document("d", text, headings=heads))
    assert [(c.text, c.heading) for c in chunks] == [
        ("Intro words here.", ""), ("Setup\nInstall it with pip. Then run it.", "Setup"), ("Use\nCall the command.", "Setup > Use")]


def test_markdown_without_headings_is_recursive(paper):
    doc = paper[1]
    assert not text_headings(doc.text)
    assert MarkdownChunker(size=150).chunk_text(doc) == RecursiveChunker(size=150).chunk_text(doc)


def _topic_vectors(texts):
    """A stand-in encoder: sentences about bees point one way, the rest another."""
    return np.array([[1.0, 0.05 * i] if "bee" in t else [0.05 * i, 1.0] for i, t in enumerate(texts)])


def test_semantic_breaks_where_the_topic_changes(monkeypatch):
    bees = "Bees dance to show the way. A bee visits many flowers. The bee hive keeps honey. "
    metal = "Mercury is a liquid metal. Its boiling point is high. Thermometers once held it."
    doc = Document("d", bees + metal)
    chunker = SemanticChunker(size=300, threshold=80)  # 5 distances: only the largest is above the 80th percentile
    monkeypatch.setattr(chunker, "_encode", _topic_vectors)
    chunks = chunker.chunk_text(doc)
    check_invariants(doc, chunks, 300)
    assert [c.text for c in chunks] == [bees.strip(), metal]


@pytest.mark.slow  # loads the bundled MiniLM (a few seconds)
def test_semantic_with_minilm_through_the_embedding_cache(tmp_path):
    from ragsweep.store.cache import Cache

    text = ("The Eiffel Tower is a wrought-iron tower in Paris. It was completed in 1889 for the World's Fair. "
            "Gustave Eiffel's company designed and built it. "
            "Photosynthesis converts light into chemical energy. Plants store that energy in glucose. "
            "Chlorophyll absorbs mostly blue and red light.")
    doc = Document("d", text)
    cache = Cache(tmp_path / "cache")
    first = SemanticChunker(size=300, threshold=80, device="cpu")
    chunks = first.chunk([doc], cache=cache)
    assert [c.text.split(".")[0] for c in chunks] == ["The Eiffel Tower is a wrought-iron tower in Paris", "Photosynthesis converts light into chemical energy"]
    assert first.stats["sentences_encoded"] == 6
    again = SemanticChunker(size=300, threshold=50, device="cpu")  # another config: new chunks, no new encoding
    again.chunk([doc], cache=cache)
    assert again.stats["sentences_encoded"] == 0


@pytest.mark.parametrize("cls, kwargs, field", [
    (RecursiveChunker, {"sise": 300}, "chunker.sise"),
    (RecursiveChunker, {"size": 0}, "chunker.size"),
    (RecursiveChunker, {"size": 100, "overlap": 100}, "chunker.overlap"),
    (RecursiveChunker, {"engine": "ray"}, "chunker.engine"),
    (SentenceChunker, {"overlap": 0.2}, "chunker.overlap"),
    (SemanticChunker, {"threshold": 150}, "chunker.threshold"),
    (MarkdownChunker, {"prepend_headings": "yes"}, "chunker.prepend_headings"),
])
def test_bad_config_names_the_field(cls, kwargs, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        cls(**kwargs)


def test_a_strategy_with_a_bad_field_fails_validation_before_any_work(compose_cfg):
    from ragsweep.pipeline.config import validate
    from ragsweep.errors import ConfigError

    with pytest.raises(ConfigError, match=r"chunker\.overlap"):
        validate(compose_cfg("chunker=sentences", "chunker.overlap=0.2"))
    with pytest.raises(ConfigError, match=r"chunker\.prepend_heading"):
        validate(compose_cfg("chunker=recursive", "+chunker.prepend_heading=true"))
    for name in ("tokens", "recursive", "sentences", "markdown", "semantic"):
        validate(compose_cfg(f"chunker={name}", "chunker.size=200"))


def test_each_strategy_and_setting_is_its_own_cache_entry(tmp_path):
    from ragsweep.corpus import chunkstore
    from ragsweep.store.cache import Cache

    doc = Document("guide.md", MARKDOWN)
    cache = Cache(tmp_path / "cache")
    got = {}
    for cls, kw in [(RecursiveChunker, {}), (MarkdownChunker, {}), (MarkdownChunker, {"prepend_headings": False}),
                    (TokenChunker, {})]:
        table = cls(size=40, **kw).chunk([doc], cache=cache)
        assert isinstance(table, chunkstore.ChunkTable)
        got[(cls.name, tuple(kw.items()))] = table
    assert len({t.path for t in got.values()}) == 4
    md = got[("markdown", ())]
    assert list(md) == MarkdownChunker(size=40).chunk_text(doc)  # headings round-trip through the file
    assert md.fingerprint != got[("markdown", (("prepend_headings", False),))].fingerprint
    texts = [t for part in md.iter_search_texts() for t in part]
    assert texts == [c.search_text for c in md] and any(t.startswith("Installation > Linux\n") for t in texts)
    assert [t for p in md.iter_texts() for t in p] == [c.text for c in md]
    again = MarkdownChunker(size=40).chunk([doc], cache=cache)  # warm: the same file
    assert again.path == md.path and list(again) == list(md)


def test_split_counts_tokens_from_one_tokenization():
    text = "alpha beta gamma. delta epsilon zeta.\n\nOne two three four five six seven eight nine ten."
    count = TokenCount(_backend("minilm").encode(text, add_special_tokens=False).offsets)
    for a, b in split(text, 0, len(text), count, 5):
        assert count(a, b) == ntokens(text[a:b]) <= 5
    assert count(0, len(text)) == ntokens(text)


def test_token_budget_keeps_the_best_hits_within_the_tokens():
    from ragsweep.rag.retriever.rerank import TokenBudgetReranker
    from ragsweep.types import Chunk, Hit, Query

    texts = ["one two three", "four five six seven eight", "nine ten", "eleven"]
    hits = [Hit(Chunk(f"c{i}", "d", 0, len(t), t), 1.0 - i / 10, i + 1) for i, t in enumerate(texts)]
    q = Query("q", "numbers")
    budget = TokenBudgetReranker(tokens=9)
    kept = budget.rerank([q], {"q": hits}, k=50)["q"]
    assert [h.chunk.chunk_id for h in kept] == ["c0", "c1"]  # 3 + 5 tokens; c2 would make 10
    assert [h.rank for h in kept] == [1, 2] and budget.stats["tokens_kept"] == 8
    assert [h.chunk.chunk_id for h in TokenBudgetReranker(tokens=1).rerank([q], {"q": hits}, k=50)["q"]] == ["c0"]
    assert len(TokenBudgetReranker(tokens=1000).rerank([q], {"q": hits}, k=3)["q"]) == 3  # k still caps
    with pytest.raises(ValueError, match=r"reranker\.tokens"):
        TokenBudgetReranker(tokens=0)


@pytest.mark.parametrize("backend", ["bm25s", "rank_bm25"])
def test_retrievers_index_the_heading_path_and_keep_the_documents_characters(backend):
    from ragsweep.rag.retriever.bm25 import BM25Retriever
    from ragsweep.types import Query

    doc = Document("guide.md", MARKDOWN)
    q = Query("q", "Installation")  # in the macOS chunk's heading path, not in its text
    found = {}
    for prepend in (True, False):
        chunks = MarkdownChunker(size=300, prepend_headings=prepend).chunk_text(doc)
        r = BM25Retriever(top_k=5, backend=backend)
        r.index(chunks)
        found[prepend] = {h.chunk.text.split("\n")[0]: h for h in r.search([q], k=5)["q"] if h.score > 0}
    assert "## macOS" in found[True] and "## macOS" not in found[False]
    mac = found[True]["## macOS"].chunk
    assert mac.text == MARKDOWN[mac.start:mac.end] and mac.heading == "Installation > macOS"
