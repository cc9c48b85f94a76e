"""Coverage of the metric-over-valid-questions interval (``ragsweep.analysis.ppi.valid_mean``, issue 37).

A generated set of N questions, a share of them invalid; a yes/no human metric label m (e.g. the
retrieved label behind claim recall) whose rate differs between valid and invalid questions; a judge
that predicts m with noise; people label n random questions for validity and m. The target is the
mean of m over the valid questions. Each cell: 2,000 draws of the labelled sample from one fixed
population; coverage = share of 95% intervals that hold the target.

    python experiments/simulations/sim_ppi_valid.py            # writes experiments/results/sim_ppi_valid.md / .json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from common import machine

ROOT = Path(__file__).resolve().parents[2]

N = 1500
DRAWS = 2000
CELLS = [  # share valid, m rate on valid, m rate on invalid, judge noise (sd, before clipping to [0, 1])
    (0.95, 0.7, 0.3, 0.3),
    (0.8, 0.7, 0.3, 0.3),
    (0.5, 0.7, 0.3, 0.3),
    (0.8, 0.9, 0.1, 0.3),
    (0.8, 0.7, 0.3, 0.6),  # a poor judge
]
LABELS = (100, 200, 400)


def main() -> int:
    from ragsweep.analysis import ppi

    rng = np.random.default_rng(37)
    rows = []
    for p_valid, m_valid, m_invalid, noise in CELLS:
        valid = (rng.random(N) < p_valid).astype(float)
        m = np.where(valid == 1, rng.random(N) < m_valid, rng.random(N) < m_invalid).astype(float)
        judge = np.clip(m + rng.normal(0, noise, N), 0, 1)
        target = float(m[valid == 1].mean())
        jd = {f"q{i}": float(judge[i]) for i in range(N)}
        for n in LABELS:
            hit = width = 0.0
            none = 0
            for _ in range(DRAWS):
                lab = rng.choice(N, n, replace=False)
                est = ppi.valid_mean(jd, {f"q{i}": float(m[i]) for i in lab}, {f"q{i}": float(valid[i]) for i in lab})
                if est is None:
                    none += 1
                    continue
                hit += est.low <= target <= est.high
                width += est.high - est.low
            got = DRAWS - none
            rows.append({"p_valid": p_valid, "m_valid": m_valid, "m_invalid": m_invalid, "judge_noise": noise, "labels": n,
                         "target": target, "coverage": hit / got if got else float("nan"),
                         "mean_width": width / got if got else float("nan"), "no_interval": none})
            print(rows[-1], flush=True)
    out = ROOT / "experiments" / "results"
    (out / "sim_ppi_valid.json").write_text(json.dumps({"machine": machine(), "N": N, "draws": DRAWS, "rows": rows}, indent=1))
    lines = ["# Coverage of the metric over the valid questions (ppi.valid_mean)", "",
             f"`python experiments/simulations/sim_ppi_valid.py`: a set of {N} questions, {DRAWS} draws of the labelled sample per "
             "cell, yes/no labels, nominal 95%. Machine: " + machine() + ".", "",
             "| share valid | m on valid / invalid | judge noise | labels | target | coverage | mean width |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['p_valid']} | {r['m_valid']} / {r['m_invalid']} | {r['judge_noise']} | {r['labels']} | "
                     f"{r['target']:.3f} | {r['coverage']:.3f} | {r['mean_width']:.3f} |")
    (out / "sim_ppi_valid.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
