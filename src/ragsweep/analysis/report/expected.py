"""Reproduction configs that carry their expected results, and the check against them.

An experiment config states, for the default offline stack at a given ``dataset.limit``, each
system's expected mean and 95% interval of its key metrics (metrics listed under ``exact``, the
deterministic retrieval metrics, must match the mean (to the block's rounding); the others must fall inside the
interval, since generation may differ slightly between CPUs)::

    sweep:
      expected:
        "20":                               # dataset.limit
          stack: offline evaluator, SmolLM2-135M-Instruct Q4_1 (llama.cpp), ...
          systems:
            top_k=5:                        # the swept params of the system
              ragchecker/overall/f1: {mean: 27.0, ci_low: 15.2, ci_high: 39.0, n: 20}

``ragsweep-report --check`` fails (exit 1) and names each system and metric whose fresh mean falls
outside its expected interval, or whose n changed. An interval of width zero (every one of the n
questions scored the same, as a sparse metric's all-zero record does) says nothing about how far a
fresh run may move: there the bound is the rule of three's, ``same_value_interval``; ``--write-expected`` prints the block for a
finished sweep (paste it into the config after reviewing it).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ragsweep.analysis.report.frame import fmt, metric_scale

ROUNDING = 1e-5  # relative: the expected block keeps 6 decimals

#: the metrics an expected block records by default
KEY_METRICS = ("ragchecker/overall/f1", "ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision",
               "ragchecker/generator/faithfulness", "ragchecker/generator/hallucination", "retrieval/recall_at_k",
               "trace/adherence_rate", "trace/relevance", "trace/utilization")


def system_key(row: Mapping[str, Any], params: Sequence[str]) -> str:
    return ",".join(f"{p}={row.get(p)}" for p in params)


def _limit(df) -> str:
    if "limit" not in df.columns:
        return "None"
    vals = {str(v) for v in df["limit"]}
    return vals.pop() if len(vals) == 1 else ",".join(sorted(vals))


def _stack(df) -> str:
    cols = [c for c in ("dataset", "generator", "evaluator") if c in df.columns]
    return ", ".join(f"{c}={df[c].iloc[0]}" for c in cols)


def block(df, params: Sequence[str], spec: Mapping[str, Any]) -> str:
    """The YAML ``sweep.expected`` entry for this sweep's results."""
    import yaml

    metrics = list(dict.fromkeys([str(d["metric"]) for d in spec.get("directions") or []] + list(KEY_METRICS)))
    systems: dict[str, Any] = {}
    for _, row in df.iterrows():
        entry = {}
        for m in metrics:
            v = row.get(m)
            if v is None or not math.isfinite(float(v)):
                continue
            entry[m] = {"mean": round(float(v), 6), "ci_low": round(float(row.get(f"{m}/ci_low", v)), 6),
                        "ci_high": round(float(row.get(f"{m}/ci_high", v)), 6), "n": int(row.get(f"{m}/n", 0) or 0)}
        systems[system_key(row, params)] = entry
    exact = [m for m in metrics if m.startswith("retrieval/")]
    doc = {"sweep": {"expected": {_limit(df): {"stack": _stack(df), "exact": exact, "systems": systems}}}}
    return "# paste under the experiment config's `sweep:` node\n" + yaml.safe_dump(doc, sort_keys=False, width=200,
                                                                                    default_flow_style=None)


def current_spec(experiment: str, logged: Mapping[str, Any]) -> Mapping[str, Any]:
    """The expected results as the experiment config states them now (conf/experiment/NAME.yaml),
    else as logged with the sweep."""
    from omegaconf import OmegaConf

    from ragsweep.conf import CONF_DIR

    conf = CONF_DIR / "experiment" / f"{experiment}.yaml"
    if conf.exists():
        node = OmegaConf.select(OmegaConf.load(conf), "sweep.expected")
        if node is not None:
            return {"expected": OmegaConf.to_container(node, resolve=False)}
    return logged


def same_value_interval(value: float, n: int, scale: float, level: float = 0.95) -> tuple[float, float, float]:
    """The interval a fresh run's mean may fall in when all ``n`` recorded questions scored ``value``
    (a metric bounded by [0, ``scale``]): with no question seen to differ, up to a share
    1 - (1 - level)^(1/n) of them may (the exact zero-event binomial bound, ~3/n: the rule of three),
    each by at most ``scale``, which moves the mean by at most that share x ``scale``.
    Returns (low, high, share). On 20 all-zero questions of a percentage: [0, 13.9]."""
    share = 1.0 - (1.0 - level) ** (1.0 / max(int(n), 1))
    return max(0.0, value - share * scale), min(scale, value + share * scale), share


def check(df, params: Sequence[str], spec: Mapping[str, Any]) -> tuple[list[str] | None, list[str]]:
    """(problems, report lines); problems is None when the config states nothing for this limit."""
    exp = (spec.get("expected") or {}).get(_limit(df))
    if not exp:
        return None, [f"no expected results for dataset.limit={_limit(df)}"]
    want = exp.get("systems") or {}
    exact = set(exp.get("exact") or [])
    rows = {system_key(row, params): row for _, row in df.iterrows()}
    problems, lines = [], [f"checking {len(want)} system(s) at dataset.limit={_limit(df)} against the config "
                           f"(stack: {exp.get('stack', '?')})"]
    for key, metrics in want.items():
        row = rows.get(key)
        if row is None:
            problems.append(f"{key}: no finished run of this system")
            continue
        for m, e in metrics.items():
            got = row.get(m)
            gn = row.get(f"{m}/n")
            if got is None or not math.isfinite(float(got)):
                problems.append(f"{key} {m}: not logged (expected {fmt(e['mean'])})")
                continue
            eps = ROUNDING * max(1.0, abs(float(e["mean"])))  # the block is written rounded
            low, high, why = float(e["ci_low"]), float(e["ci_high"]), ""
            if m not in exact and high - low <= eps and e.get("n"):  # every recorded question scored the same
                low, high, share = same_value_interval(float(e["mean"]), int(e["n"]), metric_scale(m))
                why = f"; all {int(e['n'])} recorded alike: up to {share:.1%} of questions may differ (95%)"
            inside = low - eps <= float(got) <= high + eps
            if m in exact:  # deterministic (retrieval over the same data): must match, not only fall inside
                inside = inside and abs(float(got) - float(e["mean"])) <= eps
            same_n = gn is None or int(gn) == int(e.get("n", gn))
            status = "ok" if inside and same_n else "MOVED"
            line = (f"{key} {m}: {fmt(got)} (n={int(gn) if gn is not None else '?'}), expected {fmt(e['mean'])} "
                    f"[{fmt(low)}, {fmt(high)}] (n={e.get('n')}{why})")
            lines.append(f"  {status:5} {line}")
            if status != "ok":
                problems.append(line)
    return problems, lines
