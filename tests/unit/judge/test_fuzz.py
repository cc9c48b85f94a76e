"""Property tests: hostile text at the offset-keeping splitters and at the judge's parsers.

Random text (any unicode, empty, whitespace only, control characters, zero-width and combining
marks, abbreviations and numbers that look like sentence ends, and huge inputs) must never crash
``TokenChunker``, ``sentence_spans``/``split_sentences`` or the offline claim extractor, and every
offset they return is valid: ``0 <= start < end <= len(text)`` and ``text[start:end]`` is exactly
the chunk / sentence / claim. The judge's answer parsers take any string and return a parsed value
or None, never raise and never invent a label.
"""

from __future__ import annotations

import re

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragsweep.corpus.chunker import TokenChunker
from ragsweep.corpus.text import sentence_spans, split_sentences
from ragsweep.types import Document

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HUGE = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# pieces that stress sentence and token boundaries
PIECES = [
    "Dr.", "U.S.", "e.g.", "No. 14", "3.5", "6,650", "...", "?!", ";", " ; ", ". ", "! ", "? ",
    "\n", "\n\n", "\r\n", "\t", " ", "\u00a0", "\u2028", "\u2029", "\x85", "\x00", "\x07", "\x1b[31m",
    "\x7f", "\u200b", "\u200d", "\ufeff", "\u0301", "e\u0301", "\u202e", "\U0001f469\u200d\U0001f52c",
    "- item", "* item", "1) one", "2. two", "\u2022 bullet", "\u201cquoted.\u201d", "(paren.)",
    "The", "river", "is", "long", "and", "but", ",", "日本語のテキスト。", "İstanbul", "ß", "ﬁ", "\ud7ff",
    "\U0010ffff", "Ⅻ",
]
nasty = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=60).map("".join)
any_text = st.text(max_size=400) | nasty | st.sampled_from(["", " ", "\n\n\n", "\x00", ".", "\u200b" * 5])
huge_text = st.tuples(nasty.filter(lambda s: len(s) > 0), st.integers(min_value=2_000, max_value=20_000)).map(
    lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1] * 4]
)


def check_spans(text: str, spans: list[tuple[int, int]], trimmed: bool = True) -> None:
    """Ordered, disjoint, non-empty, in range; ``trimmed``: no whitespace at either end."""
    prev = 0
    for s, e in spans:
        assert isinstance(s, int) and isinstance(e, int)
        assert prev <= s < e <= len(text), (s, e, len(text))
        piece = text[s:e]
        assert piece and not piece[0].isspace()
        if trimmed:
            assert not piece[-1].isspace()
        prev = e


# -- sentences -------------------------------------------------------------------------------------
@FUZZ
@given(any_text)
def test_sentence_spans_are_valid_offsets(text):
    spans = sentence_spans(text)
    check_spans(text, spans)
    assert split_sentences(text) == [text[s:e] for s, e in spans]
    if text.strip() and any(c.isalnum() for c in text):
        assert spans, repr(text)


@HUGE
@given(huge_text)
def test_sentence_spans_on_huge_text(text):
    spans = sentence_spans(text)
    check_spans(text, spans)


# -- chunks ----------------------------------------------------------------------------------------
def check_chunks(docs: list[Document], chunks) -> None:
    by_doc: dict[str, list] = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    for d in docs:
        mine = by_doc.pop(d.doc_id, [])
        if not d.text.strip():
            assert mine == []
        starts = [c.start for c in mine]
        assert starts == sorted(starts)
        for i, c in enumerate(mine):
            assert c.chunk_id == f"{d.doc_id}#{i}"
            assert 0 <= c.start < c.end <= len(d.text)
            assert c.text == d.text[c.start : c.end]
    assert not by_doc, "chunks of unknown documents"


@pytest.fixture(scope="module")
def chunkers():
    return {(size, ov): TokenChunker(size=size, overlap=ov) for size, ov in ((1, 0), (3, 1), (8, 0.5), (40, 10))}


