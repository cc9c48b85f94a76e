"""What one run cost: model tokens, model calls, wall seconds and, for a priced API, money.

:func:`run_cost` reads the metrics a run already logs (``generator/*``, ``judge/*``,
``time/*_s``) and returns the ``cost/*`` metrics the search and the report use as an objective:

- ``cost/prompt_tokens``, ``cost/completion_tokens``: tokens of the model calls this run made
  (generation and LLM judge); work served from the cache made no call and costs nothing, so a
  system promoted to a larger rung pays only for its new questions;
- ``cost/generation_calls``, ``cost/judge_calls``: HTTP calls to the generator / the judge;
- ``cost/calls``: both together (the search benchmark's budget unit);
- ``cost/wall_s``: the run's stage seconds summed (``time/*_s``);
- ``cost/usd``: only where ``generator.price_per_1k_tokens`` is set (an external API): the
  generator's tokens times that price; a mapping ``{prompt: p, completion: c}`` prices the two
  kinds apart. Unset (null, the default), no money metric is logged: a local model has none.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

COST_METRICS = ("cost/prompt_tokens", "cost/completion_tokens", "cost/generation_calls", "cost/judge_calls",
                "cost/calls", "cost/wall_s", "cost/usd")


def _num(metrics: Mapping[str, Any], key: str) -> float:
    v = metrics.get(key)
    try:
        v = float(v)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) else 0.0


def _price(cfg: Any) -> tuple[float, float] | None:
    gen = cfg.get("generator") if hasattr(cfg, "get") else None
    price = gen.get("price_per_1k_tokens") if gen is not None and hasattr(gen, "get") else None
    if price is None:
        return None
    if hasattr(price, "get"):  # {prompt: p, completion: c}
        p, c = price.get("prompt"), price.get("completion")
        if p is None or c is None:
            raise ValueError("generator.price_per_1k_tokens: a mapping needs both prompt and completion prices")
        return float(p), float(c)
    return float(price), float(price)


def run_cost(metrics: Mapping[str, Any], cfg: Any) -> dict[str, float]:
    """The ``cost/*`` metrics of a run from its other metrics and its config (see the module doc)."""
    gp, gc = _num(metrics, "generator/prompt_tokens"), _num(metrics, "generator/completion_tokens")
    out = {
        "cost/prompt_tokens": gp + _num(metrics, "judge/prompt_tokens"),
        "cost/completion_tokens": gc + _num(metrics, "judge/completion_tokens"),
        "cost/generation_calls": _num(metrics, "generator/calls"),
        "cost/judge_calls": _num(metrics, "judge/calls"),
        "cost/wall_s": round(sum(_num(metrics, k) for k in metrics if k.startswith("time/") and k.endswith("_s")), 3),
    }
    out["cost/calls"] = out["cost/generation_calls"] + out["cost/judge_calls"]
    price = _price(cfg)
    if price is not None:
        out["cost/usd"] = round((gp * price[0] + gc * price[1]) / 1000.0, 6)
    return out
