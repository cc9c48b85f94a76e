"""Claim extraction: the offline splitter, LLM answer parsing, cached extraction."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsweep.store.cache import Cache
from ragsweep.judge.claims import (
    OfflineExtractor,
    claim_text,
    extract_cached,
    extractor_id,
)
from ragsweep.judge.llm_extractor import parse_claims


def test_offline_sentences_and_clauses():
    ex = OfflineExtractor()  # clause_rule "facts": every cut point, pieces merged up to 4 content words
    text = (
        "The Nile is about 6,650 km long, and it flows through eleven countries. "
        "Dr. Smith visited Paris, London, and Berlin; the trip took three weeks in total. Yes."
    )
    assert ex.extract(text) == [
        "The Nile is about 6,650 km long",
        "and it flows through eleven countries.",
        "Dr. Smith visited Paris, London, and Berlin",
        "the trip took three weeks in total.",
        "Yes.",
    ]
    # pieces with fewer content words merge forward; a short tail joins the last claim
    assert ex.extract("The museum, which opened in 1901 in Vienna, holds paintings, drawings and old maps.") == [
        "The museum, which opened in 1901 in Vienna",
        "holds paintings, drawings and old maps.",
    ]
    assert ex.extract("Paris, London, and Berlin are big.") == ["Paris, London, and Berlin are big."]
    # a sentence with no content word (a list marker, a citation) is not a claim
    assert ex.extract("1. Rome is the capital of Italy. [4]") == ["Rome is the capital of Italy."]
    conj = OfflineExtractor(clause_rule="conjunctions")  # cut only where a conjunction joins two clauses
    assert conj.extract(text) == [
        "The Nile is about 6,650 km long",
        "it flows through eleven countries.",
        "Dr. Smith visited Paris, London, and Berlin",
        "the trip took three weeks in total.",
        "Yes.",
    ]
    assert conj.extract("Paris, London, and Berlin are big.") == ["Paris, London, and Berlin are big."]
    assert conj.extract("It rained hard all day, but the match went ahead anyway.") == [
        "It rained hard all day",
        "the match went ahead anyway.",
    ]
    assert OfflineExtractor(split_clauses=False).extract("Cats eat fish often, and dogs eat meat daily. Birds sing.") == [
        "Cats eat fish often, and dogs eat meat daily.",
        "Birds sing.",
    ]
    assert ex.extract("") == [] and ex.extract("   \n\n ") == [] and ex.extract("...") == []


def test_offline_is_deterministic_and_config_is_validated():
    text = "One two three four; five six seven eight. Nine ten eleven, although twelve thirteen fourteen."
    a, b = OfflineExtractor(), OfflineExtractor()
    assert a.extract(text) == b.extract(text) == a.extract(text)
    assert extractor_id(a) == extractor_id(b) != extractor_id(OfflineExtractor(min_words=5))
    with pytest.raises(ValueError, match="evaluator.extractor.min_words"):
        OfflineExtractor(min_words=0)
    with pytest.raises(ValueError, match="evaluator.extractor.min_content_words"):
        OfflineExtractor(min_content_words=0)
    with pytest.raises(ValueError, match="clause_rule must be one of facts, conjunctions"):
        OfflineExtractor(clause_rule="atoms")
    assert extractor_id(a) != extractor_id(OfflineExtractor(clause_rule="conjunctions"))
    with pytest.raises(ValueError, match="evaluator.extractor.spilt_clauses: unknown field"):
        OfflineExtractor(spilt_clauses=False)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab ,;.!?\n\t:-'\"()Aé1\u00a0\u200b")) | st.characters(), max_size=200))
def test_offline_spans_are_safe_offsets(text):
    for ex in (OfflineExtractor(min_content_words=1), OfflineExtractor(clause_rule="conjunctions", min_words=1)):
        spans = ex.spans(text)
        prev = 0
        for s, e in spans:
            assert prev <= s < e <= len(text)
            piece = text[s:e]
            assert piece == piece.strip() and piece
            prev = e
        assert ex.extract(text) == [text[s:e] for s, e in spans]


def test_claim_text():
    assert claim_text("A claim.") == "A claim."
    assert claim_text(["Nile", "is", "a river"]) == "Nile is a river"
    with pytest.raises(TypeError):
        claim_text(3)


def test_parse_claims():
    assert parse_claims('{"claims": [["Nile", "is", "long"]]}', "triplet") == [["Nile", "is", "long"]]
    assert parse_claims('```json\n{"claims": []}\n```', "triplet") == []
    assert parse_claims('Sure! {"claims": [" The Nile is long. "]} Bye.', "sentence") == ["The Nile is long."]
    for bad in ('{"claims": [["Nile", "is"]]}', '{"claims": [["Nile", "is", ""]]}', "no json", '{"claim": []}',
                '{"claims": "x"}', None, '[1, 2]'):
        assert parse_claims(bad, "triplet") is None, bad
    assert parse_claims('{"claims": [""]}', "sentence") is None
    assert parse_claims('{"claims": [["a", "b", "c"]]}', "sentence") is None


class _Flaky:
    """Extractor stand-in: fails (None) on texts containing 'FAIL'; counts texts it saw."""

    uses_question = True
    cache_id = {"extractor": "flaky"}

    def __init__(self):
        self.seen: list[str] = []

    def extract_many(self, texts, questions):
        self.seen.extend(texts)
        return [None if "FAIL" in t else [f"{q}: {t}"] for t, q in zip(texts, questions)]


def test_extract_cached_shares_and_never_caches_failures(tmp_path):
    cache = Cache(tmp_path)
    ex = _Flaky()
    stats = Counter()
    out = extract_cached(ex, ["gt", "resp", "gt", "FAIL"], ["q", "q", "q", "q"], cache, stats)
    assert out == [["q: gt"], ["q: resp"], ["q: gt"], None]
    assert ex.seen == ["gt", "resp", "FAIL"]  # duplicates extracted once
    assert stats["extractions"] == 3 and stats["extraction_failures"] == 1 and stats["cache_hits"] == 0
    out[0].append("mutated")  # results are copies
    ex2 = _Flaky()
    stats2 = Counter()
    again = extract_cached(ex2, ["gt", "FAIL", "resp"], ["q", "q", "q"], cache, stats2)
    assert again == [["q: gt"], None, ["q: resp"]]
    assert ex2.seen == ["FAIL"]  # only the failure is retried
    assert stats2["cache_hits"] == 2
    # the question is part of the key when the extractor uses it
    extract_cached(ex2, ["gt"], ["other q"], cache, Counter())
    assert ex2.seen[-1] == "gt"


def test_extract_cached_without_cache():
    ex = OfflineExtractor()
    assert extract_cached(ex, ["Cats eat fish. Dogs bark.", ""], None, None) == [["Cats eat fish.", "Dogs bark."], []]


def test_offline_short_answers_are_one_claim_read_with_the_question():
    ex = OfflineExtractor()
    assert ex.uses_question  # the question is part of the claims' cache key
    assert ex.extract("No.", "Is Paris in Spain?") == ["Is Paris in Spain? No."]
    assert ex.extract("1997.", "When was the treaty signed") == ["When was the treaty signed: 1997."]
    assert ex.extract("  Paris ", "What is the capital of France?") == ["What is the capital of France? Paris"]
    # before: no claim at all (no content word with a letter) - and still so without a question
    assert ex.extract("No.") == [] and ex.extract("1997.", None) == [] and ex.extract("1997.", "  ") == []
    # a longer answer keeps its own claims (substrings of the text); an empty one has none
    assert ex.extract("Paris is the capital of France.", "Which city?") == ["Paris is the capital of France."]
    assert ex.extract("", "Which city?") == [] and ex.extract("...", "Which city?") == []
    assert OfflineExtractor(short_answers=False).extract("No.", "Is Paris in Spain?") == []
    assert OfflineExtractor(short_answers=False).uses_question is False
    # through the pipeline's seam: the question reaches the extractor
    out = extract_cached(ex, ["No.", "No."], ["Is A B?", "Is C D?"], None)
    assert out == [["Is A B? No."], ["Is C D? No."]]
    with pytest.raises(ValueError, match="short_answer_words"):
        OfflineExtractor(short_answer_words=0)
