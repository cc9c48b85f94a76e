"""The trained checker's speed per arithmetic (fp32, bf16, int8) on the same real pairs, in turn.

    python experiments/benchmarks/bench_checker.py --weights FILE [--pairs 300] [--rounds 3] [--threads 2]

The pairs are the built-in ClapNQ dev set's answers against their passages (each passage as one
reference: the checker picks its best windows as in a sweep), in the order of the file. Every round
scores all of them once per precision, the precisions in turn (so load and other work on the machine
fall on each alike); a fresh checker per precision, loaded and warmed on 8 pairs before the clock.
Prints windows a second per round, |P - P_fp32| (mean, max) and the labels that differ from fp32's
at the file's context threshold. Agreement with people is not measured here: whether int8 keeps the
AUROC is ``experiments/meta_eval/checker_windows.py --precision``'s question, on the allowed parts.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from common import cpu_line


def pairs(n: int) -> list[tuple[str, str]]:
    """The first ``n`` (answer, gold passage) pairs of the built-in ClapNQ set, read by its loader."""
    from ragsweep.corpus.dataset.loaders import ClapNQ

    ds = ClapNQ(limit=n).load()
    text = {d.doc_id: d.text for d in ds.documents}
    return [(q.gt_answer, text[q.relevant[0].doc_id]) for q in ds.queries if q.gt_answer]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", required=True, help="a weights file of train_checker.py")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    args = ap.parse_args()
    import torch

    from ragsweep.judge.trained import TrainedChecker

    torch.set_num_threads(args.threads)
    work = pairs(args.pairs)
    print(cpu_line())
    print(f"{len(work)} ClapNQ (answer, passage) pairs, {args.threads} torch threads, torch {torch.__version__}")
    checkers = {p: TrainedChecker(weights=args.weights, precision=p) for p in args.precisions.split(",")}
    for ck in checkers.values():
        ck.score_pairs(work[:8])
    speed: dict[str, list[float]] = {p: [] for p in checkers}
    scores: dict[str, np.ndarray] = {}
    for _ in range(args.rounds):
        for p, ck in checkers.items():
            before = ck.stats["windows"]
            t = time.perf_counter()
            scores[p] = np.asarray(ck.score_pairs(work))
            speed[p].append((ck.stats["windows"] - before) / (time.perf_counter() - t))
    thr = next(iter(checkers.values())).threshold_for("context")
    print(f"| precision | windows a second, each round | abs(P - P fp32): mean / max | labels unlike fp32's at P >= {thr:.2f} |")
    print("|---|---|---|---|")
    for p in checkers:
        diff, flips = "-", "-"
        if "fp32" in scores:
            d = np.abs(scores[p] - scores["fp32"])
            diff = f"{d.mean():.3f} / {d.max():.3f}"
            flips = f"{int(((scores[p] >= thr) != (scores['fp32'] >= thr)).sum())} of {len(work)}"
        print(f"| {p} | {' / '.join(f'{v:.1f}' for v in speed[p])} | {diff} | {flips} |")


if __name__ == "__main__":
    main()
