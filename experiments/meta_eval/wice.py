"""WiCE (oracle chunks, dev): is a real Wikipedia claim supported by its cited evidence?

Data: ``wice/oracle_chunks_claim_dev.jsonl`` (ODC-BY annotations, CC-BY-SA text): 349 claims,
each with ~3 "oracle" evidence chunks (every chunk holds one full set of the annotated supporting
sentences plus distractor sentences); label supported / partially_supported / not_supported.

Each chunk's evidence lines are joined into one reference; a claim's score is the max over its
chunks of P(entailed) (as in WiCE's chunk-level evaluation); it is predicted supported when some
chunk gives Entailment. Reported per claim: AUROC of "supported" vs the rest, accuracy of that
binary decision at the checker's threshold, and AUROC of supported-or-partial vs not_supported.

The offline checker's shipped head was trained on RAGBench only: WiCE is out of sample. A second
row re-fits the same head on WiCE itself with 5-fold cross-validation split by claim (in-domain
fit, still scored only on held-out claims). Published numbers are on the test split (not rerun).
"""

from __future__ import annotations

import argparse
import sys
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

from experiments.meta_eval import common as C
from experiments.meta_eval.wice_lib import FILE, load, per_claim  # noqa: F401 - FILE: re-exported
from ragsweep.judge.labels import ENTAILMENT

NAME = "wice"
PUBLISHED = [("GPT-4 (published, WiCE paper, oracle chunks, test)", 0.80),
             ("T5-3B fine-tuned on ANLI (published, test)", 0.91)]


def metrics(labels: list[str], score: np.ndarray, decision: np.ndarray | None) -> list[Any]:
    sup = [int(lab == "supported") for lab in labels]
    anysup = [int(lab != "not_supported") for lab in labels]
    acc = float(np.mean(np.asarray(decision, dtype=int) == np.asarray(sup))) if decision is not None else None
    return [C.auroc(sup, score), acc, C.auroc(anysup, score)]


def wice_cv(X: np.ndarray, y_chunk: np.ndarray, claims: "OrderedDict[str, list[int]]", features: Sequence[str],
            folds: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Chunk P and decision from heads fitted on the other folds' claims (deterministic folds)."""
    from experiments.meta_eval.heads import fit_head, predict

    keys = list(claims)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    chunk_fold = np.zeros(len(y_chunk), dtype=int)
    for k, idx in claims.items():
        chunk_fold[idx] = fold_of[k]
    p = np.zeros(len(y_chunk))
    thr = np.zeros(len(y_chunk))
    for f in range(folds):
        test = chunk_fold == f
        train = ~test
        if not test.any() or len(set(y_chunk[train].tolist())) < 2:
            p[test] = 0.5
            thr[test] = 0.5
            continue
        head = fit_head(X[train], y_chunk[train], features)
        p[test] = predict(head, X[test])
        thr[test] = head["threshold"]
    return p, p >= thr


def run(args: argparse.Namespace) -> str:
    folder = C.find_data(args.data, "wice", FILE)
    items, claims = load(folder, args.limit)
    labels = [items[idx[0]]["label"] for idx in claims.values()]
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    checker = C.checker_from_args(args)
    pairs = [(it["claim"], C.wice_reference(it)) for it in items]
    rows = []
    name = args.checker
    offline = hasattr(checker, "features") and hasattr(checker, "predict")  # a feature-based checker (offline)
    if offline:
        X, _ = checker.features(pairs, cache)
        p = checker.predict(X)
        dec = p >= checker.threshold
        rows.append([f"**{name}** (head trained on RAGBench only; WiCE unseen), threshold {checker.threshold:.2f}"]
                    + metrics(labels, per_claim(claims, p), per_claim(claims, dec).astype(bool)))
        from experiments.meta_eval.heads import FULL_FEATURES, LEX_FEATURES

        y_chunk = np.array([int(it["label"] == "supported") for it in items])
        if len(claims) >= 10:
            feats = FULL_FEATURES if checker.use_embeddings else LEX_FEATURES
            pc, dc = wice_cv(X, y_chunk, claims, feats)
            rows.append([f"{name} features, head re-fitted on WiCE (5-fold CV split by claim)"]
                        + metrics(labels, per_claim(claims, pc), per_claim(claims, dc).astype(bool)))
    else:
        p = C.score_pairs(checker, pairs, cache)
        dec = np.array([lab == ENTAILMENT for lab in C.check_pairs(checker, pairs, cache)])
        rows.append([f"**{name}**"] + metrics(labels, per_claim(claims, p), per_claim(claims, dec).astype(bool)))
    tok = [C.content_overlap(it["claim"], C.wice_reference(it)) for it in items]
    rows.append(["token overlap (content-word recall of the claim)"] + metrics(labels, per_claim(claims, tok), None))
    for label, val in PUBLISHED:
        rows.append([label, val, None, None])
    counts = {k: labels.count(k) for k in ("supported", "partially_supported", "not_supported")}
    lines = [
        f"## WiCE oracle chunks, dev: {len(claims)} claims ({counts['supported']} supported, "
        f"{counts['partially_supported']} partially, {counts['not_supported']} not), {len(items)} chunks",
        "",
        "Claim score = max over its chunks. AUROC: supported vs partially/not supported; accuracy of",
        "'some chunk gives Entailment' for 'supported' at the checker's threshold; last column: supported or",
        "partially supported vs not supported.",
        "",
        C.md_table(["scorer", "AUROC supported", "accuracy", "AUROC any support"], rows, digits=3),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = C.parser(NAME, __doc__.splitlines()[0])
    return C.run_main(NAME, run, p, argv)


if __name__ == "__main__":
    sys.exit(main())
