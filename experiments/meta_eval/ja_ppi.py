"""How much a judge's predictions narrow a TRACe metric's interval when people label some answers:
the width of ragsweep's PPI++ interval (:func:`ragsweep.analysis.ppi.mean`) over the width of the
labels-only interval (:func:`ragsweep.analysis.ppi.classical`), at 50 and 100 labels.

The population is a set of answers with a label each (RAGBench ``test`` halves: GPT-4's
``adherence_score`` / ``utilization_score``) and the judge's out-of-sample prediction for each
(its score under the frozen protocol: nothing was fitted or chosen on these rows). For each n,
``draws`` random sets of n answers are "labelled" (drawn without replacement), the rest are judged
only; the ratio is the mean PPI width over the mean labels-only width. Below 1 the judge helps:
0.8 means the labels buy the interval of 1 / 0.8^2 = 1.56 times as many labels alone. A judge
that predicts nothing gives about 1 (PPI++'s lambda goes to 0).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

NS = (50, 100)
DRAWS = 1000


def width_ratio(y: Sequence[float], yhat: Sequence[float], ns: Sequence[int] = NS, draws: int = DRAWS,
                seed: int = 0) -> dict[int, dict[str, float]]:
    """Per n: mean PPI width, mean labels-only width, their ratio and the correlation of judge and label."""
    from ragsweep.analysis import ppi

    y = np.asarray(y, dtype=float)
    yhat = np.asarray(yhat, dtype=float)
    keep = np.isfinite(y) & np.isfinite(yhat)
    y, yhat = y[keep], yhat[keep]
    rng = np.random.default_rng(seed)
    rho = float(np.corrcoef(y, yhat)[0, 1]) if y.std() > 0 and yhat.std() > 0 else float("nan")
    out: dict[int, dict[str, float]] = {}
    for n in ns:
        if n + 2 > y.size:
            continue
        w_ppi = w_lab = 0.0
        for _ in range(draws):
            perm = rng.permutation(y.size)
            lab, unl = perm[:n], perm[n:]
            e = ppi.mean(y[lab], yhat[lab], yhat[unl], minimum=2)
            _, lo, hi = ppi.classical(y[lab])
            w_ppi += e.high - e.low
            w_lab += hi - lo
        out[n] = {"ppi_width": w_ppi / draws, "labels_width": w_lab / draws, "ratio": w_ppi / w_lab if w_lab else float("nan"),
                  "N": int(y.size), "draws": draws, "corr": rho}
    return out


def table(rows: dict[str, dict[str, dict[int, dict[str, float]]]], ns: Sequence[int] = NS) -> str:
    """Markdown: one row per (metric, judge) with the ratio at each n."""
    head = "| metric | judge | N | corr(judge, label) | " + " | ".join(f"PPI / labels-only width, {n} labels" for n in ns) + " |"
    out = [head, "|---|---|---:|---:|" + "---:|" * len(ns)]
    for metric, by_judge in rows.items():
        for judge, r in by_judge.items():
            any_n = next(iter(r.values()), {})
            cells = [f"{r[n]['ratio']:.3f}" if n in r else "-" for n in ns]
            out.append(f"| {metric} | {judge} | {any_n.get('N', 0)} | {any_n.get('corr', float('nan')):.3f} | "
                       + " | ".join(cells) + " |")
    return "\n".join(out)




def ppi_section(rb: dict, adherence: dict[str, dict], draws: int = DRAWS) -> tuple[dict, str]:
    """The width ratios on RAGBench's ``test`` halves (all subsets pooled): adherence
    (``adherence_score``, 0/1) with each judge's out-of-sample protocol score per answer (``adherence``:
    judge -> ``ragbench_adherence`` result) and token overlap; utilization (``utilization_score``)
    with the default TRACe attribution's prediction (``cover``: lexical, no checker enters it)."""
    from experiments.meta_eval import ragbench_trace as R

    subsets = list(rb)
    test = {s: np.flatnonzero(rb[s]["part"] == "test") for s in subsets}
    y_adh = np.concatenate([rb[s]["adherent"][test[s]] for s in subsets]).astype(float)
    first = next(iter(adherence.values()))
    # the response's content-word recall in its documents, per test row (the adherence suite computed it)
    adh = {"token overlap": np.concatenate([first["arr"][s]["token"] for s in subsets])}
    for judge, res in adherence.items():
        adh[f"{judge} judge (protocol)"] = np.concatenate([res["arr"][s]["protocol"] for s in subsets])
    rows = [rb[s]["rows"][i] for s in subsets for i in test[s]]
    util_pred = R.trace_predictions(rows, [[] for _ in rows], R.cover_keys(rows))["utilization"]
    util_y = R.shipped(rows, "utilization_score")
    out = {"adherence": {j: width_ratio(y_adh, p, draws=draws) for j, p in adh.items()},
           "utilization": {"TRACe cover attribution (default; no checker)": width_ratio(util_y, util_pred, draws=draws),
                           "token overlap": width_ratio(util_y, adh["token overlap"], draws=draws)}}
    md = ["## PPI with human labels: interval width against labels alone (RAGBench test halves, pooled)", "",
          f"ragsweep's PPI++ interval of a metric's mean from n labelled answers and the judge on the rest, over the "
          f"labels-only interval of the same n ({draws} random labelled sets per cell; `ja_ppi.py`). The judge's "
          "score is its out-of-sample prediction (the protocol's, fitted and chosen on other rows). Target of the "
          "judge issue: <= 0.80 at 100 labels.", "", table(out)]
    return out, "\n".join(md)


__all__ = ["width_ratio", "table", "ppi_section", "NS", "DRAWS"]