@FUZZ
@given(st.lists(any_text, min_size=1, max_size=5), st.sampled_from([(1, 0), (3, 1), (8, 0.5), (40, 10)]))
def test_token_chunker_offsets_are_valid(chunkers, texts, key):
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    check_chunks(docs, chunkers[key].chunk(docs))


@HUGE
@given(huge_text, st.sampled_from([(8, 0.5), (40, 10)]))
def test_token_chunker_on_huge_text(chunkers, text, key):
    doc = Document("big", text)
    chunks = chunkers[key].chunk([doc])
    check_chunks([doc], chunks)
    if any(c.isalnum() for c in text):
        assert chunks


def test_token_chunker_batch_boundaries_with_empty_documents(chunkers):
    # more documents than one tokenizer batch (64), empty ones in between
    docs = [Document(f"d{i}", "" if i % 7 == 0 else f"Document {i}.\x00 Text\u200b {i * 'é'} end.") for i in range(150)]
    chunks = chunkers[(3, 1)].chunk(docs)
    check_chunks(docs, chunks)
    assert {c.doc_id for c in chunks} == {d.doc_id for d in docs if d.text}


# -- claims ----------------------------------------------------------------------------------------
@FUZZ
@given(any_text, st.booleans(), st.integers(min_value=1, max_value=4))
def test_offline_claims_are_substrings_inside_sentences(text, split_clauses, min_words):
    from ragsweep.judge.claims import OfflineExtractor

    ex = OfflineExtractor(split_clauses=split_clauses, min_words=min_words)
    spans = ex.spans(text)
    check_spans(text, spans, trimmed=True)  # e.g. "0\x1f:" gives "0", no trailing \x1f
    sentences = sentence_spans(text)
    for s, e in spans:
        assert any(ss <= s and e <= se for ss, se in sentences)
    assert ex.extract(text) == [text[s:e] for s, e in spans]
    assert ex.extract_many([text, text]) == [ex.extract(text)] * 2


@HUGE
@given(huge_text)
def test_offline_claims_on_huge_text(text):
    from ragsweep.judge.claims import OfflineExtractor

    check_spans(text, OfflineExtractor().spans(text), trimmed=False)


# -- the judge's parsers: any answer -> a parsed value or None -------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    | st.sampled_from(["Entailment", "neutral", "Contradiction.", "ENTAILED", "maybe"]),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.sampled_from(["labels", "claims", "x"]) | st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)
answers = (
    any_text
    | json_values.map(json.dumps)
    | json_values.map(lambda v: json.dumps(v)[: max(0, len(json.dumps(v)) // 2)])  # truncated
    | json_values.map(lambda v: f"Sure! ```json\n{json.dumps(v)}\n``` hope it helps")
)


@FUZZ
@given(answers, st.integers(min_value=0, max_value=6))
def test_judge_parsers_never_raise_nor_guess(text, n):
    from ragsweep.judge.llm_extractor import parse_claims
    from ragsweep.judge.llm_judge import LABELS, parse_annotation, parse_json_object, parse_labels

    obj = parse_json_object(text)
    assert obj is None or isinstance(obj, dict)
    labels = parse_labels(text, n)
    assert labels is None or (len(labels) == n and all(lab in LABELS for lab in labels))
    if labels is not None and n:  # read from the JSON's labels or, as RefChecker reads them, the label words
        words = re.findall(r"\b(Entailment|Neutral|Contradiction)\b", text, re.IGNORECASE)
        assert (isinstance(obj, dict) and isinstance(obj.get("labels"), list) and len(obj["labels"]) == n) or len(words) == n
    for fmt in ("triplet", "sentence"):
        claims = parse_claims(text, fmt)
        assert claims is None or isinstance(claims, list)
    ann = parse_annotation(text)
    assert ann is None or isinstance(ann, dict)
