"""How the trained checker reads a long reference, chosen on the allowed parts only.

    python -m experiments.meta_eval.checker_windows --weights FILE --data ../shared/data [--grid 2x3,3x2,3x1] \
        [--precision fp32|bf16|int8]

A reference longer than ``whole_words`` words is cut into windows of ``window`` adjacent sentences,
the ``k`` windows that hold most of the claim's content words are scored, and P is their max
(``ragsweep.judge.trained.select_windows``). This scores every ``window x k`` of ``--grid`` on WiCE
``select`` claims and RAGBench ``dev`` halves (the parts the frozen splits allow choices on; the
reported parts are never read) with the same weights, and prints each one's AUROCs beside the
tokens it makes the model read (its cost). Each window is scored once: the grid's cells share them.
``--precision`` scores them in another arithmetic (whether int8 keeps the AUROC, on the same parts).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import checker_eval as E  # noqa: E402


def parse_grid(text: str) -> list[tuple[int, int]]:
    out = []
    for cell in text.split(","):
        w, _, k = cell.strip().partition("x")
        if not (w.isdigit() and k.isdigit() and int(w) > 0 and int(k) > 0):
            raise SystemExit(f"--grid: {cell!r} is not WINDOWxK (e.g. 3x2)")
        out.append((int(w), int(k)))
    return out


def grid_scores(ck: Any, suites: dict[str, Any], grid: Sequence[tuple[int, int]], max_rows: int | None = None,
                ) -> list[dict[str, Any]]:
    """AUROCs on the allowed parts and tokens read, for each (window, k) of ``grid``."""
    from ragsweep.judge.trained import encode_pairs, select_windows

    memo: dict[tuple[str, str], float] = {}
    out = []
    for window, k in grid:
        used = {"windows": 0, "tokens": 0}

        def scorer(pairs: Sequence[tuple[str, str]], window: int = window, k: int = k,
                   used: dict[str, int] = used) -> np.ndarray:
            per = [[(piece, str(c)) for piece in select_windows(str(c), str(r), window, k, ck.config.whole_words)]
                   if str(c).strip() and str(r).strip() else [] for c, r in pairs]
            flat = list(dict.fromkeys(x for p in per for x in p))
            used["windows"] += sum(len(p) for p in per)
            used["tokens"] += sum(len(e.ids) for e in encode_pairs(ck._tok, flat, ck._max_length))
            new = [x for x in flat if x not in memo]
            if new:
                memo.update(zip(new, ck.score_windows(new)))
            return np.array([max(memo[x] for x in p) if p else 0.0 for p in per])

        t0 = time.time()
        m = E.metrics(suites, E.score(suites, scorer, "select", "dev", max_rows))
        out.append({"window": window, "k": k, "wice_select": m.get("wice", {}).get("auroc"),
                    "ragbench_dev": m.get("ragbench", {}).get("auroc"), **used, "s": round(time.time() - t0, 1)})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.meta_eval.splits import load_splits

    ap = argparse.ArgumentParser(prog="python -m experiments.meta_eval.checker_windows", description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True, help="a weights file of train_checker.py")
    ap.add_argument("--data", default="../shared/data", help="evaluation data root")
    ap.add_argument("--grid", default="2x3,2x2,3x3,3x2,3x1,4x1", help="WINDOWxK cells, comma-separated")
    ap.add_argument("--rows", type=int, default=None, help="only the first N dev rows of each RAGBench subset")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--precision", default="auto", help="the checker's arithmetic: auto, fp32, bf16 or int8")
    args = ap.parse_args(argv)
    grid = parse_grid(args.grid)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from ragsweep.judge.trained import TrainedChecker

    ck = TrainedChecker(weights=args.weights, precision=args.precision)
    ck.load()
    suites = E.load_suites(Path(args.data), load_splits())
    if not suites:
        raise SystemExit(f"--data {args.data}: neither wice/ nor ragbench/ found")
    print(f"{ck.path.name}: max {ck._max_length} tokens a pair, whole references up to {ck.config.whole_words} words, "
          f"{ck.precision}")
    print("| window x k | WiCE select AUROC | RAGBench dev AUROC | windows | tokens read |")
    print("|---|---|---|---|---|")
    for r in grid_scores(ck, suites, grid, args.rows):
        f = {k: "-" if r[k] is None else f"{r[k]:.3f}" for k in ("wice_select", "ragbench_dev")}
        print(f"| {r['window']} x {r['k']} | {f['wice_select']} | {f['ragbench_dev']} | {r['windows']:,} | {r['tokens']:,} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
