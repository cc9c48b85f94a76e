"""What one run cost: model tokens, model calls, wall seconds and, for a priced API, money.

:func:`run_cost` reads the metrics a run already logs (``generator/*``, ``judge/*``,
``time/*_s``) and returns the ``cost/*`` metrics the search and the report use as an objective:

- ``cost/prompt_tokens``, ``cost/completion_tokens``: tokens of the model calls this run made
  (generation and LLM judge); work served from the cache made no call and costs nothing, so a
  system promoted to a larger rung pays only for its new questions;
- ``cost/generation_calls``, ``cost/judge_calls``: HTTP calls to the generator / the judge;
- ``cost/calls``: both together (the search benchmark's budget unit);
- ``cost/wall_s``: the run's stage seconds summed (``time/*_s``);
- ``cost/usd_generation``: the generator's tokens at ``generator.price_per_1k_tokens``, and
  ``cost/usd_judge``: the LLM judge's at ``evaluator.judge.price_per_1k_tokens`` (a number, or
  ``{prompt: p, completion: c}`` pricing the two kinds apart), each only where its price is set;
- ``cost/usd``: their sum, wherever either is priced (an unpriced model, a local one, counts 0).
  Unset (null, the default) everywhere, no money metric is logged.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ragsweep.rag.generator.price import Price, parse_price

COST_METRICS = ("cost/prompt_tokens", "cost/completion_tokens", "cost/generation_calls", "cost/judge_calls",
                "cost/calls", "cost/wall_s", "cost/usd", "cost/usd_generation", "cost/usd_judge")


def _num(metrics: Mapping[str, Any], key: str) -> float:
    v = metrics.get(key)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def _node(cfg: Any, *path: str) -> Any:
    for key in path:
        cfg = cfg.get(key) if cfg is not None and hasattr(cfg, "get") else None
    return cfg


def prices(cfg: Any) -> dict[str, Price | None]:
    """The generator's and the judge's price from a run's config (None: unpriced)."""
    return {
        "generation": parse_price(_node(cfg, "generator", "price_per_1k_tokens"), "generator.price_per_1k_tokens"),
        "judge": parse_price(_node(cfg, "evaluator", "judge", "price_per_1k_tokens"),
                             "evaluator.judge.price_per_1k_tokens"),
    }


def run_cost(metrics: Mapping[str, Any], cfg: Any) -> dict[str, float]:
    """The ``cost/*`` metrics of a run from its other metrics and its config (see the module doc)."""
    gp, gc = _num(metrics, "generator/prompt_tokens"), _num(metrics, "generator/completion_tokens")
    jp, jc = _num(metrics, "judge/prompt_tokens"), _num(metrics, "judge/completion_tokens")
    out = {
        "cost/prompt_tokens": gp + jp,
        "cost/completion_tokens": gc + jc,
        "cost/generation_calls": _num(metrics, "generator/calls"),
        "cost/judge_calls": _num(metrics, "judge/calls"),
        "cost/wall_s": round(sum(_num(metrics, k) for k in metrics if k.startswith("time/") and k.endswith("_s")), 3),
    }
    out["cost/calls"] = out["cost/generation_calls"] + out["cost/judge_calls"]
    price = prices(cfg)
    usd = {}
    if price["generation"] is not None:
        usd["cost/usd_generation"] = round(price["generation"].usd(gp, gc), 6)
    if price["judge"] is not None:
        usd["cost/usd_judge"] = round(price["judge"].usd(jp, jc), 6)
    if usd:
        out.update(usd)
        out["cost/usd"] = round(sum(usd.values()), 6)
    return out
