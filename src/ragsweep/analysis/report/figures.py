"""Figures: one per swept parameter, each relevant metric against it (means over the other swept
parameters, one bar series per value of the next swept parameter), like RAGChecker Fig. 6/7/8/10
and RAGBench Fig. 4."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Sequence

from ragsweep.analysis.report.frame import _same, value_label, values_of
from ragsweep.analysis.report.paired import cell_interval
from ragsweep.analysis.report.table import RAGBENCH_COLUMNS, RAGCHECKER_COLUMNS

log = logging.getLogger(__name__)


def figure_metrics(layout: str, df, directions: Sequence[dict[str, Any]], param: str) -> list[tuple[str, str]]:
    """(metric, title) pairs to plot against ``param``: the layout's metrics plus any direction's."""
    cols = RAGCHECKER_COLUMNS[:-1] if layout == "ragchecker" else RAGBENCH_COLUMNS
    pairs = [(c.metric, f"{c.header}{c.arrow} {c.label}" if c.label and layout == "ragchecker" else (c.label or c.header)) for c in cols]
    have = {m for m, _ in pairs}
    for d in directions:
        m = str(d.get("metric", ""))
        if d.get("param") == param and m and m not in have:
            pairs.append((m, m))
            have.add(m)
    return [(m, t) for m, t in pairs if m in df.columns and df[m].astype(float).notna().any()]


def make_figure(df, param: str, hue: str | None, metrics: Sequence[tuple[str, str]], title: str, path: Path,
                records: Any = None) -> None:
    """Bars = means; error bars = 95% bootstrap intervals over questions (:func:`cell_interval`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    xs = values_of(df, param)
    hues = values_of(df, hue) if hue else [None]
    n = len(metrics)
    ncols = min(4, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.8 * nrows + 0.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    width = 0.8 / len(hues)
    for ax, (metric, mtitle) in zip(axes.flat, metrics):
        col = df[metric].astype(float)
        for j, h in enumerate(hues):
            ys, lows, highs = [], [], []
            for x in xs:
                mask = df[param].map(lambda v, x=x: v is not None and _same(v, x))
                if h is not None:
                    mask &= df[hue].map(lambda v, h=h: v is not None and _same(v, h))
                iv = cell_interval(df[mask], metric, records or {}) if mask.any() else None
                y = float(col[mask].mean()) if mask.any() else float("nan")
                if iv is not None and iv.n and math.isfinite(iv.mean):
                    y = iv.mean
                ys.append(y)
                ok = iv is not None and math.isfinite(iv.low)
                lows.append(max(0.0, y - iv.low) if ok else 0.0)
                highs.append(max(0.0, iv.high - y) if ok else 0.0)
            pos = [i - 0.4 + width * (j + 0.5) for i in range(len(xs))]
            ax.bar(pos, ys, width=width * 0.95, yerr=[lows, highs], capsize=2, error_kw={"elinewidth": 0.8},
                   label=value_label(hue, h) if h is not None else None)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels([value_label(param, x) for x in xs], rotation=20 if not all(isinstance(x, (int, float)) for x in xs) else 0, fontsize=8)
        ax.set_title(mtitle, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if hue:
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", fontsize=8, title=hue, title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 0.92 if hue else 1, 0.95))
    fig.savefig(path, dpi=110)


def make_figures(df, layout: str, params: Sequence[str], directions: Sequence[dict[str, Any]], experiment: str, out: Path,
                 records: Any = None) -> list[Path]:
    paths = []
    present = [p for p in params if p in df.columns]
    for i, p in enumerate(present):
        metrics = figure_metrics(layout, df, directions, p)
        if not metrics:
            log.warning("no metric to plot against %s", p)
            continue
        hue = None
        for q in present[i + 1 :] + present[:i]:
            if len(values_of(df, q)) > 1:
                hue = q
                break
        others = [q for q in present if q not in (p, hue)]
        avg = f"; mean over {', '.join(others)}" if others else ""
        title = f"{experiment}: metrics vs {p}" + (f" by {hue}" if hue else "") + avg
        path = out / f"fig_{p}.png"
        make_figure(df, p, hue, metrics, title + " (bars: 95% CI over questions)", path, records)
        paths.append(path)
    return paths

