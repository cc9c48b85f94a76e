"""How often "barely moves" is called for a step that moves: the rule before issue 34 against the
interval that replaced it, and which valid interval is tightest.

    nice -n 10 python experiments/simulations/sim_equivalence.py                 # minutes on 2 shared cores
    python experiments/simulations/sim_equivalence.py --draws 200 --ns 10,30     # a quick look

A step's paired differences d_i = b_i - a_i of a 0-100 metric (tol 2, the default 2% of the scale)
are drawn from four shapes, each at a true mean difference ``effect``:

- ``jumps``: +100 on a share ``effect / 100`` of the questions, 0 elsewhere (a real change carried by
  a few questions: the issue's +100 with probability 0.03 is effect 3 = 1.5 x tol);
- ``binary``: a 0/1 metric (x100) where B gains on a share g and loses on a share l of the questions
  (g - l = effect / 100, l = 0.02): most differences exactly 0;
- ``graded``: a graded metric that changes on 10% of the questions by N(10 x effect, 15^2), clipped;
- ``dense``: every question changes by N(effect, 10^2), clipped to [-100, 100].

For every (shape, effect, n) cell, ``--draws`` seeded steps; a step is called "barely moves" when

- ``tost_signflip`` (before issue 34): the two one-sided sign-flip tests of mean(d -+ tol) both give
  p < alpha (``stats.sign_flip_p``; 9,999 random flips above n = 30 instead of 199,999: a p near
  alpha = 0.05 needs no more, and only p < alpha is counted here); simulated up to n = 100 (the
  issue's range), its random flips being slow beyond;
- ``betting`` (now): the 95% betting interval (:mod:`ragsweep.analysis.bounded`) lies inside ±tol;
- ``empirical_bernstein``: Maurer & Pontil's (2009) bound, 95% two-sided, inside ±tol;
- ``hoeffding``: Hoeffding's 95% two-sided interval inside ±tol.

A call at |effect| >= tol is a false "barely moves": its rate must stay at or below alpha. At
effect 0 the rate is the power, and the mean half-width says which valid interval is tightest.
Rates carry their Monte Carlo standard error sqrt(r (1 - r) / draws).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results"
R, TOL, ALPHA = 100.0, 2.0, 0.05
#: the old TOST is simulated up to here (the issue's n = 10-100): its random flips make larger n slow
TOST_MAX_N = 100
METHODS = ("tost_signflip", "betting", "empirical_bernstein", "hoeffding")


def draw(shape: str, effect: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if shape == "jumps":
        return np.where(rng.random(n) < effect / R, R, 0.0)
    if shape == "binary":
        loss = 0.02
        u = rng.random(n)
        return np.where(u < effect / R + loss, R, 0.0) - np.where(u > 1 - loss, R, 0.0)
    if shape == "graded":
        moved = rng.random(n) < 0.1
        return np.clip(np.where(moved, rng.normal(10 * effect, 15, n), 0.0), -R, R)
    return np.clip(rng.normal(effect, 10, n), -R, R)


def true_mean(shape: str, effect: float, rng: np.random.Generator) -> float:
    """The step's true mean difference (clipping moves graded / dense slightly: estimated on 2e6 draws)."""
    if shape in ("jumps", "binary"):
        return effect
    return float(draw(shape, effect, 2_000_000, rng).mean())


def half_width(d: np.ndarray, method: str) -> tuple[float, float]:
    """(low, high) of the 95% interval of the mean of d (values in [-R, R])."""
    from ragsweep.analysis import bounded

    n = d.size
    if method == "betting":
        iv = bounded.interval(d, R, alpha=ALPHA)
        return iv.low, iv.high
    m = float(d.mean())
    if method == "hoeffding":
        h = 2 * R * math.sqrt(math.log(2 / ALPHA) / (2 * n))
    else:  # empirical Bernstein on x = (d + R) / 2R in [0, 1], each side at alpha / 2
        x = (d + R) / (2 * R)
        v = float(x.var(ddof=1)) if n > 1 else 0.25
        lg = math.log(4 / ALPHA)
        h = 2 * R * (math.sqrt(2 * v * lg / n) + 7 * lg / (3 * (n - 1))) if n > 1 else 2 * R
    return m - h, m + h


def tost(d: np.ndarray) -> bool:
    from ragsweep.analysis import stats

    lo = stats.sign_flip_p(d - TOL, alternative="less", flips=9999)[0]
    hi = stats.sign_flip_p(d + TOL, alternative="greater", flips=9999)[0]
    return max(lo, hi) < ALPHA


