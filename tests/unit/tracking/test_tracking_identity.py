"""Run identity lives in ragsweep.tracking: names, short params, one system key (no MLflow needed)."""

from __future__ import annotations

from omegaconf import OmegaConf

from ragsweep.tracking import SHORT_PARAMS, run_system_key, short_params, system_key, system_name
from ragsweep.tracking.identity import SYSTEM_KEY_TAG


def test_name_and_short_params_follow_the_config(compose_cfg):
    cfg = compose_cfg("retriever=tfidf", "retriever.top_k=3", "prompt=long_cot", "chunker.size=200")
    assert system_name(cfg) == f"tfidf-k3-c200o{cfg.chunker.overlap}-long_cot-{cfg.generator.name}"
    sp = short_params(cfg)
    assert list(sp) == list(SHORT_PARAMS)
    assert {k: sp[k] for k in ("retriever", "top_k", "chunk_size", "prompt")} == {"retriever": "tfidf", "top_k": 3, "chunk_size": 200, "prompt": "long_cot"}
    assert {"dataset", "limit", "chunk_overlap", "generator", "evaluator"} <= set(sp)
    assert short_params(compose_cfg("~evaluator"))["evaluator"] is None


def test_one_system_key(compose_cfg):
    a = OmegaConf.to_container(compose_cfg("run_name=x", "cache_dir=/tmp/a"), resolve=True)
    b = OmegaConf.to_container(compose_cfg("run_name=y", "cache_dir=/tmp/b"), resolve=True)
    c = OmegaConf.to_container(compose_cfg("retriever.top_k=7"), resolve=True)
    assert system_key(a) == system_key(b) != system_key(c)
    # a logged run: its tag wins; without one, its params (volatile ones aside) decide
    assert run_system_key({SYSTEM_KEY_TAG: "k1"}, {"top_k": "5"}) == "k1"
    assert run_system_key({}, {"top_k": "5", "run_name": "a"}) == run_system_key({}, {"top_k": "5", "run_name": "b"})
    assert run_system_key({}, {"top_k": "5"}) != run_system_key({}, {"top_k": "10"})


def test_what_a_command_may_spend_is_not_part_of_a_system(compose_cfg):
    """A budget, a dry run, the estimate's stated model or the judge's price change no system key, so a
    sweep run again with a higher budget finds the systems it already finished."""
    base = OmegaConf.to_container(compose_cfg("evaluator=llm"), resolve=True)
    spending = OmegaConf.to_container(compose_cfg(
        "evaluator=llm", "budget_usd=5", "sweep.budget_usd=20", "sweep.dry_run=true", "estimate.claims_per_answer=2",
        "evaluator.judge.price_per_1k_tokens=0.5"), resolve=True)
    assert system_key(base) == system_key(spending)
    assert system_key(base) != system_key(OmegaConf.to_container(compose_cfg("evaluator=llm", "evaluator.judge.seed=1"),
                                                                 resolve=True))
    # a config without the new keys (an older run's) has the key it always had
    old = {k: v for k, v in OmegaConf.to_container(compose_cfg(), resolve=True).items()
           if k not in ("budget_usd", "estimate", "sweep")}
    assert system_key(old) == system_key(OmegaConf.to_container(compose_cfg(), resolve=True))


def test_report_orders_values_as_the_sweep_gave_them():
    from ragsweep.analysis.report.frame import declared_order, sort_values

    order = declared_order("retriever=dense,bm25 retriever.top_k=2,4 +experiment=x", {"prompt": "long_cot,no_context"})
    assert order == {"retriever": ["dense", "bm25"], "top_k": ["2", "4"], "prompt": ["long_cot", "no_context"]}
    assert sort_values("retriever", ["bm25", "tfidf", "dense"], order) == ["dense", "bm25", "tfidf"]
    assert sort_values("top_k", [4, 2], order) == [2, 4]
    assert sort_values("prompt", ["b", "a"]) == ["a", "b"]


def test_the_chunking_strategy_is_in_the_run_name_and_short_params(compose_cfg):
    from ragsweep.pipeline import retrieval_only

    tokens = compose_cfg()
    assert "-c300o0.2-" in system_name(tokens) and short_params(tokens)["chunker"] == "tokens"
    rec = compose_cfg("chunker=recursive", "chunker.size=200")
    assert "-recursive200o0.2-" in system_name(rec) and short_params(rec)["chunker"] == "recursive"
    sent = compose_cfg("chunker=sentences", "generator=none")
    assert retrieval_only.run_name(sent) == "bm25-k4-sentences300o1-retrieval_only"
