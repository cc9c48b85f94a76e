"""Contracts: every checker and extractor YAML of the config groups passes the same assertions
(the LLM ones against the fake OpenAI server), and every registered metric is well described and
in range on the golden fixture records."""

from __future__ import annotations

import json
import math

import pytest

from support import FIXTURES as SUPPORT_FIXTURES
from fake_openai_server import FakeOpenAIServer, ok  # noqa: E402
from ragsweep.judge import components  # noqa: E402
from ragsweep.judge.components import Checker, Extractor  # noqa: E402
from ragsweep.judge.labels import LABELS, Label  # noqa: E402
from ragsweep.judge.metrics import registry  # noqa: E402

FIXTURES = SUPPORT_FIXTURES / "ragchecker"
GOLDEN = json.loads((FIXTURES / "examples_checking_outputs.json").read_text(encoding="utf-8"))["results"]

PAIRS = [
    ("Paris is the capital of France.", "Paris is the capital of France. It is large."),
    ("Rome is in Spain.", "Rome is the capital of Italy."),
    ("The Nile is long.", ""),
]
TEXTS = ["Paris is in France, and it has many museums. Rome is in Italy.", ""]


def _fake_judge(body, index):
    prompt = body["messages"][-1]["content"]
    if "### Claims:\n" in prompt:  # RefChecker's joint checking prompt: one label per claim line
        n = sum(1 for line in prompt.split("### Claims:\n", 1)[1].split("\n\n")[0].splitlines() if line.strip())
        return ok("\n".join(["Entailment"] * n))
    return ok(json.dumps({"claims": [["Paris", "is in", "France"], ["Rome", "is in", "Italy"]]}))


@pytest.fixture
def judge():
    from ragsweep.judge.llm_judge import Judge
    from ragsweep.rag.generator.server import ExternalServer

    with FakeOpenAIServer(responder=_fake_judge) as fake:
        j = Judge(server=ExternalServer(base_url=fake.base_url, model="fake", api_key_env=None),
                  max_retries=0, timeout_s=10)
        yield j
        j.close()


def _offline_capable(group):
    # nli needs a hub model; trained needs its weights file, which ships only once it is measured to
    # win (tests/unit/judge/test_trained.py checks the same contract with a weights file of its own)
    from ragsweep.judge.trained import WEIGHTS_PATH

    return [n for n in components.names(group) if n != "nli" and (n != "trained" or WEIGHTS_PATH.is_file())]


def test_groups_are_the_yaml_files():
    assert set(components.names("checker")) >= {"offline", "llm", "nli"}
    assert set(components.names("extractor")) >= {"offline", "llm"}
    for group in ("checker", "extractor"):
        for name in components.names(group):
            spec = components.group_spec(group, name)
            assert "_target_" in spec and "mode" not in spec
            components.validate(group, spec)  # options fit the class's Config


@pytest.mark.parametrize("name", _offline_capable("checker"))
def test_every_checker_keeps_the_contract(name, judge, tmp_path):
    checker = components.build("checker", name, judge)
    assert isinstance(checker, Checker)
    labels = checker.check_pairs(PAIRS[:2])
    assert len(labels) == 2 and all(lab is None or lab in LABELS for lab in labels)
    assert labels[0] == Label.ENTAILMENT
    if hasattr(checker, "score_pairs"):
        p = checker.score_pairs(PAIRS[:2])
        assert len(p) == 2 and all(0.0 <= float(v) <= 1.0 for v in p)
    assert components.component_id(checker) is not None
    # through the cache seam: a blank reference is Neutral without a check, labels cached
    from ragsweep.store.cache import Cache
    from ragsweep.judge.checking import check_cached

    cache = Cache(tmp_path)
    first = check_cached(checker, PAIRS, cache)
    assert first[2] == Label.NEUTRAL and first[0] == labels[0]
    assert check_cached(checker, PAIRS, cache) == first
    assert cache.stats["entailment/hits"] >= 2


@pytest.mark.parametrize("name", components.names("extractor"))
def test_every_extractor_keeps_the_contract(name, judge, tmp_path):
    from ragsweep.store.cache import Cache
    from ragsweep.judge.claims import claim_text, extract_cached

    extractor = components.build("extractor", name, judge)
    assert isinstance(extractor, Extractor) and isinstance(extractor.uses_question, bool)
    out = extractor.extract_many(TEXTS, ["Where is Paris?", "q"])
    assert len(out) == 2 and out[1] == []
    assert out[0] and all(claim_text(c).strip() for c in out[0])
    cache = Cache(tmp_path)
    assert extract_cached(extractor, TEXTS, ["Where is Paris?", "q"], cache) == out
    assert extract_cached(extractor, TEXTS, ["Where is Paris?", "q"], cache) == out
    assert cache.stats["claims/hits"] == 2


def test_components_needing_a_judge_say_so():
    assert components.needs_judge("checker", "llm") and components.needs_judge("extractor", "llm")
    assert not components.needs_judge("checker", "offline") and not components.needs_judge("extractor", "offline")
    with pytest.raises(ValueError, match="needs a judge"):
        components.build("checker", "llm")


def test_every_metric_is_described_and_in_range_on_the_golden_records():
    metrics = list(registry.all_metrics())
    names = {m.name for m in metrics}
    for family in ("ragchecker", "trace", "ragas", "retrieval", "baseline"):
        assert any(m.family == family for m in metrics), family
    assert {f"retrieval/{n}_at_k" for n in ("recall", "mrr", "ndcg", "precision", "hit")} <= names
    for m in metrics:
        assert m.scale > 0 and m.higher_is_better in (True, False, None) and isinstance(m.needs_gt, bool)
        assert registry.find(m.name) is m and registry.get(m.name) is m
        if m.per_question is None:
            continue
        for rec in GOLDEN:
            v = m.per_question(rec)
            assert isinstance(v, float) and (math.isnan(v) or 0.0 <= v <= m.scale), (m.name, v)
    # golden records: RAGChecker per-question values are defined there
    assert not math.isnan(registry.get("ragchecker/overall/precision").per_question(GOLDEN[0]))


def test_the_aggregate_is_the_mean_of_defined_values_with_its_count():
    from ragsweep.analysis.scoring import score_run

    recs = [{"query_id": str(i), "metrics": {"ragas/faithfulness": v}} for i, v in enumerate((1.0, float("nan"), 0.5))]
    agg = score_run(recs, ["ragas"]).metrics
    assert agg["ragas/faithfulness"] == 0.75 and agg["ragas/faithfulness/n"] == 2
    assert math.isnan(agg["ragas/context_relevance"])
