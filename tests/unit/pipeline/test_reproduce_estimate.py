"""ragsweep-reproduce's estimate: each generating system costs by the context it reads, the prior is
the documented fit, finished sweeps rescale it, and anything unknown falls back to the flat rate."""

from __future__ import annotations

import pytest

from ragsweep.pipeline import reproduce as rp
from ragsweep.pipeline import reproduce_estimate as est


@pytest.fixture(autouse=True)
def no_dataset_loading(monkeypatch):
    monkeypatch.setattr(rp, "_dataset_size", lambda name: 300)


def test_a_generating_sweep_is_estimated_by_each_systems_context():
    wide = rp.plan(only=["ragchecker_prompt"], limit=10)[0]
    narrow = rp.plan(only=["ragchecker_prompt"], limit=10, overrides=["retriever.top_k=2"])[0]
    # default and optimized prompts read top_k * chunker.size tokens, the closed-book floor none
    assert wide.contexts == [6000, 6000, 0] and narrow.contexts == [600, 600, 0]
    rate = est.PRIOR_S
    assert est.estimate_s(wide, rate) > 4 * est.estimate_s(narrow, rate)  # 20 chunks: several times 2
    # the closed-book floor costs a alone
    floor = rp.Sweep("floor", False, 1, 10, contexts=[0])
    assert est.estimate_s(floor, rate) == pytest.approx(10 * est.GEN_A_S)
    # 20 chunks of 600 tokens: what the server's window holds; a token budget reranker caps it too
    chunk = rp.plan(only=["ragchecker_chunk_size"], limit=10)[0]
    assert sorted(chunk.contexts) == [0, 0, 0, 3000, 6000, 8192]
    budget = rp.plan(only=["ragchecker_prompt"], limit=10, overrides=["reranker=token_budget"])[0]
    assert budget.contexts == [1500, 1500, 0]


def test_a_chunker_without_size_counts_the_fallback(monkeypatch):
    monkeypatch.setattr(est, "FALLBACK_CHUNK_TOKENS", 100)
    est._CONTEXTS.clear()
    assert rp.plan(only=["ragchecker_prompt"], overrides=["~chunker.size"])[0].contexts == [2000, 2000, 0]
    est._CONTEXTS.clear()


def test_an_unknown_config_falls_back_to_the_flat_rate():
    assert est.contexts_of("ragchecker_prompt", {"retriever.top_k": ["interval(1, 20)"]}) is None  # no number
    assert est.contexts_of("no_such_experiment", {}) is None  # compose refuses it
    s = rp.Sweep("odd", False, 4, 10, contexts=None)
    assert est.estimate_s(s, est.PRIOR_S) == pytest.approx(4 * 10 * est.PRIOR_S["generation"])
    assert "context unknown 6.5" in est.describe_rates(est.PRIOR_S, 1.0, [s])


def test_finished_generating_sweeps_rescale_the_model(tmp_path):
    first, second = rp.plan(only=["ragchecker_prompt", "ragbench_case_study"], limit=10)
    state = rp.State(tmp_path / "state.json")
    assert est.gen_scale(state, [first, second]) == 1.0
    before = est.time_left([first, second], state)
    predicted = est.predicted_s(first.contexts, 10)
    state.update(first, status="finished", wall_s=round(predicted / 2, 1), directions=[])  # twice as fast
    assert state.get(first)["contexts"] == [6000, 6000, 0]  # recorded for a later run's rescale
    assert est.gen_scale(state) == pytest.approx(0.5, rel=1e-3)
    assert est.time_left([first, second], state) == pytest.approx(est.predicted_s(second.contexts, 10) / 2, rel=1e-3)
    assert est.time_left([first, second], state) < before / 2
    # a state.json an older version wrote (no contexts): the planned sweep of the same key gives them
    del state.sweeps[first.key]["contexts"]
    assert est.gen_scale(state) == 1.0 and est.gen_scale(state, [first, second]) == pytest.approx(0.5, rel=1e-3)
    # a finished retrieval-only sweep does not move the generating side's scale
    retro = rp.plan(only=["ragchecker_topk_retrieval"], limit=10)[0]
    state.update(retro, status="finished", wall_s=1000.0, directions=[])
    assert est.gen_scale(state, [first, second]) == pytest.approx(0.5, rel=1e-3)


