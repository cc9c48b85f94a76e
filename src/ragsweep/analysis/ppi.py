"""Prediction-powered estimates (PPI++): the judge scores every question, a person labels a
uniformly random sample of them, and the labelled ones correct the judge's bias.

Angelopoulos, Bates, Fannjiang, Jordan, Zrnic, *Prediction-powered inference*, Science 2023;
Angelopoulos, Duchi, Zrnic, *PPI++: Efficient prediction-powered inference*, 2023. The estimates
come from the authors' package ``ppi-python`` (``ppi_py.ppi_mean_ci`` with the power-tuning
parameter lambda estimated from the data, clipped to [0, 1]: lambda = 0 is the labels-only mean,
so PPI++ is never much worse than labelling alone; lambda = 1 is the original PPI).

Which interval at which label count (measured in ``experiments/simulations/ppi_coverage.py``, stated in
docs/statistics.md, "Prediction-powered estimates"): from :data:`MIN_LABELS` labelled questions,
the PPI++ CLT (normal) interval exactly as ``ppi_py.ppi_mean_ci`` returns it; below that, no PPI
interval (the judge-only interval is shown with the label count and the minimum). The minimum is
:data:`MIN_LABELS` (50) for graded labels (values other than 0 and 1 present) and
:data:`MIN_LABELS_BINARY` (100) for yes/no labels: in the coverage experiment, yes/no labels with
a skewed mean (RAGBench adherence, 84-89% yes) covered only 0.89-0.92 at 50 labels (0.935-0.944
at 100), graded ones 0.91-0.93 at 50 (five seeds; :data:`COVERAGE`, printed in ppi.md beside each
interval); at 10 and 25 labels every set undercovered (0.66-0.94), and a t quantile instead of z
moved coverage by at most 0.04, not enough to adopt it.

A paired difference (:func:`paired`, :func:`paired_mean`) needs the same minimum, and uses the CLT
interval only when at least :data:`MIN_NONZERO` labelled questions have a non-zero human
difference; with fewer (two systems that differ on few questions) it uses the labelled
differences' betting interval, valid whatever their distribution: simulated from the held-out
data's shape (``experiments/simulations/sim_ppi_paired.py``), the CLT interval covered 0.33-0.81 when B
differed on 1% of the questions.

All values are on the human label's scale (0..1); callers convert judge values first
(``value / metric.scale``). Nothing here imports mlflow.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
MIN_LABELS = 50  # no PPI interval below this many labelled questions (graded labels; see above)
MIN_LABELS_BINARY = 100  # ... when every label is 0 or 1 (yes/no)
METHOD = "PPI++ CLT (ppi_py.ppi_mean_ci)"
SPARSE_METHOD = "betting interval of the labelled differences (few non-zero)"
#: a paired PPI++ CLT interval needs this many labelled questions whose human difference is not 0;
#: below it the labelled differences' betting interval (sim_ppi_paired.py: CLT coverage 0.33-0.81 there)
MIN_NONZERO = 10


class PPIError(ValueError):
    """Input PPI cannot use (too few labels, mismatched arrays); the message names the fix."""


@dataclass(frozen=True)
class Estimate:
    """PPI++ mean of the human label over all judged questions, from ``n_labels`` labels."""

    mean: float
    low: float
    high: float
    n_labels: int
    n_unlabelled: int
    lam: float
    method: str
    judge_mean: float  # the judge's mean over all questions (the uncorrected number)
    labels_mean: float  # the labelled questions' human mean (the classical estimate)
    se: float = float("nan")
    p: float | None = None  # the test of mean 0 where it is not the normal one (the betting interval's)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def min_labels(y: Sequence[float] | None = None) -> int:
    """The fewest labels a PPI interval is shown with: :data:`MIN_LABELS_BINARY` when every label
    in ``y`` is 0 or 1, else :data:`MIN_LABELS`."""
    if y is not None and len(y) and all(float(v) in (0.0, 1.0) for v in y):
        return MIN_LABELS_BINARY
    return MIN_LABELS


def method_for(n_labels: int, y: Sequence[float] | None = None) -> str | None:
    """The interval used at ``n_labels`` labels (None: too few for any)."""
    return METHOD if n_labels >= min_labels(y) else None


def _quantile(confidence: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + confidence / 2))


def _ppi():
    try:
        with warnings.catch_warnings():  # ppi_py.ppi calls warnings.simplefilter("ignore") at import
            import ppi_py
    except ImportError as exc:
        raise PPIError("prediction-powered estimates need the ppi-python package: pip install 'ppi-python>=0.2.3'") from exc
    return ppi_py


def _lam(y: np.ndarray, yhat: np.ndarray, yhat_u: np.ndarray) -> float:
    """PPI++'s power-tuning lambda, as ``ppi_py.ppi_mean_ci`` estimates it (clipped to [0, 1])."""
    from ppi_py.ppi import _calc_lam_glm

    pointest = yhat_u.mean() + (y - yhat).mean()
    with warnings.catch_warnings():  # 0 / 0 when the judge's values have no spread: NaN, handled by the callers
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(_calc_lam_glm((y - pointest)[:, None], (yhat - pointest)[:, None], (yhat_u - pointest)[:, None],
                                   np.eye(1), coord=None, clip=True))


