"""One row per system: the runs of a sweep as a DataFrame, and how its values are ordered, labelled
and formatted. What a metric is (its scale, whether higher is better) comes from the metric registry."""

from __future__ import annotations

import logging
import math
from typing import Any, Mapping, Sequence

from ragsweep.tracking import SHORT_PARAMS
from ragsweep.tracking.identity import SHORT_KNOBS

log = logging.getLogger(__name__)

#: how parameter values are shown: top_k=5 -> "k=5"
PARAM_LABEL = {"top_k": "k", "chunk_size": "size", "chunk_overlap": "overlap"}
PC_HALLUCINATED = "pc_hallucinated"  # derived column: 100 * (1 - trace/adherence_rate)
#: where a value order is kept on a frame (``df.attrs``): short param -> values in the sweep's order
ORDER_ATTR = "value_order"
#: ``df.attrs`` key: the logged config keys that tell apart systems whose short params are equal
DISTINGUISHING_ATTR = "distinguishing"


class ReportError(Exception):
    """A problem the user can fix; printed on one line, exit status 1."""


def metric_info(metric: str) -> tuple[float, bool | None]:
    """(scale, higher is better?) of a logged metric, from the metric registry. A metric the
    registry does not know: scale 100 for RAGChecker's percentages, else 1; direction unknown."""
    from ragsweep.judge.metrics.registry import find

    m = find(metric)
    if m is not None:
        return float(m.scale), m.higher_is_better
    log.debug("metric %s is not in the metric registry", metric)
    return (100.0 if metric.startswith("ragchecker/") and not metric.endswith("n_response_claims") else 1.0), None


def metric_scale(metric: str) -> float:
    """The scale for showing a metric's figures (a guess for a metric the registry does not know:
    never a range to test with, see :func:`metric_range`)."""
    return metric_info(metric)[0]


def metric_range(metric: str) -> float | None:
    """The metric's values' range ``[0, scale]`` as the metric registry states it; None when the
    registry does not know the metric or gives it no finite scale (a count). A test whose validity
    rests on the range (the betting interval of "barely moves", halving's drops) has none then: it
    is "not testable", never run on a guessed range."""
    from ragsweep.judge.metrics.registry import find

    m = find(metric)
    if m is None or not (math.isfinite(float(m.scale)) and float(m.scale) > 0):
        return None
    return float(m.scale)


def declared_order(*specs: str | Mapping[str, Any] | None) -> dict[str, list[str]]:
    """Values in the order a sweep gives them, by short param, from ``key=a,b,c`` overrides
    (a string of them, or a mapping such as ``hydra.sweeper.params``); the first source wins."""
    short = {f"{g}.{f}": name for name, (g, f) in SHORT_KNOBS.items()}
    out: dict[str, list[str]] = {}
    for spec in specs:
        if not spec:
            continue
        items = spec.items() if isinstance(spec, Mapping) else (tok.partition("=")[::2] for tok in str(spec).split())
        for key, value in items:
            key = str(key).lstrip("+~")
            name = short.get(key, key)
            text = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
            if name in SHORT_PARAMS and name not in out and "," in text and "(" not in text:
                out[name] = [v.strip() for v in text.split(",")]
    return out


def _parse_scalar(s: Any) -> Any:
    if s is None or str(s) in ("None", "null", ""):
        return None
    try:
        f = float(s)
    except (TypeError, ValueError):
        return str(s)
    return int(f) if f.is_integer() and "." not in str(s) and "e" not in str(s).lower() else f


def runs_frame(children: Sequence[Any], order: Mapping[str, Sequence[str]] | None = None):
    """DataFrame: run_id, run_name, the short params (typed), every metric; ``order`` (the sweep's
    order of categorical values, see :func:`declared_order`) kept in ``df.attrs``."""
    import pandas as pd

    rows = []
    for r in children:
        row: dict[str, Any] = {"run_id": r.info.run_id, "run_name": r.info.run_name}
        for p in SHORT_PARAMS:
            row[p] = r.data.params.get(p)
        row.update(r.data.metrics)
        rows.append(row)
    df = pd.DataFrame(rows)
    for p in SHORT_PARAMS:
        raw = df[p].tolist()
        parsed = [_parse_scalar(v) for v in raw]
        if all(v is None or isinstance(v, (int, float)) for v in parsed) and any(v is not None for v in parsed):
            df[p] = pd.Series(parsed, index=df.index, dtype=object)
        else:
            df[p] = pd.Series([None if v is None else str(v) for v in parsed], index=df.index, dtype=object)
    if "trace/adherence_rate" in df.columns:
        df[PC_HALLUCINATED] = 100.0 * (1.0 - df["trace/adherence_rate"].astype(float))
    df.attrs[ORDER_ATTR] = {k: list(v) for k, v in (order or {}).items()}
    keys = distinguishing_keys(children)
    for k in keys:
        df[k] = pd.Series([r.data.params.get(k) for r in children], index=df.index, dtype=object)
    df.attrs[DISTINGUISHING_ATTR] = keys
    return df


def distinguishing_keys(children: Sequence[Any]) -> list[str]:
    """The logged params (``generator.server.model_format``) whose values differ between runs that
    the short params cannot tell apart (a sweep over a knob without a short name): without them such
    runs are rows of the same name. Run bookkeeping (``run_name``, ``mlflow.*``...) and what a run
    measured of its machine (``served/*``) are left out."""
    from collections import defaultdict

    from ragsweep.tracking.identity import differing_params

    groups: dict[tuple, list[Any]] = defaultdict(list)
    for r in children:
        groups[tuple(str(r.data.params.get(p)) for p in SHORT_PARAMS)].append(r)
    keys: set[str] = set()
    for runs in groups.values():
        if len(runs) > 1:
            keys.update(k for k in differing_params(runs) if "/" not in k)
    return sorted(keys)


def distinguishing(df) -> list[str]:
    """The columns :func:`distinguishing_keys` added to a frame of :func:`runs_frame`."""
    return [k for k in df.attrs.get(DISTINGUISHING_ATTR, []) if k in df.columns]

def sort_values(param: str, values, order: Mapping[str, Sequence[str]] | None = None) -> list[Any]:
    """Distinct values: numbers ascending; categories in the sweep's order (``order``), others after, alphabetically."""
    vals = [v for v in dict.fromkeys(values) if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if all(isinstance(v, (int, float)) for v in vals):
        return sorted(vals)
    seq = list((order or {}).get(param, []))
    return sorted(vals, key=lambda v: (seq.index(str(v)) if str(v) in seq else len(seq), str(v)))


def values_of(df, param: str) -> list[Any]:
    """The sorted distinct values of ``param`` in the frame (in the order kept in ``df.attrs``)."""
    return sort_values(param, df[param].tolist(), df.attrs.get(ORDER_ATTR))

def _same(a: Any, b: Any) -> bool:
    if str(a) == str(b):
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return False


def value_label(param: str, value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{PARAM_LABEL.get(param, param)}={value:g}"
    return str(value)


def fmt(x: Any, decimals: int | None = None) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if math.isnan(x):
        return "n/a"
    if decimals is None:
        decimals = 1 if abs(x) >= 10 else 3
    return f"{x:.{decimals}f}"


def varying_params(df) -> list[str]:
    return [p for p in SHORT_PARAMS if df[p].map(str).nunique() > 1]

