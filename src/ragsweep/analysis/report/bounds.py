"""Floor and ceiling beside every system of a sweep (the oracle and naive-generation rows of
BERGEN and FlashRAG).

- **Ceiling**: a run with ``retriever=oracle`` (:mod:`ragsweep.rag.retriever.oracle`: the chunks that
  overlap the question's relevant spans, at most k): the best any retriever can do on the
  retriever-side metrics for that chunking and k.
- **Floor**: a run with ``prompt=no_context`` (closed book: the generator answers without
  retrieved chunks): what the generator-side metrics reach with no retrieval at all. The
  retriever-side metrics' floor is 0 (no chunk retrieved), never the closed-book run's (it
  retrieves like the system; its prompt only leaves the chunks out).

A sweep gets them by listing the bound as one more option of its grid (``retriever: bm25,oracle``
or ``prompt: ...,no_context`` with ``sweep.bounds: [floor]``). :func:`split` takes those runs out of the frame before the table
and the verdicts (the verdict rules never see them) and :func:`markdown` writes, per system and
metric, the system's mean [95% interval] (n), the floor and ceiling the same way, and the share of
the headroom it reaches, ``(system - floor) / (ceiling - floor)``, a point value from the three
means (shown only where the ceiling is above the floor).

A bound run is matched to a system by the swept params other than the one that names the bound
(``top_k``, ``chunk_size``, ``chunk_overlap`` ...): the oracle at k = 5 is the ceiling of the
k = 5 system. A bound swept on fewer values (one closed-book point for every k) matches all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

CEILING = ("retriever", "oracle")
FLOOR = ("prompt", "no_context")
#: metrics whose floor is 0 without a closed-book run: nothing retrieved scores 0 on them
RETRIEVER_SIDE_PREFIXES = ("retrieval/", "ragchecker/retriever/")
DEFAULT_METRICS = (
    "ragchecker/retriever/claim_recall",
    "ragchecker/retriever/context_precision",
    "retrieval/recall_at_k",
    "retrieval/ndcg_at_k",
    "ragchecker/overall/f1",
    "ragchecker/generator/faithfulness",
    "baseline/token_f1",
)


@dataclass
class Bounds:
    ceiling: Any  # DataFrame rows of oracle runs (maybe empty)
    floor: Any  # DataFrame rows of closed-book runs (maybe empty)

    @property
    def empty(self) -> bool:
        return self.ceiling.empty and self.floor.empty


def _is(df: Any, param: str, value: str) -> Any:
    if param not in df.columns:
        return df.index.map(lambda _: False).to_numpy(dtype=bool)
    return df[param].map(lambda v: str(v) == value).to_numpy(dtype=bool)


def declared(spec: Any) -> tuple[bool, bool]:
    """Which bounds the sweep declares (``sweep.bounds: [floor, ceiling]``): the oracle is always a
    ceiling (it reads the labels: never a system); a closed-book run is the floor only where the
    sweep says so, since a sweep may compare ``prompt=no_context`` as a system (RAGBench's case study)."""
    listed = spec.get("bounds") if hasattr(spec, "get") else None
    return "floor" in {str(b) for b in (listed or [])}, True


def split(df: Any, spec: Any = None) -> tuple[Any, Bounds]:
    """(the systems, the bound runs): oracle-retriever runs, and closed-book runs where the sweep
    declares the floor (``sweep.bounds: [floor]``), leave the frame."""
    want_floor, _ = declared(spec)
    ceil = _is(df, *CEILING)
    floor = (_is(df, *FLOOR) & ~ceil) if want_floor else (ceil & ~ceil)
    systems = df[~(ceil | floor)].copy()
    systems.attrs.update(df.attrs)
    return systems, Bounds(ceiling=df[ceil].copy(), floor=df[floor].copy())


def _match(bound: Any, row: Any, params: Sequence[str], skip: str) -> Any:
    """The bound run for ``row``: same value of every swept param the bound varies over."""
    if bound.empty:
        return None
    cand = bound
    for p in params:
        if p == skip or p not in bound.columns:
            continue
        if bound[p].nunique(dropna=False) <= 1:  # one bound point for every value: matches all
            continue
        cand = cand[cand[p].map(lambda v: str(v) == str(row.get(p)))]
    return None if cand.empty else cand.iloc[0]


def _num(row: Any, key: str) -> float:
    if row is None:
        return math.nan
    try:
        v = float(row.get(key))
    except (TypeError, ValueError):
        return math.nan
    return v


def _cell(row: Any, metric: str) -> str:
    m = _num(row, metric)
    if not math.isfinite(m):
        return "-"
    lo, hi, n = _num(row, f"{metric}/ci_low"), _num(row, f"{metric}/ci_high"), _num(row, f"{metric}/n")
    iv = f" [{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and math.isfinite(hi) else ""
    return f"{m:.3g}{iv} (n={int(n) if math.isfinite(n) else '?'})"


def share(value: float, floor: float, ceiling: float) -> float:
    """The share of the headroom reached: (value - floor) / (ceiling - floor); NaN without room."""
    if not all(math.isfinite(x) for x in (value, floor, ceiling)) or ceiling <= floor:
        return math.nan
    return (value - floor) / (ceiling - floor)


def rows(systems: Any, bounds: Bounds, params: Sequence[str], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per (system, metric) with a bound: label, metric, cells, floor, ceiling, share."""
    from ragsweep.analysis.report import paired

    out = []
    for _, row in systems.iterrows():
        ceil = _match(bounds.ceiling, row, params, CEILING[0])
        flo = _match(bounds.floor, row, params, FLOOR[0])
        for metric in metrics:
            if metric not in systems.columns:
                continue
            value = _num(row, metric)
            if not math.isfinite(value):
                continue
            c = _num(ceil, metric)
            f = _num(flo, metric)
            floor_text = _cell(flo, metric)
            if metric.startswith(RETRIEVER_SIDE_PREFIXES):
                # the closed-book run retrieves too (its prompt leaves the chunks out): its retrieval
                # figures are the system's own, not a floor; with no chunk retrieved they are 0
                f, floor_text = 0.0, "0 (nothing retrieved)"
            if not (math.isfinite(c) or flo is not None):
                continue
            out.append({"system": paired.system_label(row, params), "metric": metric, "value": _cell(row, metric),
                        "floor": floor_text, "ceiling": _cell(ceil, metric), "share": share(value, f, c)})
    return out


def markdown(systems: Any, bounds: Bounds, params: Sequence[str], metrics: Sequence[str] | None = None) -> str:
    """The bounds block (empty string when the sweep has no bound run)."""
    if bounds.empty:
        return ""
    wanted = list(dict.fromkeys([*(metrics or ()), *DEFAULT_METRICS]))
    found = rows(systems, bounds, params, wanted)
    head = ["## Floor and ceiling", "",
            f"Ceiling: `{CEILING[0]}={CEILING[1]}` ({len(bounds.ceiling)} run(s): the chunks overlapping the labelled "
            "relevant spans, at most k). Floor: "
            + (f"`{FLOOR[0]}={FLOOR[1]}` ({len(bounds.floor)} run(s), closed book)" if not bounds.floor.empty
               else "0 for the retriever-side metrics (no closed-book run in this sweep)")
            + ". Each cell: mean [95% interval] (n = questions scored); share = (system - floor) / "
            "(ceiling - floor), a point value from the three means. Bound runs are not systems: the table "
            "and the verdicts leave them out.", ""]
    if not found:
        return "\n".join(head + ["No metric of the systems has a bound run to compare with.", ""])
    lines = ["| system | metric | value | floor | ceiling | share of headroom |", "|---|---|---|---|---|---|"]
    for r in found:
        s = r["share"]
        lines.append(f"| {r['system']} | {r['metric']} | {r['value']} | {r['floor']} | {r['ceiling']} | "
                     f"{f'{100 * s:.0f}%' if math.isfinite(s) else '-'} |")
    return "\n".join(head + lines + [""])


def retrieval_only_note(children: Sequence[Any]) -> list[str]:
    """The line that says the verdicts come from retrieval-only runs (``ragsweep.mode`` tag)."""
    from ragsweep.tracking.identity import is_retrieval_only as is_run

    retro = [r for r in children if is_run(r)]
    n = len(retro)
    if not n:
        return []
    asked = sorted({int(r.data.metrics.get("ledger/attempted") or 0) for r in retro})
    return [f"retrieval-only: {n} of {len(children)} run(s) are retrieval-only (generator=none, "
            f"{'/'.join(map(str, asked))} questions each): these verdicts are retriever-side, measured without "
            "generating an answer; the metrics that need a response are not applicable (see each run's ledger.json)", ""]


__all__ = ["Bounds", "split", "markdown", "rows", "share", "retrieval_only_note"]
