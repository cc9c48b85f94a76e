"""What several simulation scripts share (a library module, not a script: no script imports another
one). A script in this folder imports it by its bare name, ``from common import load_sets``: Python
puts the running script's folder on sys.path.

- :func:`load_sets`: held-out data with a label for every item and a cheap judge's score for it
  (RAGBench validation, WiCE dev), on which the prediction-powered intervals are simulated;
- :func:`machine`: the line that says which machine a result came from.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # experiments.meta_eval.common
    sys.path.insert(0, str(ROOT))
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))


def machine() -> str:
    """CPU model, cores and load average now."""
    from ragsweep.pipeline.reproduce_page import machine as cpu_and_cores

    return f"{cpu_and_cores()}, load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}"


def _ragbench_rows(data: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    cols = ["documents", "response", "adherence_score", "utilization_score", "gpt35_utilization", "gpt3_adherence"]
    rows = []
    for f in sorted((data / "ragbench").glob("*/validation.parquet")):
        rows += pq.read_table(f, columns=cols).to_pylist()
    return rows


def _overlap(text: str, reference: str) -> float:
    from experiments.meta_eval.common import content_overlap

    return content_overlap(text, reference)


def load_sets(data: Path) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(data set, judge, labels, judge scores) with finite values only."""
    out = []
    rows = _ragbench_rows(data)
    if rows:
        y = np.array([float(bool(r["adherence_score"])) if r["adherence_score"] is not None else np.nan for r in rows])
        ov = np.array([_overlap(r["response"] or "", "\n\n".join(r["documents"] or [])) for r in rows])
        g3 = np.array([np.nan if r["gpt3_adherence"] is None else float(r["gpt3_adherence"]) for r in rows])
        ut = np.array([np.nan if r["utilization_score"] is None else float(r["utilization_score"]) for r in rows])
        g35 = np.array([np.nan if r["gpt35_utilization"] is None else float(r["gpt35_utilization"]) for r in rows])
        for name, judge, lab, pred in (("RAGBench adherence", "word overlap", y, ov),
                                       ("RAGBench adherence", "GPT-3.5 (shipped gpt3_adherence)", y, g3),
                                       ("RAGBench utilization", "GPT-3.5 (shipped gpt35_utilization)", ut, g35)):
            ok = np.isfinite(lab) & np.isfinite(pred)
            out.append((name, judge, lab[ok], pred[ok]))
    wice = data / "wice" / "entailment_retrieval_claim_dev.jsonl"
    if wice.is_file():
        items = [json.loads(line) for line in wice.read_text().splitlines() if line.strip()]
        lab = np.array([1.0 if it["label"] == "supported" else 0.0 for it in items])
        pred = np.array([_overlap(it["claim"], "\n".join(it["evidence"])) for it in items])
        out.append(("WiCE dev (supported)", "word overlap", lab, pred))
    return out
