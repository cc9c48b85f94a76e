"""Evidence quotes located as spans of the document's own characters, and each filter on cases that
it must pass and must drop."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.corpus.dataset.locate import DocumentIndex
from ragsweep.corpus.sampling import Sample, Window
from ragsweep.judge.labels import ENTAILMENT, NEUTRAL
from ragsweep.pipeline.questions import filters as F
from ragsweep.pipeline.questions.grounding import both_sides, ground

TEXT = ("SQLite is an embedded database. By default, SQLite does a checkpoint automatically when the WAL file "
        "reaches a threshold size of 1000 pages. Readers never block writers.\n\nA later section talks about "
        "locking, which  uses   shared memory on the same host.")
OTHER = "PostgreSQL runs as a server process. It listens on port 5432 by default and forks a backend per connection."


def setup():
    docs = {"wal.html": DocumentIndex(TEXT), "pg.md": DocumentIndex(OTHER)}
    w = Window("wal.html", 0, 150, TEXT[:150], "§ WAL")
    v = Window("pg.md", 0, len(OTHER), OTHER, "§ Server")
    return docs, w, v


def test_quotes_become_spans_of_the_documents_own_text():
    docs, w, _ = setup()
    quotes = ["SQLite does a checkpoint automatically when the WAL file reaches a threshold size of 1000 pages.",
              "locking which uses shared memory on the same host",  # outside the passage, spacing and commas differ
              "Readers never block",  # three words: too short to be evidence
              "Nothing like this sentence appears anywhere in the document at all."]
    ev, counts = ground(quotes, Sample("single", (w,)), docs, match=0.8, min_words=4)
    assert counts == {"quotes": 4, "located": 2, "short": 1, "not_found": 1}
    assert [e.method for e in ev] == ["exact", "words/document"]
    for e in ev:
        assert TEXT[e.start : e.end] == e.quote
    assert ev[1].quote == "locking, which  uses   shared memory on the same host"


def test_a_reworded_quote_is_found_fuzzily_and_an_overlapping_one_counted_once():
    docs, w, _ = setup()
    ev, counts = ground(["By default SQLite makes a checkpoint automatically when the WAL file reaches 1000 pages",
                         "SQLite does a checkpoint automatically when the WAL file reaches"], Sample("single", (w,)), docs, 0.7, 4)
    assert counts["located"] == 2 and len(ev) == 1 and "checkpoint" in ev[0].quote


def test_two_passage_questions_need_evidence_on_both_sides():
    docs, w, v = setup()
    s = Sample("multi_hop", (w, v))
    ev, _ = ground(["Readers never block writers at all", "It listens on port 5432 by default"], s, docs, 0.8, 4)
    assert both_sides(ev, s)
    one, _ = ground(["It listens on port 5432 by default"], s, docs, 0.8, 4)
    assert not both_sides(one, s)


def test_copy_overlap_tells_a_copied_question_from_a_fair_one():
    evidence = ["By default, SQLite does a checkpoint automatically when the WAL file reaches a threshold size of 1000 pages."]
    copied = "When does SQLite do a checkpoint automatically when the WAL file reaches a threshold size?"
    fair = "At what WAL size does SQLite checkpoint on its own?"
    assert F.copy_overlap(copied, evidence) >= 0.6 > 0.3 >= F.copy_overlap(fair, evidence)
    assert F.copy_overlap(fair, []) == 0.0


def test_duplicates_keep_the_first_of_near_copies():
    v = np.array([[1, 0, 0], [0.99, 0.1, 0], [0, 1, 0], [0.98, 0.12, 0.01]], dtype=np.float32)
    out = F.duplicates(v, 0.9)
    assert [d for d, _ in out] == [None, 0, None, 0]
    assert out[2][1] == pytest.approx(0.0, abs=0.2)


def test_duplicates_with_minilm_on_real_questions(tmp_path):
    from ragsweep.store.cache import Cache

    qs = ["When does SQLite run a checkpoint?", "When does SQLite perform a checkpoint?", "Which port does PostgreSQL use?"]
    out = F.duplicates(F.embed(qs, Cache(str(tmp_path))), 0.9)
    assert [d for d, _ in out] == [None, 0, None]


def test_entailed_share_and_the_closed_book_rule():
    assert F.entailed_share([ENTAILMENT, NEUTRAL]) == 0.5 and F.entailed_share([ENTAILMENT, None]) is None
    assert F.answered_closed_book("At 1000 pages.", [ENTAILMENT])
    assert not F.answered_closed_book("At 1000 pages.", [ENTAILMENT, NEUTRAL])
    assert not F.answered_closed_book("I don't know.", [ENTAILMENT])  # an abstention answers nothing
    assert not F.answered_closed_book(None, [])