def cell(shape: str, effect: float, n: int, draws: int, seed: int) -> dict:
    rng = np.random.default_rng([seed, n, int(effect * 100), len(shape)])
    calls = {k: 0 for k in METHODS}
    width = {k: 0.0 for k in METHODS if k != "tost_signflip"}
    with_tost = n <= TOST_MAX_N
    for _ in range(draws):
        d = draw(shape, effect, n, rng)
        calls["tost_signflip"] += tost(d) if with_tost else 0
        for k in width:
            lo, hi = half_width(d, k)
            calls[k] += -TOL < lo and hi < TOL
            width[k] += (hi - lo) / 2
    out = {"shape": shape, "effect": effect, "true_mean": true_mean(shape, effect, rng), "n": n, "draws": draws}
    for k in METHODS:
        r = calls[k] / draws if (k != "tost_signflip" or with_tost) else float("nan")
        out[k] = r
        out[f"{k}_mc_se"] = math.sqrt(max(r * (1 - r), 1 / draws) / draws) if math.isfinite(r) else float("nan")
    for k, w in width.items():
        out[f"{k}_half_width"] = w / draws
    return out


def markdown(rows: list[dict], secs: float, args: argparse.Namespace) -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    lines = [f"# 'Barely moves': false-equivalence rate and power (0-100 metric, tol {TOL:g}, alpha {ALPHA})", "",
             f"`python experiments/simulations/sim_equivalence.py --draws {args.draws}` ({secs:.0f} s, seed {args.seed}, on {cpu}). "
             "Rate = share of simulated steps called 'barely moves' (the interval inside ±tol; before: TOST p < alpha); "
             "± its Monte Carlo standard error. Rows with |true mean| >= tol are false calls and must stay at or below "
             "alpha; rows at 0 show power. Half-width: mean over the draws (0-100 scale).", "",
             "| shape | true mean | n | TOST sign-flip (before) | betting (now) | empirical Bernstein | Hoeffding | "
             "half-width: betting / EB / Hoeffding |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        bad = abs(r["true_mean"]) >= TOL - 1e-9
        f = lambda k: "-" if not math.isfinite(r[k]) else (f"{r[k]:.3f} ± {r[k + '_mc_se']:.3f}"  # noqa: E731
                                                           + (" **!**" if bad and r[k] > ALPHA + 2 * r[k + '_mc_se'] else ""))
        lines.append(f"| {r['shape']} | {r['true_mean']:.2f} | {r['n']} | {f('tost_signflip')} | {f('betting')} | "
                     f"{f('empirical_bernstein')} | {f('hoeffding')} | {r['betting_half_width']:.2f} / "
                     f"{r['empirical_bernstein_half_width']:.2f} / {r['hoeffding_half_width']:.2f} |")
    worst = max((r["betting"] for r in rows if abs(r["true_mean"]) >= TOL - 1e-9), default=0.0)
    before = max((r["tost_signflip"] for r in rows if abs(r["true_mean"]) >= TOL - 1e-9
                  and math.isfinite(r["tost_signflip"])), default=0.0)
    lines += ["", f"Largest false-equivalence rate at |true mean| >= tol: betting {worst:.3f}, TOST sign-flip (before) "
              f"{before:.3f} (**!**: above alpha by more than two Monte Carlo standard errors)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="jumps,binary,graded,dense")
    ap.add_argument("--effects", default="0,2,3", help="true mean differences on the 0-100 scale (tol is 2)")
    ap.add_argument("--ns", default="10,20,30,60,100,300,1000")
    ap.add_argument("--draws", type=int, default=600)
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--out", default=str(RESULTS / "sim_equivalence.md"))
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    t0 = time.time()
    rows = []
    for shape in a.shapes.split(","):
        for effect in (float(x) for x in a.effects.split(",")):
            for n in (int(x) for x in a.ns.split(",")):
                r = cell(shape, effect, n, a.draws, a.seed)
                rows.append(r)
                print(f"{shape:7} mean {r['true_mean']:5.2f} n={n:4}: TOST {r['tost_signflip']:.3f} betting {r['betting']:.3f} "
                      f"EB {r['empirical_bernstein']:.3f} Hoeffding {r['hoeffding']:.3f}; half-width betting "
                      f"{r['betting_half_width']:.2f} EB {r['empirical_bernstein_half_width']:.2f}", flush=True)
    text = markdown(rows, time.time() - t0, a)
    print(text)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    bad = [r for r in rows if abs(r["true_mean"]) >= TOL - 1e-9 and r["betting"] > ALPHA + 2 * r["betting_mc_se"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
