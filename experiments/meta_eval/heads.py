"""The offline checker's logistic head: fitting, prediction and threshold choice, shared by
``train_offline`` (which fits the shipped head on RAGBench) and ``wice`` (which re-fits it on
WiCE folds). Its own module so that those two do not import each other."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ragsweep.judge.offline import FEATURES, LEXICAL_FEATURES

#: the features each head uses (chosen in the README's experiment log). ``neg_flip`` is computed
#: but left out: on RAGBench it gets a *positive* weight (GPT-4 counts "X is not mentioned in the
#: context" sentences as supported), the wrong sign for a checker; negation is handled by the
#: Contradiction rule instead.
FULL_FEATURES: tuple[str, ...] = tuple(f for f in FEATURES if f != "neg_flip")
LEX_FEATURES: tuple[str, ...] = tuple(f for f in LEXICAL_FEATURES if f != "neg_flip")
#: the columns of a feature matrix, by name: the offline checker's FEATURES, then (when
#: ``judge_agreement --trained`` is given) ``trained`` = logit of the trained cross-encoder's P.
COLUMNS: tuple[str, ...] = (*FEATURES, "trained")
C_REG = 1.0
SQUARES = False


def fit_head(X: np.ndarray, y: np.ndarray, features: Sequence[str] = FULL_FEATURES, c_reg: float = C_REG,
             squares: bool = SQUARES, groups: np.ndarray | None = None) -> dict[str, Any]:
    """A standardised, class-balanced logistic regression on ``features``; threshold by balanced accuracy."""
    from sklearn.linear_model import LogisticRegression

    idx = [COLUMNS.index(f) for f in features]
    Xf = X[:, idx]
    mean = Xf.mean(0)
    scale = Xf.std(0)
    scale[scale == 0] = 1.0
    Z = (Xf - mean) / scale
    if squares:
        Z = np.hstack([Z, Z**2])
    lr = LogisticRegression(C=c_reg, class_weight="balanced", max_iter=2000, solver="lbfgs")
    lr.fit(Z, y)
    head = {
        "features": list(features),
        "mean": [round(float(v), 8) for v in mean],
        "scale": [round(float(v), 8) for v in scale],
        "squares": bool(squares),
        "coef": [round(float(v), 8) for v in lr.coef_[0]],
        "intercept": round(float(lr.intercept_[0]), 8),
        "threshold": 0.5,
    }
    p = predict(head, X)
    head["threshold"] = best_threshold(y, p, groups)
    return head


def predict(head: dict[str, Any], X: np.ndarray) -> np.ndarray:
    idx = [COLUMNS.index(f) for f in head["features"]]
    Z = (X[:, idx] - np.asarray(head["mean"])) / np.asarray(head["scale"])
    if head.get("squares"):
        Z = np.hstack([Z, Z**2])
    return 1.0 / (1.0 + np.exp(-(Z @ np.asarray(head["coef"]) + head["intercept"])))


def balanced_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    pos, neg = y == 1, y == 0
    if not pos.any() or not neg.any():
        return float("nan")
    return 0.5 * (pred[pos].mean() + (1 - pred[neg]).mean())


def best_threshold(y: np.ndarray, p: np.ndarray, groups: np.ndarray | None = None, tol: float = 0.005) -> float:
    """The threshold (0.05 grid) that maximises the mean per-group balanced accuracy.

    The curve is flat near its top, so the arg-max alone jumps between neighbours on noise: take the
    median of the grid points within ``tol`` of the best value instead (the middle of the plateau).
    """
    grid = np.round(np.arange(0.2, 0.81, 0.05), 2)
    gs = [np.ones(len(y), bool)] if groups is None else [groups == g for g in np.unique(groups)]
    scores = []
    for t in grid:
        vals = [balanced_accuracy(y[m], (p[m] >= t).astype(float)) for m in gs]
        vals = [v for v in vals if v == v]
        scores.append(float(np.mean(vals)) if vals else -1.0)
    scores_a = np.asarray(scores)
    near = grid[scores_a >= scores_a.max() - tol]
    return float(np.round(np.median(near) * 20) / 20)
