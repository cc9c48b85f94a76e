"""The library half of ``ragchecker_human.py`` (no ``__main__``: no script imports another one):
loading RAGChecker's human meta-evaluation data and scoring its response pairs, shared by that
script, the judge-agreement suite (``ja_suites``) and the frozen splits (``make_splits``). The
method is described in ``ragchecker_human.py``."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from experiments.meta_eval import common as C
from ragsweep.judge.labels import ENTAILMENT

HUMAN = "meta_eval_human_labeled_dev.json"
BASELINE = "meta_eval_baseline_ragchecker_dev.json"
METRICS = ("correctness_label", "completeness_label", "overall_label")  # <- precision, recall, f1


def load(folder: Path, limit: int | None = None) -> tuple[list[dict], list[dict], dict[int, dict]]:
    """(human entries, one entry per instance in order, baseline by instance_id)."""
    human = C.load_json_or_jsonl(folder / HUMAN)
    instances: list[dict] = []
    seen: set = set()
    for h in human:
        if h["instance_id"] not in seen:
            seen.add(h["instance_id"])
            instances.append(h)
    if limit:
        instances = instances[:limit]
        keep = {h["instance_id"] for h in instances}
        human = [h for h in human if h["instance_id"] in keep]
    base_path = folder / BASELINE
    baseline = {b["instance_id"]: b for b in C.load_json_or_jsonl(base_path)} if base_path.is_file() else {}
    return human, instances, baseline


def normalise(delta: Sequence[float]) -> np.ndarray:
    """RAGChecker meta_eval: NaN -> median, then min-max to [-2, 2]."""
    d = np.asarray(delta, dtype=float).copy()
    if np.all(np.isnan(d)):
        return np.zeros_like(d)
    lo, hi, med = np.nanmin(d), np.nanmax(d), np.nanmedian(d)
    d[np.isnan(d)] = med
    return ((d - lo) / (hi - lo) - 0.5) * 4 if hi > lo else d


def correlate(human: list[dict], scores: dict[int, dict[str, tuple[float, float, float]]]) -> dict[str, tuple[float, float]]:
    """``scores[instance_id] = {"model1": (p, r, f1), "model2": (p, r, f1)}`` -> metric -> (pearson, spearman)."""
    ids = list(dict.fromkeys(h["instance_id"] for h in human))
    out = {}
    for j, metric in enumerate(METRICS):
        delta = {i: scores[i]["model2"][j] - scores[i]["model1"][j] for i in ids}
        norm = dict(zip(ids, normalise([delta[i] for i in ids])))
        x = [norm[h["instance_id"]] for h in human]
        y = [h[metric] for h in human]
        out[metric] = C.correlation(x, y)
    return out


def annotator_agreement(human: list[dict]) -> dict[str, tuple[float, float]]:
    by_id: dict[Any, list[dict]] = defaultdict(list)
    for h in human:
        by_id[h["instance_id"]].append(h)
    both = [v for v in by_id.values() if len(v) >= 2]
    return {m: C.correlation([v[0][m] for v in both], [v[1][m] for v in both]) for m in METRICS}


def prf(p: float, r: float) -> tuple[float, float, float]:
    if np.isnan(p) or np.isnan(r):
        return p, r, float("nan")
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def claims_of(text: str, unit: str = "sentence") -> list[str]:
    """Offline claims (:func:`ragsweep.judge.offline.split_claims`): sentences with a content
    word, or (``unit="clause"``) the claims of the default evaluator's ``OfflineExtractor``."""
    from ragsweep.judge.offline import split_claims

    return split_claims(text, unit)


def checker_scores(checker: Any, instances: list[dict], cache: Any = None, unit: str = "sentence") -> tuple[dict, dict]:
    """(binary, soft) scores per instance for both responses; claims = sentences (or clauses)."""
    pairs: list[tuple[str, str]] = []
    slots: list[tuple[int, str, str]] = []  # (instance, model, "p" | "r") per pair
    for inst in instances:
        gt = inst["gt_answer"]
        for m in ("model1", "model2"):
            resp = inst[m]["response"]
            for c in claims_of(resp, unit):
                pairs.append((c, gt))
                slots.append((inst["instance_id"], m, "p"))
            for c in claims_of(gt, unit):
                pairs.append((c, resp))
                slots.append((inst["instance_id"], m, "r"))
    probs = C.score_pairs(checker, pairs, cache)
    labels = C.check_pairs(checker, pairs, cache, kind="answer")  # response vs ground truth, as the evaluator
    acc: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for (i, m, k), p, lab in zip(slots, probs, labels):
        acc[(i, m, k)].append((float(lab == ENTAILMENT), float(p)))
    binary: dict[int, dict] = {}
    soft: dict[int, dict] = {}
    for inst in instances:
        i = inst["instance_id"]
        binary[i], soft[i] = {}, {}
        for m in ("model1", "model2"):
            vals = {k: np.array(acc.get((i, m, k), []), dtype=float).reshape(-1, 2) for k in ("p", "r")}
            # no claims -> 0, as in RAGChecker (and ragsweep.judge.ragchecker_metrics)
            mean = {k: (v.mean(0) if len(v) else np.array([0.0, 0.0])) for k, v in vals.items()}
            binary[i][m] = prf(mean["p"][0], mean["r"][0])
            soft[i][m] = prf(mean["p"][1], mean["r"][1])
    return binary, soft


def lexical_scores(instances: list[dict], fn: Any) -> dict:
    return {inst["instance_id"]: {m: fn(inst[m]["response"], inst["gt_answer"]) for m in ("model1", "model2")}
            for inst in instances}


def baseline_scores(instances: list[dict], baseline: dict[int, dict]) -> dict | None:
    if not baseline or any(inst["instance_id"] not in baseline for inst in instances):
        return None
    out = {}
    for inst in instances:
        b = baseline[inst["instance_id"]]
        out[inst["instance_id"]] = {m: tuple(float(b[m]["ragchecker"][k]) if b[m]["ragchecker"][k] is not None
                                             else float("nan") for k in METRICS) for m in ("model1", "model2")}
    return out
