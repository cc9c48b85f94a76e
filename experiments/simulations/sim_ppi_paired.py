"""Do ragsweep's paired prediction-powered intervals cover when two systems differ on few questions?

    nice -n 10 python experiments/simulations/sim_ppi_paired.py --data ../shared/data     # minutes on 2 shared cores
    python experiments/simulations/sim_ppi_paired.py --draws 200 --ns 100                 # a quick look

Built on held-out data with a label for every item (as ``experiments/simulations/ppi_coverage.py``): RAGBench
validation (graded ``utilization_score`` with the shipped GPT-3.5 score as the judge; yes/no
``adherence_score`` with word overlap and with the shipped GPT-3.5 score) and WiCE dev (yes/no
supported, word overlap). Each item is system A's answer: its label and its judge value. System B
answers the same questions and differs from A on a random share ``s`` of them: there B's label and
judge value are another item's (for yes/no labels, an item whose label differs from A's), so the
human difference is non-zero on about ``s`` of the questions and the judge sees a noisy version of
it. Per draw: a new B, n labelled questions drawn uniformly without replacement; the target is the
mean human difference B - A over all N questions. Counted: how often each 95% interval covers it,
and its mean width (0..1 scale):

- ``clt``: PPI++ on the per-question differences, the CLT interval of ``ppi_py.ppi_mean_ci``
  (ragsweep's paired interval before issue 34);
- ``now``: what ragsweep uses (:func:`ragsweep.analysis.ppi.paired_mean`): the CLT interval when at least
  ``ppi.MIN_NONZERO`` labelled human differences are non-zero, else ``labels_betting``;
- ``betting_ppi`` (measured, not adopted): PPI++'s decomposition with each part by a betting
  interval valid for bounded values (the judge's mean difference over the unlabelled questions at
  alpha/10, the labelled rectifier y - lambda * judge, range 1 + lambda, at 9 alpha/10): valid, but
  wider than ``labels_betting`` on every row measured, since its rectifier's range is 1 + lambda;
- ``labels_betting``: the betting interval of the labelled human differences alone.

Monte Carlo standard error of a coverage near 0.95 over D draws: sqrt(0.95 * 0.05 / D).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import load_sets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "experiments" / "results"
METHODS = ("clt", "now", "betting_ppi", "labels_betting")


def system_b(y: np.ndarray, f: np.ndarray, share: float, binary: bool, rng: np.random.Generator):
    """B's labels and judge values: A's, except on a random ``share`` of the questions."""
    N = y.size
    moved = np.flatnonzero(rng.random(N) < share)
    yb, fb = y.copy(), f.copy()
    if binary:  # a donor whose label is the other one
        ones, zeros = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        pool_one = y[moved] == 0  # A says no: the donor says yes
        donor = np.where(pool_one, ones[rng.integers(ones.size, size=moved.size)],
                         zeros[rng.integers(zeros.size, size=moved.size)])
    else:  # any other item
        donor = rng.integers(N - 1, size=moved.size)
        donor = donor + (donor >= moved)
    yb[moved], fb[moved] = y[donor], f[donor]
    return yb, fb


def betting_ppi(y: np.ndarray, f: np.ndarray, fu: np.ndarray, alpha: float = 0.05) -> tuple[float, float]:
    """PPI++ with both parts by betting intervals (see the module docstring); not adopted."""
    from ragsweep.analysis import ppi
    from ragsweep.analysis import bounded

    lam = ppi._lam(y, f, fu)
    lam = lam if math.isfinite(lam) else 0.0
    rect = y - lam * f
    if lam == 0:
        iv = bounded.interval(rect, 1.0, alpha=alpha)
        return iv.low, iv.high
    judge = bounded.interval(fu, 1.0, alpha=alpha / 10)
    fix = bounded.interval(rect, 1.0 + lam, alpha=alpha * 0.9)
    return lam * judge.low + fix.low, lam * judge.high + fix.high


def intervals(yd: np.ndarray, fd: np.ndarray, lab: np.ndarray, unl: np.ndarray) -> dict[str, tuple[float, float]]:
    import warnings

    from ragsweep.analysis import ppi
    from ragsweep.analysis import bounded

    with warnings.catch_warnings():  # ppi_py's lambda divides 0 by 0 when the judge's differences are all 0
        warnings.simplefilter("ignore", RuntimeWarning)
        e = ppi.mean(yd[lab], fd[lab], fd[unl], minimum=2)
        now = ppi.paired_mean(yd[lab], fd[lab], fd[unl])
        bp = betting_ppi(yd[lab], fd[lab], fd[unl])
    lb = bounded.interval(yd[lab], 1.0)
    clt = (e.low, e.high) if math.isfinite(e.low) and math.isfinite(e.high) else (float(yd[lab].mean()),) * 2
    return {"clt": clt, "now": (now.low, now.high), "betting_ppi": bp, "labels_betting": (lb.low, lb.high)}


def simulate(y: np.ndarray, f: np.ndarray, binary: bool, share: float, n: int, draws: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    N = y.size
    cov = {k: 0 for k in METHODS}
    width = {k: 0.0 for k in METHODS}
    nonzero = 0
    for _ in range(draws):
        yb, fb = system_b(y, f, share, binary, rng)
        yd, fd = yb - y, fb - f
        truth = float(yd.mean())
        perm = rng.permutation(N)
        lab, unl = perm[:n], perm[n:]
        nonzero += int(np.count_nonzero(yd[lab]))
        for k, (lo, hi) in intervals(yd, fd, lab, unl).items():
            cov[k] += lo <= truth <= hi
            width[k] += hi - lo
    return {"n": n, "N": N, "share": share, "draws": draws, "labelled_nonzero_mean": nonzero / draws,
            **{f"cov_{k}": cov[k] / draws for k in METHODS}, **{f"width_{k}": width[k] / draws for k in METHODS}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--ns", default="50,100,200,300")
    ap.add_argument("--shares", default="0.01,0.1,0.5", help="shares of questions where B differs from A")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--out", default=str(RESULTS / "sim_ppi_paired.md"))
    a = ap.parse_args(argv)
    data = Path(a.data)
    sets = load_sets(data) if data.is_dir() else []
    if not sets:
        print(f"sim_ppi_paired: skipped: no RAGBench or WiCE data under {data} (give --data PATH)")
        return 0
    import platform

    from ragsweep.analysis import ppi

    t0 = time.perf_counter()
    rows = []
    for name, judge, y, f in sets:
        binary = bool(np.all(np.isin(y, (0.0, 1.0))))
        for share in (float(s) for s in a.shares.split(",")):
            for i, n in enumerate(int(x) for x in a.ns.split(",")):
                if n > y.size / 2:
                    continue
                r = simulate(y, f, binary, share, n, a.draws, a.seed + i)
                r.update(set=name, judge=judge, labels="yes/no" if binary else "graded",
                         accepted=n >= ppi.min_labels([0.0, 1.0] if binary else [0.5]))
                rows.append(r)
                print(f"{name} / {judge} s={share} n={n}: " + "  ".join(
                    f"{k} {r['cov_' + k]:.3f} (w {r['width_' + k]:.3f})" for k in METHODS), flush=True)
    secs = time.perf_counter() - t0
    mc = math.sqrt(0.95 * 0.05 / a.draws)
    lines = ["# Paired prediction-powered intervals: coverage when B differs from A on a share of the questions", "",
             f"`python experiments/simulations/sim_ppi_paired.py --draws {a.draws}` ({secs:.0f} s, seed {a.seed}, on "
             f"{platform.machine()}). Target: the mean human difference B - A over all N questions; 95% intervals; "
             f"Monte Carlo standard error of a coverage near 0.95: {mc:.4f}. 'shown': n reaches ragsweep's paired minimum "
             f"({ppi.MIN_LABELS} graded, {ppi.MIN_LABELS_BINARY} yes/no labels). Widths: mean total width, 0..1 scale.", "",
             "| data set (judge) | labels | N | B differs on | n | shown | labelled non-zero differences (mean) | "
             "coverage: CLT (before) / now / betting PPI++ / labels-only betting | width: CLT / now / betting PPI++ / "
             "labels-only betting |", "|---|---|---:|---:|---:|---|---:|---|---|"]
    for r in rows:
        cov = " / ".join(f"{r['cov_' + k]:.3f}" for k in METHODS)
        wid = " / ".join(f"{r['width_' + k]:.3f}" for k in METHODS)
        lines.append(f"| {r['set']} ({r['judge']}) | {r['labels']} | {r['N']} | {r['share']:.0%} | {r['n']} | "
                     f"{'yes' if r['accepted'] else 'no'} | {r['labelled_nonzero_mean']:.1f} | {cov} | {wid} |")
    shown = [r for r in rows if r["accepted"]]
    lines += ["", f"Lowest coverage where ragsweep shows the interval: now {min(r['cov_now'] for r in shown):.3f}, "
              f"CLT (before) {min(r['cov_clt'] for r in shown):.3f}." if shown else ""]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(text, encoding="utf-8")
    Path(a.out).with_suffix(".json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if not shown or min(r["cov_now"] for r in shown) >= 0.93 else 1


if __name__ == "__main__":
    sys.exit(main())
