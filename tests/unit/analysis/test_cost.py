"""run_cost: tokens, calls and seconds from a run's metrics; money only where a price is set."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from ragsweep.analysis.cost import run_cost

METRICS = {
    "generator/prompt_tokens": 1000, "generator/completion_tokens": 200, "generator/calls": 10,
    "generator/cache_hits": 5, "judge/prompt_tokens": 3000, "judge/completion_tokens": 500, "judge/calls": 30,
    "time/load_s": 0.5, "time/generate_s": 10.25, "time/evaluate_s": 4.0, "retrieval/recall_at_k": 0.9,
}


def _cfg(price=None):
    return OmegaConf.create({"generator": {"name": "x", "price_per_1k_tokens": price}})


def test_counts_tokens_calls_and_seconds_without_money_when_unpriced():
    out = run_cost(METRICS, _cfg())
    assert out == {
        "cost/prompt_tokens": 4000.0, "cost/completion_tokens": 700.0, "cost/generation_calls": 10.0,
        "cost/judge_calls": 30.0, "cost/calls": 40.0, "cost/wall_s": 14.75,
    }


def test_money_is_the_generators_tokens_times_the_price():
    assert run_cost(METRICS, _cfg(0.5))["cost/usd"] == pytest.approx((1000 + 200) * 0.5 / 1000)
    split = run_cost(METRICS, _cfg({"prompt": 0.15, "completion": 0.6}))["cost/usd"]
    assert split == pytest.approx((1000 * 0.15 + 200 * 0.6) / 1000)


def test_a_run_served_from_the_cache_costs_no_calls():
    warm = {"generator/calls": 0, "generator/cache_hits": 20, "time/generate_s": 0.01}
    out = run_cost(warm, OmegaConf.create({"generator": {"name": "x"}}))
    assert out["cost/calls"] == 0 and out["cost/prompt_tokens"] == 0 and "cost/usd" not in out


def test_half_priced_mapping_is_an_error():
    with pytest.raises(ValueError, match="price_per_1k_tokens"):
        run_cost(METRICS, _cfg({"prompt": 0.1}))


def test_the_judge_has_its_own_price_and_cost_usd_is_both():
    cfg = OmegaConf.create({"generator": {"name": "x", "price_per_1k_tokens": {"prompt": 0.15, "completion": 0.6}},
                            "evaluator": {"judge": {"price_per_1k_tokens": 1.0}}})
    out = run_cost(METRICS, cfg)
    assert out["cost/usd_generation"] == pytest.approx((1000 * 0.15 + 200 * 0.6) / 1000)
    assert out["cost/usd_judge"] == pytest.approx((3000 + 500) * 1.0 / 1000)
    assert out["cost/usd"] == pytest.approx(out["cost/usd_generation"] + out["cost/usd_judge"])
    judge_only = run_cost(METRICS, OmegaConf.create({"generator": {"name": "x"},
                                                     "evaluator": {"judge": {"price_per_1k_tokens": 1.0}}}))
    assert judge_only["cost/usd"] == judge_only["cost/usd_judge"] and "cost/usd_generation" not in judge_only
