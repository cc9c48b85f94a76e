"""The offline checker: labels, determinism, config validation, caching (offline).

Behaviour tests run twice: lexical-only (``model: none``, fast) and with the bundled MiniLM
(marked slow: importing sentence-transformers and loading the model take several CPU seconds).
"""

from __future__ import annotations

import json

import pytest

from ragsweep.judge.offline import FEATURES, PARAMS_PATH, OfflineChecker, numbers, split_claims, stem

REF = (
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. "
    "It is 330 metres tall and was designed by the engineering company of Gustave Eiffel. "
    "The tower is not open at night during winter."
)


@pytest.fixture(scope="module", params=["none", pytest.param("minilm", marks=pytest.mark.slow)])
def checker(request) -> OfflineChecker:
    return OfflineChecker(model=request.param)


def test_exact_sentence_is_entailment(checker):
    claim = "It is 330 metres tall and was designed by the engineering company of Gustave Eiffel."
    assert checker.check([claim], REF) == ["Entailment"]
    assert checker.score_pairs([(claim, REF)])[0] >= checker.threshold


def test_paraphrase_scores_above_unrelated(checker):
    para, unrelated = checker.score_pairs([
        ("The Eiffel Tower was finished in 1889.", REF),
        ("Bananas are rich in potassium and grow in tropical climates.", REF),
    ])
    assert para > unrelated


def test_unrelated_is_neutral(checker):
    assert checker.check(["Bananas are rich in potassium and grow in tropical climates."], REF) == ["Neutral"]


def test_changed_number_is_not_entailment(checker):
    labels = checker.check(["The Eiffel Tower was completed in 1925 for the World's Fair in Paris."], REF)
    assert labels[0] != "Entailment"
    assert labels[0] == "Contradiction"  # same sentence, another year: concrete evidence


def test_negation_flip_is_not_entailment(checker):
    lab = checker.check(["The tower is open at night during winter."], REF)[0]
    assert lab != "Entailment"


def test_deterministic(checker):
    pairs = [("The tower is 330 metres tall.", REF), ("Paris hosted the World's Fair.", REF)]
    a = checker.score_pairs(pairs)
    b = checker.score_pairs(pairs)
    c = OfflineChecker(model=checker.config.model).score_pairs(pairs)
    assert a == b == c
    assert all(0.0 <= p <= 1.0 for p in a)


def test_empty_and_odd_inputs(checker):
    assert checker.score_pairs([]) == []
    assert checker.check([], REF) == []
    out = checker.check_pairs([("", REF), ("Something.", ""), ("   ", "   ")])
    assert len(out) == 3 and set(out) <= {"Entailment", "Neutral", "Contradiction"}


def test_lexical_only_mode_needs_no_model():
    ck = OfflineChecker(model="none")
    assert ck.check(["The Eiffel Tower was completed in 1889 for the World's Fair in Paris."], REF) == ["Entailment"]
    assert ck.check(["Bananas are rich in potassium."], REF) == ["Neutral"]
    assert ck._model is None


def test_threshold_override():
    ck = OfflineChecker(model="none", threshold=0.0)
    assert ck.threshold == 0.0
    assert ck.check(["Bananas grow in tropical climates."], REF) == ["Entailment"]
    assert OfflineChecker(model="none").threshold == OfflineChecker(model="none").params()["threshold"]


def test_answer_threshold_applies_to_answer_references():
    ck = OfflineChecker(model="none")
    head = ck.params()
    assert ck.answer_threshold == head["answer_threshold"] < ck.threshold == head["threshold"]
    assert ck.threshold_for("answer") == ck.answer_threshold and ck.threshold_for() == ck.threshold
    claim = "Bananas grow well in warm tropical regions with plenty of rain and sun."
    p = ck.score_pairs([(claim, REF)])[0]
    mid = OfflineChecker(model="none", threshold=min(1.0, p + 0.01), answer_threshold=max(0.0, p - 0.01))
    assert mid.check_pairs([(claim, REF)]) == ["Neutral"]
    assert mid.check_pairs([(claim, REF)], kind="answer") == ["Entailment"]
    assert mid.check([claim], REF, kind="answer") == ["Entailment"]
    with pytest.raises(ValueError, match="kind"):
        mid.check_pairs([(claim, REF)], kind="chunk")


def test_cache_id_names_the_parameters(tmp_path):
    other = tmp_path / "params.json"
    data = json.loads(PARAMS_PATH.read_text())
    data["models"]["lexical"]["threshold"] = 0.5
    other.write_text(json.dumps(data))
    a, b = OfflineChecker(model="none"), OfflineChecker(model="none", params=str(other))
    assert a.cache_id["params_sha256"] != b.cache_id["params_sha256"]  # a retrained head is a new checker
    assert a.cache_id == OfflineChecker(model="none").cache_id


@pytest.mark.parametrize(
    "kwargs, field",
    [({"threshold": 1.5}, "threshold"), ({"answer_threshold": -0.1}, "answer_threshold"), ({"threshold": "high"}, "threshold"), ({"window": 0}, "window"),
     ({"batch_size": 0}, "batch_size"), ({"device": "tpu"}, "device"), ({"contradiction": "yes"}, "contradiction"),
     ({"params": "/no/such/file.json"}, "params"), ({"tresh": 0.5}, "tresh"), ({"model": ""}, "model")],
)
def test_config_errors_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"evaluator.checker.{field}"):
        OfflineChecker(**kwargs)


@pytest.mark.slow
def test_embedding_cache(tmp_path):
    from ragsweep.store.cache import Cache

    checker = OfflineChecker()
    cache = Cache(tmp_path / "c")
    pairs = [("A completely new claim about towers.", REF)]
    first = checker.score_pairs(pairs, cache=cache)
    assert cache.count("embeddings") >= 2
    hits = cache.stats["embeddings/hits"]
    assert checker.score_pairs(pairs, cache=cache) == first
    assert cache.stats["embeddings/hits"] > hits


def test_shipped_params_small_and_consistent():
    assert PARAMS_PATH.stat().st_size < 1_000_000
    data = json.loads(PARAMS_PATH.read_text())
    for head in data["models"].values():
        assert set(head["features"]) <= set(FEATURES)
        assert 0.0 < head["threshold"] < 1.0 and 0.0 < head["answer_threshold"] <= head["threshold"]


def test_helpers():
    assert numbers("It cost $7,000 in 1999, or 3.50 per unit [4].") == {"7000", "1999", "3.5"}
    assert numbers("the 2018-19 season") >= {"2018", "2019"}
    assert stem("running") == stem("runs") == "run"
    assert stem("studies") == stem("study")


def test_split_claims():
    text = "Corpora are built from unlabeled text [4]. 1. **Books**: a corpus of 7,000 books, which covers many genres and styles. Yes."
    assert split_claims(text) == [
        "Corpora are built from unlabeled text [4].",
        "**Books**: a corpus of 7,000 books, which covers many genres and styles.",
        "Yes.",
    ]
    clauses = split_claims("The museum opened in 1901 in the old town hall, and it moved to a new building designed by Aalto in 1985.", "clause")
    assert len(clauses) == 2 and clauses[1].startswith("and it moved")
    from ragsweep.judge.claims import OfflineExtractor

    assert clauses == OfflineExtractor().extract(  # the default evaluator's claims
        "The museum opened in 1901 in the old town hall, and it moved to a new building designed by Aalto in 1985.")
    with pytest.raises(ValueError):
        split_claims("x", "word")