def mean(y: Sequence[float], yhat: Sequence[float], yhat_unlabelled: Sequence[float], *,
         confidence: float = CONFIDENCE, lam: float | None = None, minimum: int | None = None) -> Estimate:
    """PPI++ mean of the human label ``y`` (labelled questions, with the judge's ``yhat`` on the
    same questions) with the judge's ``yhat_unlabelled`` on the other questions."""
    y = np.asarray(y, dtype=float)
    yhat = np.asarray(yhat, dtype=float)
    yu = np.asarray(yhat_unlabelled, dtype=float)
    if y.shape != yhat.shape:
        raise PPIError(f"{y.size} labels but {yhat.size} judge values on the labelled questions: give one judge value per label")
    if not (np.isfinite(y).all() and np.isfinite(yhat).all() and np.isfinite(yu).all()):
        raise PPIError("labels and judge values must be finite numbers (drop the questions the judge failed on first)")
    n = int(y.size)
    need = min_labels(y) if minimum is None else minimum
    if n < max(need, 2):
        raise PPIError(f"{n} labelled question(s): a PPI interval needs at least {need} "
                       f"({'yes/no' if need == MIN_LABELS_BINARY else 'graded'} labels); label more "
                       f"(ragsweep-label sample --n {need})")
    if yu.size < 2:
        raise PPIError(f"{yu.size} unlabelled question(s): PPI needs the judge on at least 2 questions without labels")
    ppi_py = _ppi()
    if lam is None:
        lam = _lam(y, yhat, yu)
    if not math.isfinite(lam):  # the judge's values have no spread (0 / 0): nothing to borrow from them
        lam = 0.0
    low, high = ppi_py.ppi_mean_ci(y, yhat, yu, alpha=1 - confidence, lam=lam)
    centre = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yu, lam=lam)).reshape(-1)[0])
    low, high = float(np.asarray(low).reshape(-1)[0]), float(np.asarray(high).reshape(-1)[0])
    se = (high - low) / (2 * _quantile(confidence))
    return Estimate(centre, low, high, n, int(yu.size), float(lam), METHOD,
                    float(np.concatenate([yhat, yu]).mean()), float(y.mean()), float(se))


def paired_mean(y: Sequence[float], yhat: Sequence[float], yhat_unlabelled: Sequence[float], *,
                confidence: float = CONFIDENCE) -> Estimate:
    """The paired difference's estimate from per-question *differences* (human ``y``, judge ``yhat``
    on the labelled questions, judge on the others), by the interval that covers for them: PPI++'s
    CLT interval (:func:`mean`) when at least :data:`MIN_NONZERO` labelled human differences are
    non-zero; otherwise the labels' own betting interval (:mod:`ragsweep.analysis.bounded`, values in
    [-1, 1]), valid whatever their distribution. Two systems that differ on few questions leave
    almost every labelled difference 0, the CLT interval's spread estimate near 0, and its coverage
    at 0.33-0.81 (``experiments/simulations/sim_ppi_paired.py``)."""
    from ragsweep.analysis import bounded

    y = np.asarray(y, dtype=float)
    nonzero = int(np.count_nonzero(y))
    if nonzero >= MIN_NONZERO:
        return mean(y, yhat, yhat_unlabelled, confidence=confidence, minimum=2)
    yu = np.asarray(yhat_unlabelled, dtype=float)
    iv = bounded.interval(y, 1.0, alpha=1 - confidence)
    p0 = bounded.beyond_p(y, 0.0, 1.0, alpha=1 - confidence)  # H0: mean 0
    se = (iv.high - iv.low) / (2 * _quantile(confidence))
    return Estimate(iv.mean, iv.low, iv.high, int(y.size), int(yu.size), 0.0, SPARSE_METHOD,
                    float(np.concatenate([np.asarray(yhat, dtype=float), yu]).mean()), float(y.mean()), float(se), p0)


