"""Train the offline checker's logistic-regression head and write ``offline_model.json``.

    python experiments/meta_eval/train_offline.py --data /work/shared/data [--out PATH] [--limit N]

Training data: RAGBench validation, all 7 subsets; one example per response sentence, the claim is
the sentence, the reference is the row's documents, the label is "supported" (the sentence key is
not in ``unsupported_response_sentence_keys``, the GPT-4 annotation ``adherence_score`` is derived
from). WiCE and the RAGChecker human pairs are never used for training, so the shipped model is
scored out of sample on them; the RAGBench suite re-fits the same head leave-one-subset-out.

Two heads are written: ``full`` (all features, MiniLM included) and ``lexical`` (``model: none``).
Each also gets an ``answer_threshold`` (used when the reference is an answer, not retrieved
context) chosen on WiCE dev when ``--data`` holds it (see :func:`wice_answer_thresholds`).
Each is a standardised logistic regression with balanced class weights, so P = 0.5 sits where
the two kinds of error cost the same; the shipped threshold is the one that maximises the mean
per-subset balanced accuracy on the training data (printed). Deterministic (lbfgs, no sampling),
a few seconds on CPU once the sentence embeddings are cached (first run: ~46k sentences to embed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval.common import ragbench_sentence_data  # noqa: E402,F401 - re-exported
from experiments.meta_eval.heads import (  # noqa: E402,F401 - re-exported
    C_REG, FULL_FEATURES, LEX_FEATURES, SQUARES, balanced_accuracy, best_threshold, fit_head, predict,
)
from ragsweep.judge.offline import (  # noqa: E402
    CONTRADICTION_CAP, LEXICAL_FEATURES, PARAMS_PATH, OfflineChecker,
)



def train(data: dict[str, Any]) -> dict[str, Any]:
    X, y, g = data["X"], data["y"], data["subset"]
    return {
        "full": fit_head(X, y, FULL_FEATURES, groups=g),
        "lexical": fit_head(X, y, LEX_FEATURES, groups=g),
    }


def wice_answer_thresholds(data_root: str, heads: dict[str, Any], checker: OfflineChecker, cache: Any = None,
                           limit: int | None = None) -> dict[str, float] | None:
    """Per head, the threshold for ``kind="answer"`` references: the middle of the plateau of
    claim-level balanced accuracy (supported vs partially / not supported, claim score = max over
    its oracle chunks) on WiCE dev. WiCE claims are written apart from their evidence, as a
    response is from the ground-truth answer; RAG responses copy their context, which is why the
    context threshold (fitted on RAGBench) is higher. None when WiCE is not under ``data_root``.
    Only the thresholds see WiCE; the heads never do."""
    from experiments.meta_eval import wice_lib as wice

    try:
        folder = C.find_data(data_root, "wice", wice.FILE)
    except C.Skip:
        return None
    items, claims = wice.load(folder, limit)
    X, details = checker.features([(it["claim"], C.wice_reference(it)) for it in items], cache)
    y = np.array([int(items[idx[0]]["label"] == "supported") for idx in claims.values()])
    out = {}
    for name, head in heads.items():
        p = predict(head, X)
        for i, d in enumerate(details):  # the same overrides as OfflineChecker._probabilities
            if d["empty"]:
                p[i] = 0.0
            elif d["contradiction"]:
                p[i] = min(p[i], CONTRADICTION_CAP)
        out[name] = best_threshold(y, wice.per_claim(claims, p))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="the shared data root (with ragbench/<subset>/validation.parquet)")
    p.add_argument("--out", default=str(PARAMS_PATH))
    p.add_argument("--limit", type=int, default=None, help="first N rows per subset (smoke runs)")
    p.add_argument("--cache", default=C.DEFAULT_CACHE)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    try:
        folder = C.find_data(args.data, "ragbench", "*/validation.*")
    except C.Skip as exc:
        print(f"[train_offline] skipped: {exc}")
        return 0
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    t0 = time.time()
    checker = OfflineChecker(threshold=0.5)  # features only; the head is what we fit
    data = ragbench_sentence_data(folder, checker, cache, args.limit)
    heads = train(data)
    answer = wice_answer_thresholds(args.data, heads, checker, cache, args.limit)
    for name, head in heads.items():
        if answer is None:
            print(f"[train_offline] no WiCE under {args.data}: answer_threshold = threshold for {name}")
        head["answer_threshold"] = answer[name] if answer else head["threshold"]
    from sklearn.metrics import roc_auc_score

    for name, head in heads.items():
        pr = predict(head, data["X"])
        print(f"{name}: train sentence AUROC {roc_auc_score(data['y'], pr):.3f}, threshold {head['threshold']}, "
              f"answer_threshold {head['answer_threshold']}")
        for f, c in zip(head["features"], head["coef"]):
            print(f"  {f:>12s} {c:+.3f}")
    out = {
        "about": "ragsweep offline checker head: standardised logistic regression over "
        "ragsweep.judge.offline.FEATURES; trained by experiments/meta_eval/train_offline.py on RAGBench "
        "validation sentence-support labels (all 7 subsets, CC-BY-4.0).",
        "trained_on": {"ragbench_sentences": int(len(data["y"])), "supported_share": round(float(data["y"].mean()), 4),
                       "subsets": sorted(data["rows"]), "limit_per_subset": args.limit},
        "answer_threshold_from": "WiCE dev oracle chunks (claims): middle of the plateau of balanced accuracy, "
        "supported vs the rest; only this threshold sees WiCE" if answer else "no WiCE data: equal to threshold",
        "feature_config": {"model": checker.config.model, "window": checker.config.window,
                           "top_k_sentences": checker.config.top_k_sentences},
        "models": heads,
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out} ({Path(args.out).stat().st_size} bytes) in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
