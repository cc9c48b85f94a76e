"""How often the successive-halving sweeper drops a system that is in fact tied with the best.

    python experiments/sim_halving_false_drop.py                      # k = 4, 8, 16; n = 12; 2,000 rungs each
    python experiments/sim_halving_false_drop.py --reps 500 --out experiments/results/sim_halving_false_drop.md

k identical systems answer the same n questions. A question has a difficulty u ~ U(0, 1) shared by
every system; a system's value for it is

- ``continuous``: u + N(0, 0.2^2) (an F1-like score with question and system noise);
- ``binary``: Bernoulli(u) (a 0/1 metric such as exact match or recall@1: many ties).

So every system has the same expected value on every question: any "dropped:worse" is a false
drop. For each rung this counts whether at least one system was dropped as worse, under

- ``mcb``: :func:`ragsweep.analysis.search.decide_rung` as it is now: rank over the shared questions,
  comparison with the best by the within-question permutation test of the range of the system
  means (:func:`ragsweep.analysis.stats.best_p`, 9,999 permutations);
- ``best_vs_each_holm``: the rule before issue 22: each system against the data-chosen best by
  the two-sided paired sign-flip test (exact at n = 12), Holm over the k - 1 tests.

The rate is printed with its Monte Carlo 95% interval (Wilson). Nominal level: alpha = 0.05.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ragsweep.analysis import stats
from ragsweep.analysis.search import Entry, decide_rung


def rung(model: str, k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    u = rng.uniform(0, 1, n)
    if model == "continuous":
        return u[None, :] + rng.normal(0, 0.2, (k, n))
    return (rng.uniform(0, 1, (k, n)) < u[None, :]).astype(float)


def dropped_mcb(x: np.ndarray, alpha: float, seed: int) -> bool:
    entries = [Entry(f"s{j}", {f"q{i}": float(v) for i, v in enumerate(row)}) for j, row in enumerate(x)]
    return any(d.decision == "dropped:worse" for d in decide_rung(entries, keep=len(entries), alpha=alpha, seed=seed))


def dropped_best_vs_each_holm(x: np.ndarray, alpha: float) -> bool:
    means = x.mean(axis=1)
    best = int(np.argmax(means))
    others = [j for j in range(len(x)) if j != best]
    ps = [stats.sign_flip_p(x[j] - x[best])[0] for j in others]
    adj = stats.holm(ps)
    return any(math.isfinite(p) and p < alpha and means[j] < means[best] for j, p in zip(others, adj))


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="4,8,16")
    ap.add_argument("--n", type=int, default=12, help="questions per rung")
    ap.add_argument("--reps", type=int, default=2000, help="simulated rungs per (model, k)")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--models", default="continuous,binary")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--out", default="", help="also write the table (markdown) and the figures (.json beside it)")
    a = ap.parse_args(argv)
    rows = []
    t0 = time.time()
    for model in a.models.split(","):
        for k in [int(x) for x in a.ks.split(",")]:
            rng = np.random.default_rng([a.seed, k, len(model)])
            mcb = holm = 0
            for r in range(a.reps):
                x = rung(model, k, a.n, rng)
                mcb += dropped_mcb(x, a.alpha, seed=r)
                holm += dropped_best_vs_each_holm(x, a.alpha)
            row = {"model": model, "k": k, "n": a.n, "reps": a.reps, "alpha": a.alpha,
                   "mcb": mcb / a.reps, "mcb_ci": wilson(mcb, a.reps),
                   "best_vs_each_holm": holm / a.reps, "best_vs_each_holm_ci": wilson(holm, a.reps)}
            rows.append(row)
            print(f"{model:10} k={k:2} n={a.n}: P(some tied system dropped) mcb {row['mcb']:.3f} "
                  f"[{row['mcb_ci'][0]:.3f}, {row['mcb_ci'][1]:.3f}]   best-vs-each+Holm {row['best_vs_each_holm']:.3f} "
                  f"[{row['best_vs_each_holm_ci'][0]:.3f}, {row['best_vs_each_holm_ci'][1]:.3f}]   ({a.reps} rungs)",
                  flush=True)
    secs = time.time() - t0
    lines = [f"# Halving: false-drop rate for k tied systems (n = {a.n} questions, alpha = {a.alpha})", "",
             f"`python experiments/sim_halving_false_drop.py --reps {a.reps}` ({secs:.0f} s on a shared 2-core machine). "
             "Rate = share of simulated rungs in which at least one of k identical systems was dropped as worse; "
             "[95% Wilson interval] over the rungs.", "",
             "| values | k | rungs | comparison with the best (now) | best vs each + Holm (before) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['k']} | {r['reps']} | {r['mcb']:.3f} [{r['mcb_ci'][0]:.3f}, {r['mcb_ci'][1]:.3f}] | "
                     f"{r['best_vs_each_holm']:.3f} [{r['best_vs_each_holm_ci'][0]:.3f}, {r['best_vs_each_holm_ci'][1]:.3f}] |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    worst = max(r["mcb"] for r in rows)
    return 0 if worst <= a.alpha + 2 * math.sqrt(a.alpha * (1 - a.alpha) / a.reps) else 1


if __name__ == "__main__":
    sys.exit(main())
