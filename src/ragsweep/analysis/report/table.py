"""The paper-style table: one row per system, in the layout of the paper the sweep reproduces,
RAGChecker Table 3 (``ragchecker``) or RAGBench Table 6 (``ragbench``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ragsweep.analysis.report.frame import PC_HALLUCINATED, _same, fmt, metric_info, values_of, varying_params
from ragsweep.analysis.report.markdown import md_cell

LAYOUTS = ("ragchecker", "ragbench")
ARROWS = {True: "↑", False: "↓", None: ""}
#: table headers of swept params
TABLE_LABEL = {"top_k": "k", "chunk_size": "chunk size", "chunk_overlap": "overlap"}


@dataclass(frozen=True)
class Column:
    header: str  # as in the paper
    metric: str  # MLflow metric name (or a derived column)
    decimals: int = 1
    label: str = ""  # long name, for legends and figure titles
    arrows: bool = True  # mark the better direction (from the metric registry), as RAGChecker's table does

    @property
    def arrow(self) -> str:
        return ARROWS[metric_info(self.metric)[1]] if self.arrows else ""


def _columns(table: str, decimals: int, arrows: bool) -> tuple[Column, ...]:
    """Columns from ``header | metric | label`` lines."""
    rows = [[c.strip() for c in line.split("|")] for line in table.strip().splitlines()]
    return tuple(Column(h, m, decimals, label, arrows) for h, m, label in rows)


RAGCHECKER_COLUMNS = _columns("""
    Prec.  | ragchecker/overall/precision                         | overall precision
    Rec.   | ragchecker/overall/recall                            | overall recall
    F1     | ragchecker/overall/f1                                | overall F1
    CR     | ragchecker/retriever/claim_recall                    | claim recall
    CP     | ragchecker/retriever/context_precision               | context precision
    CU     | ragchecker/generator/context_utilization             | context utilization
    NS(I)  | ragchecker/generator/noise_sensitivity_in_relevant   | noise sensitivity in relevant
    NS(II) | ragchecker/generator/noise_sensitivity_in_irrelevant | noise sensitivity in irrelevant
    Hallu. | ragchecker/generator/hallucination                   | hallucination
    SK     | ragchecker/generator/self_knowledge                  | self-knowledge
    Faith. | ragchecker/generator/faithfulness                    | faithfulness
    #Claim | ragchecker/overall/n_response_claims                 | response claims per answer
""", decimals=1, arrows=True)
RAGBENCH_COLUMNS = _columns("""
    ave relevance    | trace/relevance   | TRACe relevance
    ave utilization  | trace/utilization  | TRACe utilization
    ave completeness | trace/completeness | TRACe completeness
""", decimals=2, arrows=False) + (Column("pc hallucinated", PC_HALLUCINATED, 1, "% hallucinated = 100 (1 - adherence rate)", False),)
RAGBENCH_LABELS = (("retriever", "retriever"), ("k", "top_k"), ("prompt version", "prompt"), ("generation model", "generator"))
RAGCHECKER_LEGEND = (
    "Overall: Prec. = precision, Rec. = recall, F1. Retriever: CR = claim recall, CP = context precision. "
    "Generator: CU = context utilization, NS(I) = noise sensitivity in relevant, NS(II) = noise sensitivity "
    "in irrelevant, Hallu. = hallucination, SK = self-knowledge, Faith. = faithfulness. #Claim = response claims "
    "per answer. All on 0-100 except #Claim; ↑/↓: higher/lower is better (RAGChecker Table 3)."
)
RAGBENCH_LEGEND = (
    "TRACe metrics (RAGBench Table 6): ave relevance/utilization/completeness on 0-1 (means over questions); "
    "pc hallucinated = 100 * (1 - adherence rate), in % (the paper prints the fraction)."
)


def with_interval(row, metric: str, decimals: int) -> str:
    """``mean ± half-width (n)`` from the logged ``<metric>/ci_low|ci_high|n``; the mean alone
    for runs logged without them."""
    v = row.get(metric, float("nan"))
    lo, hi, n = row.get(f"{metric}/ci_low"), row.get(f"{metric}/ci_high"), row.get(f"{metric}/n")
    text = fmt(v, decimals)
    try:
        if lo is not None and hi is not None and math.isfinite(float(lo)) and math.isfinite(float(hi)):
            text += f" ± {fmt((float(hi) - float(lo)) / 2, decimals)}"
        if n is not None and math.isfinite(float(n)):
            text += f" ({int(n)})"
    except (TypeError, ValueError):
        pass
    return text


def infer_layout(df) -> str:
    if any(c.startswith("ragchecker/") for c in df.columns):
        return "ragchecker"
    if any(c.startswith("trace/") for c in df.columns):
        return "ragbench"
    return "ragchecker"


def build_table(df, layout: str, params: Sequence[str]):
    """(display DataFrame with strings, CSV DataFrame with numbers, metric columns used)."""
    import pandas as pd

    extra = [p for p in list(params) + varying_params(df) if p in df.columns]
    extra = list(dict.fromkeys(extra))
    if layout == "ragchecker":
        labels: list[tuple[str, Any]] = [("RAG system", lambda r: f"{r['retriever']}_{r['generator']}")]
        shown = {"retriever", "generator"}
        columns = RAGCHECKER_COLUMNS
    else:
        labels = [(h, (lambda p: lambda r: r[p])(p)) for h, p in RAGBENCH_LABELS]
        shown = {p for _, p in RAGBENCH_LABELS}
        columns = RAGBENCH_COLUMNS
    label_params = [p for _, p in RAGBENCH_LABELS] if layout == "ragbench" else []
    for p in extra:
        if p not in shown:
            labels.append((TABLE_LABEL.get(p, p), (lambda p: lambda r: r[p])(p)))
            label_params.append(p)
    sort_params = label_params + [p for p in ("retriever", "generator") if p not in label_params]

    def key(row):
        out = []
        for p in sort_params:
            order = values_of(df, p)
            v = row[p]
            out.append(next((i for i, o in enumerate(order) if _same(o, v)), len(order)))
        return tuple(out)

    ordered = sorted((row for _, row in df.iterrows()), key=key)
    disp_rows, csv_rows = [], []
    for row in ordered:
        d: dict[str, str] = {}
        c: dict[str, Any] = {}
        for header, getter in labels:
            v = getter(row)
            d[header] = "n/a" if v is None else (f"{v:g}" if isinstance(v, float) else str(v))
            c[header] = v
        for col in columns:
            v = row.get(col.metric, float("nan"))
            d[f"{col.header}{col.arrow}"] = with_interval(row, col.metric, col.decimals)
            c[col.header] = None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), 4)
        c["run_id"] = row["run_id"]
        disp_rows.append(d)
        csv_rows.append(c)
    return pd.DataFrame(disp_rows), pd.DataFrame(csv_rows), columns


def markdown_table(df) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(md_cell(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(md_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)

