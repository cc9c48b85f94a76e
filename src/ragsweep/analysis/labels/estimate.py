"""Per system and human label: the judge-only interval, the PPI++ interval (:mod:`ragsweep.analysis.ppi`)
and its MLflow metrics; paired PPI differences against the baseline system; the judge's
in-domain agreement with the labels. Pure: the caller reads runs, records and labels."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ragsweep.analysis import ppi, stats
from ragsweep.analysis.labels import Label, by_question, by_run, label_kinds, validity


def _scale(metric: str) -> float:
    from ragsweep.judge.metrics.registry import find

    m = find(metric)
    return m.scale if m is not None and math.isfinite(m.scale) else 1.0


def judge_values(records: Sequence[dict[str, Any]] | None, metric: str) -> dict[str, float]:
    from ragsweep.analysis.report.paired import run_values

    return dict(run_values(records, metric) or {})


@dataclass
class SystemRow:
    run_id: str
    system: str
    label: str
    metric: str
    judge: stats.Interval
    estimate: ppi.Estimate | None
    n_labels: int
    note: str = ""
    coverage: str = ""  # the interval's measured coverage at these labels (ppi.coverage_note)
    valid: ppi.Estimate | None = None  # over the questions people found valid (a generated set)

    def metrics(self) -> dict[str, float]:
        s = _scale(self.metric)
        out = {}
        if self.valid is not None:
            v = self.valid
            out = {f"{self.metric}/ppi_valid_mean": v.mean * s, f"{self.metric}/ppi_valid_ci_low": v.low * s,
                   f"{self.metric}/ppi_valid_ci_high": v.high * s}
        if self.estimate is None:
            return {**out, f"{self.metric}/ppi_n_labels": float(self.n_labels)}
        e = self.estimate
        return {**out, f"{self.metric}/ppi_mean": e.mean * s, f"{self.metric}/ppi_ci_low": e.low * s,
                f"{self.metric}/ppi_ci_high": e.high * s, f"{self.metric}/ppi_n_labels": float(e.n_labels)}


@dataclass
class QuestionShare:
    """A generated set's question label (``valid``, ``reference_correct``, or both: ``valid_and_correct``):
    the share of the labelled questions with it, and its 95% betting interval (valid at every n)."""

    label: str
    n: int
    share: float
    low: float
    high: float


@dataclass
class PairRow:
    label: str
    metric: str
    a: str
    b: str
    judge: stats.Paired
    ppi: stats.Paired | None
    method: str = ""
    coverage: str = ""  # the interval's measured coverage at these labels (ppi.coverage_note)


@dataclass
class Agreement:
    label: str
    metric: str
    n: int
    r: float
    r_low: float
    r_high: float
    bias: float  # mean (judge - human) on 0..1
    bias_low: float
    bias_high: float


@dataclass
class Result:
    systems: list[SystemRow] = field(default_factory=list)
    pairs: list[PairRow] = field(default_factory=list)
    agreement: list[Agreement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    questions: list[QuestionShare] = field(default_factory=list)

    def metrics_by_run(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for r in self.systems:
            out.setdefault(r.run_id, {}).update(r.metrics())
        return out


def pearson_ci(x: np.ndarray, y: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float]:
    """Pearson r with its Fisher-z interval (NaN when undefined)."""
    from scipy.stats import norm

    n = x.size
    if n < 4 or x.std() == 0 or y.std() == 0:
        return float("nan"), float("nan"), float("nan")
    r = float(np.corrcoef(x, y)[0, 1])
    z, h = math.atanh(max(min(r, 0.999999), -0.999999)), float(norm.ppf(0.5 + confidence / 2)) / math.sqrt(n - 3)
    return r, math.tanh(z - h), math.tanh(z + h)


def estimate(runs: Sequence[tuple[str, str]], records: Mapping[str, Sequence[dict[str, Any]] | None],
             labels: Sequence[Label], sample: Sequence[str] | None = None) -> Result:
    """``runs``: (run id, system name) in report order, the first the baseline; ``labels`` with
    ``system`` = run id; ``sample``: the drawn question ids (labels outside it are not used: PPI
    needs the labelled questions to be a uniform random sample)."""
    res = Result()
    if sample is not None:
        keep = {str(q) for q in sample}
        out = [lab for lab in labels if lab.question_id in keep]
        if len(out) < len(labels):
            res.notes.append(f"{len(labels) - len(out)} label(s) on questions outside the drawn sample not used "
                             "(PPI needs the labelled questions to be a uniform random sample)")
        labels = out
    else:
        res.notes.append("no sample drawn by ragsweep-label: the labelled questions are assumed to be a uniform random sample")
    kinds = label_kinds()
    human = by_run(labels)
    names = sorted({lab.name for lab in labels if lab.name in kinds})
    names_of = dict(runs)
    valid = validity(labels)
    res.questions = question_shares(labels)
    for name in names:
        metric = kinds[name].metric
        binary = all(lab.value in (0.0, 1.0) for lab in labels if lab.name == name)
        scale = _scale(metric)
        judged = {rid: judge_values(records.get(rid), metric) for rid, _ in runs}
        pairs_j, pairs_h = [], []
        for rid, sysname in runs:
            j, h = judged[rid], human.get(rid, {}).get(name, {})
            y, yhat, yu, lab = ppi.split(j, h, scale)
            pairs_j += list(yhat)
            pairs_h += list(y)
            iv = stats.interval(v for v in j.values() if v is not None and math.isfinite(v))
            est, note = None, ""
            if not j:
                note = f"the runs have no per-question {metric}"
            elif len(y) < ppi.min_labels(y):
                note = f"{len(y)} labelled question(s); a PPI interval needs {ppi.min_labels(y)}"
            elif yu.size < 2:
                note = (f"{yu.size} unlabelled question(s): with (nearly) every question labelled, the labels' own mean "
                        f"{y.mean() * scale:.3g} is the estimate; PPI needs the judge on at least 2 others")
            else:
                est = ppi.system_estimate(j, h, scale)
            cov = ppi.coverage_note(len(y), binary, False, est.method) if est is not None else ""
            over_valid = ppi.valid_mean(j, h, valid, scale) if valid and j else None
            res.systems.append(SystemRow(rid, sysname, name, metric, iv, est, len(y), note, cov, over_valid))
        if len(pairs_h) >= 4:
            x, yv = np.asarray(pairs_j), np.asarray(pairs_h)
            r, lo, hi = pearson_ci(x, yv)
            d = x - yv
            bi = stats.interval(d)
            res.agreement.append(Agreement(name, metric, int(x.size), r, lo, hi, bi.mean, bi.low, bi.high))
        base_id = runs[0][0] if runs else None
        for rid, sysname in runs[1:]:
            a, b = judged[base_id], judged[rid]
            pj = stats.paired(a, b)
            hp = ppi.paired(a, human.get(base_id, {}).get(name, {}), b, human.get(rid, {}).get(name, {}), scale)
            res.pairs.append(PairRow(name, metric, names_of[base_id], sysname, pj, hp[0] if hp else None,
                                     hp[1].method if hp else f"fewer than {ppi.MIN_LABELS} questions labelled for both",
                                     ppi.coverage_note(hp[1].n_labels, binary, True, hp[1].method) if hp else ""))
    return res


def question_shares(labels: Sequence[Label]) -> list[QuestionShare]:
    """The share of valid questions (and of correct reference answers, and of both) among those people
    labelled, each with its betting interval on [0, 1] (:mod:`ragsweep.analysis.bounded`)."""
    from ragsweep.analysis import bounded

    q = by_question(labels)
    rows = [(name, list(q[name].values())) for name in ("valid", "reference_correct") if q.get(name)]
    if len(rows) == 2:
        rows.append(("valid_and_correct", list(validity(labels).values())))
    out = []
    for name, values in rows:
        iv = bounded.interval(values, 1.0)
        out.append(QuestionShare(name, len(values), iv.mean, max(0.0, iv.low), min(1.0, iv.high)))
    return out


def _questions_md(res: Result) -> list[str]:
    if not res.questions:
        return []
    out = ["", "## The generated questions (human labels)", "",
           "The share of the labelled questions people found valid / with a correct reference answer, with its 95% "
           "betting interval (valid at any number of labels; docs/questions.md says what a synthetic set measures).", "",
           "| label | labelled questions | share [95% CI] |", "|---|---|---|"]
    out += [f"| {q.label} | {q.n} | {_f(q.share)} [{_f(q.low)}, {_f(q.high)}] |" for q in res.questions]
    rows = [r for r in res.systems if r.valid is not None]
    if rows:
        out += ["", "Each system's metric over the valid questions only (PPI ratio of the human label over validity, "
                "delta method; simulated coverage 0.95-1.00 at 100-400 yes/no labels, "
                "experiments/simulations/sim_ppi_valid.py):", "",
                "| metric (human label) | system | PPI over valid questions [95% CI] | labelled questions |", "|---|---|---|---|"]
        for r in rows:
            s, d = _scale(r.metric), 1 if _scale(r.metric) > 1 else 3
            out.append(f"| {r.metric} ({r.label}) | {r.system} | {_f(r.valid.mean * s, d)} [{_f(r.valid.low * s, d)}, "
                       f"{_f(r.valid.high * s, d)}] | {r.valid.n_labels} |")
    elif res.systems:
        out += ["", f"No system estimate over the valid questions yet: it needs {ppi.MIN_LABELS_BINARY} questions "
                "labelled both for validity and for the system's metric (yes/no labels)."]
    return out


def _f(x: float, d: int = 3) -> str:
    return f"{x:.{d}f}" if x is not None and math.isfinite(x) else "n/a"


def markdown(res: Result, title: str = "Prediction-powered estimates (human labels)") -> str:
    out = [f"## {title}", ""]
    if not res.systems:
        return "\n".join(out + ["No human labels on this sweep's answers (ragsweep-label sample, then label in the MLflow UI "
                                "or give --labels FILE).", *_questions_md(res), ""])
    out += ["Per system: the judge-only mean [95% interval] over all the questions it scored, and the PPI++ estimate of the "
            "human label's mean over the same questions [95% interval] from the labelled ones (docs/statistics.md, "
            "'Prediction-powered estimates'). Both on the judge metric's scale.", "",
            "| metric (human label) | system | judge-only mean [95% CI] (n) | PPI++ mean [95% CI] | labels | interval | "
            "coverage of the 95% interval at these labels |", "|---|---|---|---|---|---|---|"]
    for r in res.systems:
        s = _scale(r.metric)
        d = 1 if s > 1 else 3
        judge = f"{_f(r.judge.mean, d)} [{_f(r.judge.low, d)}, {_f(r.judge.high, d)}] ({r.judge.n})"
        if r.estimate is not None:
            e = r.estimate
            p = f"{_f(e.mean * s, d)} [{_f(e.low * s, d)}, {_f(e.high * s, d)}]"
            how = f"{e.method}, lambda={e.lam:.2f}"
        else:
            p, how = "—", r.note
        out.append(f"| {r.metric} ({r.label}) | {r.system} | {judge} | {p} | {r.n_labels} | {how} | {r.coverage or '-'} |")
    if res.pairs:
        out += ["", "Paired differences B - A (A = the baseline), over the questions both systems' judge scored; PPI++ "
                "corrects the judge's per-question difference with the human difference on the questions labelled for both.", "",
                "| metric (human label) | A → B | judge-only B - A [95% CI] (n) | PPI++ B - A [95% CI] | labels | p (PPI) | "
                "interval, and its coverage at these labels |", "|---|---|---|---|---|---|---|"]
        for pr in res.pairs:
            d = 1 if _scale(pr.metric) > 1 else 3
            j = pr.judge
            jt = f"{j.diff:+.{d}f} [{j.low:+.{d}f}, {j.high:+.{d}f}] ({j.n})" if math.isfinite(j.diff) else "n/a"
            if pr.ppi is not None:
                q = pr.ppi
                pt, n, p = f"{q.diff:+.{d}f} [{q.low:+.{d}f}, {q.high:+.{d}f}]", str(q.n), ("<0.001" if q.p < 0.001 else f"{q.p:.3f}")
            else:
                pt, n, p = "—", pr.method, "-"
            how = f"{pr.method}: {pr.coverage}" if pr.ppi is not None else "-"
            out.append(f"| {pr.metric} ({pr.label}) | {pr.a} → {pr.b} | {jt} | {pt} | {n} | {p} | {how} |")
    if res.agreement:
        out += ["", "The judge against these labels (in-domain: this sweep's own questions and answers): Pearson r with its "
                "Fisher-z 95% interval, and the judge's bias (judge - human, 0..1 scale) with its 95% interval.", "",
                "| human label | judge metric | n (answers) | Pearson r [95% CI] | bias [95% CI] |", "|---|---|---|---|---|"]
        for a in res.agreement:
            out.append(f"| {a.label} | {a.metric} | {a.n} | {_f(a.r, 2)} [{_f(a.r_low, 2)}, {_f(a.r_high, 2)}] | "
                       f"{a.bias:+.3f} [{a.bias_low:+.3f}, {a.bias_high:+.3f}] |")
    out += _questions_md(res)
    if res.notes:
        out += [""] + [f"Note: {n}." for n in res.notes]
    return "\n".join(out) + "\n"


def in_domain_text(res: Result) -> str:
    """One line per label for the judge card: agreement with this user's labels, in-domain."""
    return "; ".join(f"in-domain vs your labels ({a.label}, n={a.n}): Pearson r {_f(a.r, 2)} [{_f(a.r_low, 2)}, "
                     f"{_f(a.r_high, 2)}], bias {a.bias:+.3f} [{a.bias_low:+.3f}, {a.bias_high:+.3f}]" for a in res.agreement)
