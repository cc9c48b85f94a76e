"""Are ragsweep's prediction-powered intervals valid? Coverage of the full-set mean (issue 25).

    python experiments/simulations/ppi_coverage.py --data ../shared/data [--draws 2000] [--out experiments/results/ppi_coverage.md]

On data with labels for every item, treat the labels as the "human" ones and a cheap judge's
scores as the judge; for each n, draw n labelled items uniformly at random (without replacement)
``--draws`` times, treat the other items as unlabelled judge outputs, and count how often each 95%
interval covers the mean label over the full set:

- PPI: :func:`ragsweep.analysis.ppi.mean` (``ppi_py.ppi_mean_ci``, PPI++ with tuned lambda) — the
  interval ragsweep reports from ``ragsweep.analysis.ppi.MIN_LABELS`` labels (computed here below that
  too, to show why nothing is reported there);
- PPI (t): the same centre and standard error with Student's t quantile (n - 1 df), a small-n
  fix that was measured and not adopted;
- judge-only: the normal interval of the judge's mean over the unlabelled items (what a sweep
  reports without labels);
- labels-only: the classical interval of the n labels alone (same quantile rule as PPI).

Data sets (skipped when absent; none ships with the repository):

- RAGBench validation, 7 subsets pooled (1,927 answers): label ``adherence_score`` (GPT-4
  annotation: every response sentence supported). Judges: word overlap (share of the response's
  content words found in the documents, the offline judge's level out of sample) and RAGBench's
  shipped ``gpt3_adherence`` (GPT-3.5), where filled.
- RAGBench validation: label ``utilization_score``; judge the shipped ``gpt35_utilization``.
- WiCE dev (349 claims): label 1 = supported (partially / not supported = 0); judge word overlap
  of the claim with its evidence.

Monte Carlo error of a coverage near 0.95 over D draws: sqrt(0.95 * 0.05 / D) (0.005 at 2,000).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from common import load_sets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NS = (10, 25, 50, 100, 300)
RESULTS = ROOT / "experiments" / "results"


def simulate(y: np.ndarray, yhat: np.ndarray, n: int, draws: int, seed: int) -> dict[str, Any]:
    """Coverage and mean width of the four intervals over ``draws`` random labelled sets of size n."""
    from scipy.stats import norm

    from ragsweep.analysis import ppi

    truth = float(y.mean())
    N = y.size
    rng = np.random.default_rng(seed)
    from scipy.stats import t

    z = float(norm.ppf(0.975))
    tq = float(t.ppf(0.975, df=n - 1))
    cov = {k: 0 for k in ("ppi", "ppi_t", "judge", "labels")}
    width = {k: 0.0 for k in cov}
    lams = []
    for _ in range(draws):
        perm = rng.permutation(N)
        lab, unl = perm[:n], perm[n:]
        e = ppi.mean(y[lab], yhat[lab], yhat[unl], minimum=2)
        lams.append(e.lam)
        th = tq * e.se
        zl, zh = e.mean - th, e.mean + th
        jm, jh = float(yhat[unl].mean()), z * float(yhat[unl].std()) / math.sqrt(unl.size)
        _, cl, ch = ppi.classical(y[lab])
        for k, (lo, hi) in (("ppi", (e.low, e.high)), ("ppi_t", (zl, zh)), ("judge", (jm - jh, jm + jh)), ("labels", (cl, ch))):
            cov[k] += lo <= truth <= hi
            width[k] += hi - lo
    fpc = float(2 * norm.cdf(z / math.sqrt(1 - n / N)) - 1)  # a superpopulation interval's coverage of the set mean
    return {"n": n, "N": N, "truth": truth, "draws": draws, "lam_median": float(np.median(lams)), "expected_fpc": fpc,
            "shown": n >= ppi.min_labels(y),
            **{f"cov_{k}": cov[k] / draws for k in cov}, **{f"width_{k}": width[k] / draws for k in width}}


def table(results: list[dict[str, Any]], draws: int) -> str:
    mc = math.sqrt(0.95 * 0.05 / draws)
    out = ["| data set | judge | N | label mean | n | ragsweep shows PPI | PPI coverage | expected (n/N) | PPI (t) coverage | "
           "judge-only coverage | labels-only coverage | PPI width | labels-only width | judge-only width | PPI / labels-only "
           "width | median lambda |",
           "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        out.append(f"| {r['set']} | {r['judge']} | {r['N']} | {r['truth']:.3f} | {r['n']} | {'yes' if r['shown'] else 'no'} | "
                   f"{r['cov_ppi']:.3f} | {r['expected_fpc']:.3f} | {r['cov_ppi_t']:.3f} | "
                   f"{r['cov_judge']:.3f} | {r['cov_labels']:.3f} | {r['width_ppi']:.3f} | {r['width_labels']:.3f} | "
                   f"{r['width_judge']:.3f} | {r['width_ppi'] / r['width_labels']:.3f} | {r['lam_median']:.2f} |")
    out += ["", f"Monte Carlo standard error of a coverage near 0.95: {mc:.4f} ({draws} draws per row). "
            "Widths are mean total widths on the label's 0..1 scale. 'expected (n/N)': the coverage a correct interval for "
            "the population the items come from has for the mean of these N items when n of them are labelled "
            "(2 Phi(1.96 / sqrt(1 - n/N)) - 1): the labelled items are drawn without replacement, so at large n/N the "
            "full-set mean varies less than the interval allows and coverage above 0.95 is expected, not a defect. "
            "'ragsweep shows PPI': n is at least the minimum for the labels' kind (ragsweep.analysis.ppi.min_labels: 100 for "
            "yes/no labels, 50 for graded ones)."]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="the shared data root")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS / "ppi_coverage.md"))
    args = ap.parse_args(argv)
    data = Path(args.data)
    sets = load_sets(data) if data.is_dir() else []
    if not sets:
        print(f"ppi_coverage: skipped: no RAGBench or WiCE data under {data} (give --data PATH)")
        return 0
    t0 = time.perf_counter()
    results = []
    for name, judge, y, yhat in sets:
        for i, n in enumerate(int(x) for x in args.ns.split(",")):
            if n >= y.size / 2:
                print(f"  {name} / {judge}: n={n} skipped (more than half of the {y.size} items)")
                continue
            r = simulate(y, yhat, n, args.draws, args.seed + i)
            r.update(set=name, judge=judge)
            results.append(r)
            print(f"  {name} / {judge}: n={n} PPI {r['cov_ppi']:.3f} judge-only {r['cov_judge']:.3f} labels-only "
                  f"{r['cov_labels']:.3f}; widths {r['width_ppi']:.3f} / {r['width_labels']:.3f}", flush=True)
    secs = time.perf_counter() - t0
    from ragsweep.analysis import ppi

    text = ("# Prediction-powered intervals: coverage of the full-set mean\n\n"
            f"`python experiments/simulations/ppi_coverage.py --draws {args.draws}` ({secs:.0f} s on a shared 2-core machine). "
            f"ragsweep's PPI interval: {ppi.METHOD} from {ppi.MIN_LABELS_BINARY} labels for yes/no labels and "
            f"{ppi.MIN_LABELS} for graded ones, none below (the rows below show why). Items: the labelled set is drawn uniformly without replacement; the "
            "target is the mean label over all N items.\n\n" + table(results, args.draws) + "\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
