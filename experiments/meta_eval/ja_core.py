"""judge_agreement's shared pieces: the protocol's constants (grids, targets, bootstrap size), the
features of (claim, context) pairs, paired bootstrap and AUROC, the shipped heads and the default
extractor's claims. Tests patch ``B_BOOT`` and ``fit_head`` here (the suites read them from here)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval.heads import (  # noqa: E402,F401 - fit_head: patched by tests
    COLUMNS, FULL_FEATURES, LEX_FEATURES, best_threshold, fit_head, predict,
)

#: the feature sets a head can use, by name; ``trained`` is the trained cross-encoder's P alone (used
#: directly, no head: see ``direct_head``), ``stacked`` a head over the full features plus it.
FEATS = {"full": FULL_FEATURES, "lexical": LEX_FEATURES, "trained": ("trained",), "stacked": (*FULL_FEATURES, "trained")}
#: a judge = a family of named feature sets among which the protocol chooses (the first is the
#: family's default: the tie-breaker, and the feature set of a head fitted on WiCE ``select``).
JUDGES: dict[str, tuple[str, ...]] = {"offline": ("full", "lexical"), "trained": ("trained",), "stacked": ("stacked",)}
OFFLINE = JUDGES["offline"]
GRID = [round(float(t), 2) for t in np.arange(0.2, 0.81, 0.05)]
TAUS = [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7]
SHIPPED_ANSWER_THRESHOLD = 0.30
TARGETS = {"ragchecker_human": 57.0, "wice": 0.85, "ragbench": 0.75}
CAP = 0.05  # ragsweep.judge.offline.CONTRADICTION_CAP


B_BOOT = 1000
TRAINED_CHUNK = 500  # pairs the trained checker scores between two progress lines


def paired_boot(stat: Any, groups: dict[str, np.ndarray], b: int | None = None, seed: int = 0) -> tuple[float, float, float]:
    """Difference ``stat(idx)`` on the full data and its 95% percentile interval when the units of
    each group (domain / subset / all) are resampled with replacement; ``stat(idx_by_group)``
    returns ``a - b`` of two scorers on the same resample (paired)."""
    rng = np.random.default_rng(seed)
    b = B_BOOT if b is None else b
    full = stat({g: np.arange(n) for g, n in ((g, len(v)) for g, v in groups.items())})
    vals = []
    for _ in range(b):
        v = stat({g: rng.integers(0, len(u), len(u)) for g, u in groups.items()})
        if v == v:
            vals.append(v)
    lo, hi = (np.percentile(vals, [2.5, 97.5]) if vals else (float("nan"), float("nan")))
    return float(full), float(lo), float(hi)


def fast_auroc(y: np.ndarray, s: np.ndarray) -> float:
    """AUROC by the rank-sum (Mann-Whitney) formula, ties as half: equal to ``C.auroc``, faster for bootstraps."""
    from scipy.stats import rankdata

    y = np.asarray(y, dtype=int)
    n1 = int(y.sum())
    n0 = len(y) - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


# -- features, cached on disk (the embeddings are cached by the checker itself) -----------------------
class Feats:
    """X plus the two overrides the checker applies (no content word -> 0, contradiction -> cap)."""

    def __init__(self, X: np.ndarray, empty: np.ndarray, contra: np.ndarray):
        self.X, self.empty, self.contra = X, empty.astype(bool), contra.astype(bool)

    def probs(self, head: dict[str, Any]) -> np.ndarray:
        if head.get("direct"):  # the trained cross-encoder's P as it is: none of the offline checker's overrides
            return 1.0 / (1.0 + np.exp(-self.X[:, COLUMNS.index("trained")])) if len(self.X) else np.zeros(0)
        p = predict(head, self.X) if len(self.X) else np.zeros(0)
        p = np.where(self.contra, np.minimum(p, CAP), p)
        return np.where(self.empty, 0.0, p)

    def labels(self, head: dict[str, Any], thr: float) -> np.ndarray:
        """1.0 for Entailment (P >= thr and no contradiction), as ``OfflineChecker.check_pairs``
        (P >= thr alone for the trained P, as ``TrainedChecker.check_pairs``)."""
        if head.get("direct"):
            return (self.probs(head) >= thr).astype(float)
        return ((self.probs(head) >= thr) & ~self.contra).astype(float)

    def with_trained(self, p: np.ndarray) -> "Feats":
        """These features plus the column ``trained`` = logit(P), P clipped to [1e-6, 1 - 1e-6]."""
        q = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
        return Feats(np.hstack([self.X[:, :len(COLUMNS) - 1], np.log(q / (1 - q))[:, None]]), self.empty, self.contra)


def direct_head(X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> dict[str, Any]:
    """The "head" of the trained judge: its P used directly (nothing fitted; a monotone 1-feature head
    would have the same AUROC); ``threshold`` by balanced accuracy on the rows given, as ``fit_head``."""
    head = {"features": ["trained"], "direct": True, "threshold": 0.5}
    p = 1.0 / (1.0 + np.exp(-X[:, COLUMNS.index("trained")])) if len(X) else np.zeros(0)
    head["threshold"] = best_threshold(y, p, groups)
    return head


def fit_family(X: np.ndarray, y: np.ndarray, feats: str, groups: np.ndarray | None = None) -> dict[str, Any]:
    """The head of feature set ``feats`` (a key of ``FEATS``) fitted on (X, y): ``fit_head``, read from
    this module so that tests can patch it, or ``direct_head`` for the trained P alone."""
    if feats == "trained":
        return direct_head(X, y, groups)
    return fit_head(X, y, FEATS[feats], groups=groups)


def features(checker: Any, pairs: list[tuple[str, str]], cache: Any, fdir: Path | None, trained: Any = None) -> Feats:
    """The offline checker's features of ``pairs`` (cached under ``fdir``), plus the column ``trained``
    when a trained scorer is given (see ``trained_p``)."""
    f = _offline_features(checker, pairs, cache, fdir)
    return f.with_trained(trained_p(trained, pairs, fdir)) if trained is not None else f


def trained_p(scorer: Any, pairs: list[tuple[str, str]], fdir: Path | None) -> np.ndarray:
    """P of the trained cross-encoder for each (claim, reference) pair, cached under ``fdir`` by the
    checker's identity (its ``cache_id``: weights sha256, windows, lengths, precision) and the pairs
    (``scorer``: a ``TrainedChecker`` or anything with ``score_pairs`` and ``cache_id``)."""
    key = hashlib.sha256(json.dumps([scorer.cache_id, pairs], sort_keys=True).encode()).hexdigest()[:24]
    path = fdir / f"trained_{key}.npy" if fdir else None
    if path and path.is_file():
        return np.load(path)
    t0, out = time.time(), []
    for a in range(0, len(pairs), TRAINED_CHUNK):  # a progress line per chunk: the full run scores ~10k pairs
        out += list(scorer.score_pairs(pairs[a:a + TRAINED_CHUNK]))
        dt = time.time() - t0
        print(f"[judge_agreement] trained checker: {len(out)}/{len(pairs)} pairs in {dt:.0f} s "
              f"({len(out) / max(dt, 1e-9):.1f} pairs/s)", flush=True)
    p = np.asarray(out, dtype=float)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, p)
    return p


def _offline_features(checker: Any, pairs: list[tuple[str, str]], cache: Any, fdir: Path | None) -> Feats:
    key = hashlib.sha256(json.dumps([checker.config.model, checker.config.window, checker.config.top_k_sentences,
                                     pairs]).encode()).hexdigest()[:24]
    path = fdir / f"feats_{key}.npz" if fdir else None
    if path and path.is_file():
        z = np.load(path)
        return Feats(z["X"], z["empty"], z["contra"])
    if pairs:
        X, det = checker.features(pairs, cache)
    else:
        X, det = np.zeros((0, len(FULL_FEATURES) + 1)), []
    f = Feats(X, np.array([d["empty"] for d in det], bool), np.array([d["contradiction"] for d in det], bool))
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, X=f.X, empty=f.empty, contra=f.contra)
    return f


def shipped_heads() -> dict[str, Any]:
    from ragsweep.judge.offline import PARAMS_PATH

    return json.loads(PARAMS_PATH.read_text())["models"]


# -- RAGBench ----------------------------------------------------------------------------------
def default_extractor_claims() -> Any:
    """``(text, question) -> claims`` of the default evaluator's extractor as configured
    (``conf/evaluator/extractor/offline.yaml``): the "clause claims" the shipped judge logs, so the
    measurement follows any change to that extractor (e.g. short answers read with the question)."""
    from ragsweep.judge import components

    ex = components.build("extractor", components.group_spec("extractor", "offline"))
    return lambda text, q: [c if isinstance(c, str) else " ".join(map(str, c)) for c in ex.extract(text, q)]