def p_value(est: Estimate) -> float:
    """Two-sided p of mean 0 with the interval's standard error (normal), as ``ppi_py.ppi_mean_pval``;
    for a betting interval (:func:`paired_mean`), the betting test's p."""
    from scipy.stats import norm

    if est.p is not None:
        return est.p
    if not (math.isfinite(est.se) and est.se > 0):
        return 0.0 if est.mean != 0 else 1.0
    return float(2 * norm.sf(abs(est.mean) / est.se))


def split(judge: Mapping[str, float], human: Mapping[str, float], scale: float = 1.0
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(y, yhat, yhat_unlabelled, labelled ids) from per-question judge values (on the metric's
    ``scale``) and human labels (0..1): only questions the judge scored count; a label on a question
    the judge did not score (failed, undefined) is dropped, as the judge-only mean drops it."""
    def ok(v: Any) -> bool:
        return v is not None and math.isfinite(float(v))

    judged = [q for q, v in judge.items() if ok(v)]
    lab = [q for q in judged if q in human and ok(human[q])]
    labset = set(lab)
    y = np.asarray([float(human[q]) for q in lab])
    yhat = np.asarray([float(judge[q]) / scale for q in lab])
    yu = np.asarray([float(judge[q]) / scale for q in judged if q not in labset])
    return y, yhat, yu, lab


def system_estimate(judge: Mapping[str, float], human: Mapping[str, float], scale: float = 1.0,
                    minimum: int | None = None) -> Estimate | None:
    """PPI++ estimate of one system's metric (None below ``minimum``, default :func:`min_labels`)."""
    y, yhat, yu, _ = split(judge, human, scale)
    need = min_labels(y) if minimum is None else minimum
    if len(y) < need or yu.size < 2:
        return None
    return mean(y, yhat, yu, minimum=need)


VALID_METHOD = "PPI ratio over the valid questions (delta method)"


def valid_mean(judge: Mapping[str, float], human: Mapping[str, float], valid: Mapping[str, float], scale: float = 1.0,
               confidence: float = CONFIDENCE) -> Estimate | None:
    """The human label's mean over the questions people find valid (a generated set: :func:`ragsweep.analysis.labels.validity`),
    prediction-powered: theta = E[m v] / E[v], m the human label, v validity (0..1). The judge's value
    predicts m on every question and every kept question is predicted valid (it passed the set's
    checks), so, with lambda = 1 (the original PPI), ``A = mean_unlabelled(judge) + mean_labelled(m v - judge)``,
    ``B = mean_labelled(v)``, theta = A / B, and its interval by the delta method from the two means'
    variances and covariance. A question labelled invalid needs no metric label (m v = 0). None below
    :func:`min_labels` labelled questions or with no question labelled valid."""
    def ok(x: Any) -> bool:
        return x is not None and math.isfinite(float(x))

    judged = [q for q, v in judge.items() if ok(v)]
    lab = [q for q in judged if q in valid and ok(valid[q]) and (float(valid[q]) == 0 or (q in human and ok(human[q])))]
    labset = set(lab)
    v = np.asarray([float(valid[q]) for q in lab])
    mv = np.asarray([float(human[q]) * float(valid[q]) if float(valid[q]) else 0.0 for q in lab])
    yhat = np.asarray([float(judge[q]) / scale for q in lab])
    yu = np.asarray([float(judge[q]) / scale for q in judged if q not in labset])
    if len(lab) < min_labels(v) or yu.size < 2 or v.sum() <= 0:
        return None
    r = mv - yhat
    a, b = float(yu.mean() + r.mean()), float(v.mean())
    theta = a / b
    n, nu = len(lab), yu.size
    var_a = float(yu.var(ddof=1)) / nu + float(r.var(ddof=1)) / n
    var_b, cov = float(v.var(ddof=1)) / n, float(np.cov(r, v, ddof=1)[0, 1]) / n
    se = math.sqrt(max(var_a - 2 * theta * cov + theta ** 2 * var_b, 0.0)) / b
    h = _quantile(confidence) * se
    kept = [q for q in lab if float(valid[q]) > 0]
    return Estimate(theta, max(0.0, theta - h), min(1.0, theta + h), n, nu, 1.0, VALID_METHOD,
                    float(np.mean([float(judge[q]) / scale for q in judged])),
                    float(np.mean([float(human[q]) for q in kept])) if kept else float("nan"), se)


def paired(judge_a: Mapping[str, float], human_a: Mapping[str, float], judge_b: Mapping[str, float],
           human_b: Mapping[str, float], scale: float = 1.0):
    """``b - a`` by PPI++ over the questions both systems' judge scored, the labelled ones being
    those labelled for both: per question, judge difference and human difference. Returns a
    :class:`ragsweep.analysis.stats.Paired` on the metric's ``scale`` (``n`` = labelled questions) plus the
    :class:`Estimate`; None below :func:`min_labels` of the two systems' labels in common."""
    from ragsweep.analysis import stats

    ids = stats.common(judge_a, judge_b)
    jd = {q: float(judge_b[q]) - float(judge_a[q]) for q in ids}
    hd = {q: float(human_b[q]) - float(human_a[q]) for q in ids if q in human_a and q in human_b
          and math.isfinite(float(human_a[q])) and math.isfinite(float(human_b[q]))}
    # the minimum of the labels' own kind: differences of yes/no labels (-1, 0, 1) need as many as yes/no labels
    need = min_labels([float(v) for v in (*human_a.values(), *human_b.values()) if v is not None and math.isfinite(float(v))])
    y, yhat, yu, _ = split(jd, hd, scale)
    if len(y) < need or yu.size < 2:
        return None
    est = paired_mean(y, yhat, yu)
    ea = system_estimate({q: judge_a[q] for q in ids}, human_a, scale, need)
    eb = system_estimate({q: judge_b[q] for q in ids}, human_b, scale, need)
    res = stats.Paired(est.mean * scale, est.low * scale, est.high * scale, p_value(est), est.n_labels,
                       (ea.mean if ea else float("nan")) * scale, (eb.mean if eb else float("nan")) * scale, False)
    return res, est


#: the lowest measured coverage of the 95% CLT interval from each label count on, per label kind:
#: single systems in experiments/results/ppi_coverage.md (graded at 50: 0.914-0.934 over five seeds of
#: 2,000 draws), paired differences with at least MIN_NONZERO non-zero labelled differences in
#: experiments/results/sim_ppi_paired.md
COVERAGE = {
    ("graded", False): ((MIN_LABELS, "0.91-0.93"), (100, "0.95-0.99")),
    ("yes/no", False): ((MIN_LABELS_BINARY, "0.935-0.98"), (300, "0.96-0.98")),
    ("graded", True): ((MIN_LABELS, "0.94-0.99"),),
    ("yes/no", True): ((MIN_LABELS_BINARY, "0.94-0.99"),),
}


def coverage_note(n_labels: int, binary: bool, paired: bool, method: str) -> str:
    """What the interval's coverage is at ``n_labels`` labels, as measured (the ppi.md column)."""
    if method == SPARSE_METHOD:
        return "valid whatever the distribution (at least 0.95; measured 0.99-1.00)"
    rows = [t for n, t in COVERAGE[("yes/no" if binary else "graded", paired)] if n_labels >= n]
    if not rows:
        return "no interval below the minimum"
    return f"measured {rows[-1]} at {n_labels} {'yes/no' if binary else 'graded'} labels"


def classical(y: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The labels-only CLT interval (mean, low, high), as ``ppi_py.classical_mean_ci``."""
    y = np.asarray(y, dtype=float)
    m = float(y.mean())
    h = _quantile(confidence) * float(y.std(ddof=0)) / math.sqrt(y.size)
    return m, m - h, m + h