def test_the_generation_prior_is_the_documented_fit():
    assert est.fit_b() == pytest.approx(est.GEN_B_S, abs=0.005)
    assert est.GEN_A_S == pytest.approx(7.0 / 6)  # the closed-book floor: 7 s for 6 answers


def test_answers_in_the_cache_are_not_estimated_as_generated(tmp_path):
    # a closed-book floor and a 6,000-token system, 10 questions: 4 and 10 of their answers cached
    assert est.predicted_s([0, 6000], 10, [4, 10]) == pytest.approx(
        6 * est.GEN_A_S + 14 * est.CACHED_S)
    assert est.predicted_s([0, 6000], 10, [20, 0]) == pytest.approx(
        10 * est.CACHED_S + 10 * (est.GEN_A_S + 6 * est.GEN_B_S))  # more cached than asked: none left
    assert est.predicted_s([0, 6000], 10, [1]) == est.predicted_s([0, 6000], 10)  # not one per system: ignored
    sweep = rp.plan(only=["ragchecker_prompt"], limit=10)[0]
    cold = est.estimate_s(sweep, est.PRIOR_S)
    sweep.cached = [10, 10, 10]
    assert est.estimate_s(sweep, est.PRIOR_S) == pytest.approx(30 * est.CACHED_S)
    assert est.estimate_s(sweep, est.PRIOR_S) < cold / 20
    flat = rp.Sweep("odd", False, 2, 10, contexts=None, cached=[10, 5])
    assert est.estimate_s(flat, est.PRIOR_S) == pytest.approx(5 * est.PRIOR_S["generation"])
    # the rescale compares a finished sweep's wall time with what it generated, not with every question
    state = rp.State(tmp_path / "state.json")
    sweep.cached = [5, 5, 5]
    state.update(sweep, status="running")
    sweep.cached = [10, 10, 10]  # measured again when resumed: the first count stays, it is what the wall time paid for
    state.update(sweep, status="finished", wall_s=round(est.predicted_s(sweep.contexts, 10, [5, 5, 5]), 1), directions=[])
    assert state.get(sweep)["cached"] == [5, 5, 5]
    assert est.gen_scale(state) == pytest.approx(1.0, rel=1e-3)


def test_the_cache_is_read_question_by_question_only_when_it_holds_answers(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from ragsweep.pipeline import sweep_spend
    from ragsweep.store.cache import Cache

    def no_retrieval(configs):
        raise AssertionError("a cache without answers needs no retrieval")

    monkeypatch.setattr(sweep_spend, "_works", no_retrieval)
    choices = rp.choices_of(rp.experiment_node("ragchecker_prompt"))
    ovs = [f"cache_dir={tmp_path}", "dataset.limit=3"]
    import ragsweep.conf as conf

    composed = []
    real_compose = conf.compose
    monkeypatch.setattr(conf, "compose", lambda overrides: composed.append(overrides) or real_compose(overrides))
    assert est.cached_answers("ragchecker_prompt", choices, ovs) == [0, 0, 0]
    assert len(composed) == 1  # a cold cache: one system's config tells where the cache is, the rest are not composed
    cache = Cache(str(tmp_path))
    cache.put("generation", "k1", {"text": "an answer"})
    cache.put("generation", "k3", {"text": "another"})
    cache.close()
    seen = []

    def works(configs):
        seen.extend(c.prompt.name for c in configs)
        return [SimpleNamespace(keys=["k1", "k2", "k3"]), SimpleNamespace(keys=["k4", "k5", "k6"]),
                SimpleNamespace(keys=["k1", "k5", "k6"])]

    monkeypatch.setattr(sweep_spend, "_works", works)
    assert est.cached_answers("ragchecker_prompt", choices, ovs) == [2, 0, 1]
    assert seen == ["ragchecker_default", "ragchecker_optimized", "no_context"]  # the sweep's systems, in its order
    monkeypatch.setattr(sweep_spend, "_works", lambda configs: [])  # e.g. generator=none: not known
    assert est.cached_answers("ragchecker_prompt", choices, ovs) is None
