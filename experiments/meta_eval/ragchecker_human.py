"""RAGChecker human meta-evaluation: does our checker prefer the response humans prefer?

Data: ``ragchecker/meta_eval_human_labeled_dev.json`` (5 of RAGChecker's 10 domains; each
response pair appears twice, once per annotator, with preference labels -2..2 for correctness,
completeness and overall) and ``meta_eval_baseline_ragchecker_dev.json`` (RAGChecker's own
scores with the Llama3-70B judge).

Method (RAGChecker ``data/meta_evaluation/meta_eval.py``): for every pair, the metric difference
model2 - model1; NaN replaced by the median; min-max normalised to [-2, 2]; each pair counted once
per annotator; Pearson and Spearman x100 against the annotators' labels. RAGChecker's convention:
correctness <-> precision, completeness <-> recall, overall <-> F1 (its baseline file stores
exactly precision / recall / F1 under those three names).

Our checker: claims are the sentences of a text (``ragsweep.corpus.text.split_sentences``) that contain at
least one content word (list markers such as "1." are split off as sentences and dropped), or, in
the "clause" rows, those sentences cut into clauses of >= 4 content words
(``ragsweep.judge.offline.split_claims``, which for clauses is the default evaluator's
``OfflineExtractor``: the claims ``ragsweep`` itself extracts); precision =
share of response claims entailed by the ground-truth answer, recall = share of ground-truth
claims entailed by the response; F1 of the two. "binary" counts Entailment labels, checked as the
evaluator checks answer pairs (``kind="answer"``: the offline checker's ``answer_threshold``,
chosen on WiCE); "soft" averages P(entailed) instead.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from experiments.meta_eval import common as C
from ragsweep.judge.labels import ENTAILMENT

NAME = "ragchecker_human"
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


def run(args: argparse.Namespace) -> str:
    folder = C.find_data(args.data, "ragchecker", HUMAN)
    human, instances, baseline = load(folder, args.limit)
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    rows: list[tuple[str, dict[str, tuple[float, float]]]] = []
    rows.append(("human: annotator 1 vs annotator 2", annotator_agreement(human)))
    base = baseline_scores(instances, baseline)
    if base is not None:
        rows.append(("RAGChecker (Llama3-70B extractor + checker; shipped scores)", correlate(human, base)))
    rows.append(("ROUGE-L (P / R / F)", correlate(human, lexical_scores(instances, C.rouge_l))))
    rows.append(("token P / R / F1", correlate(human, lexical_scores(instances, C.token_prf))))
    checker = C.checker_from_args(args)
    binary, soft = checker_scores(checker, instances, cache)
    thr = getattr(checker, "answer_threshold", None)
    tag = f"answer_threshold {thr:.2f}" if isinstance(thr, float) else "labels"
    rows.append((f"{args.checker}, sentence claims, Entailment share ({tag})", correlate(human, binary)))
    rows.append((f"{args.checker}, sentence claims, mean P(entailed)", correlate(human, soft)))
    binary_c, soft_c = checker_scores(checker, instances, cache, unit="clause")
    rows.append((f"**{args.checker}**, clause claims = the default evaluator's, Entailment share ({tag}): "
                 "what `ragsweep` logs", correlate(human, binary_c)))
    rows.append((f"{args.checker}, clause claims, mean P(entailed)", correlate(human, soft_c)))

    header = ["scorer", "correctness P", "S", "completeness P", "S", "overall P", "S"]
    table_rows = [[name] + [v for m in METRICS for v in res[m]] for name, res in rows]
    n_inst, n_lab = len(instances), len(human)
    domains = sorted({inst["dataset"] for inst in instances})
    lines = [
        f"## RAGChecker human meta-evaluation ({n_inst} response pairs, {n_lab} annotator labels; "
        f"domains: {', '.join(domains)})",
        "",
        "Pearson (P) and Spearman (S) x100 between the normalised score difference (model2 - model1) and each",
        "annotator's preference; correctness <- precision, completeness <- recall, overall <- F1 (RAGChecker's",
        "meta_eval.py). RAGChecker's own paper numbers on these 5 domains: overall 65.5 / correctness 54.1 /",
        "completeness 60.8 Pearson. The offline checker never saw this data (trained on RAGBench only).",
        "",
        C.md_table(header, table_rows),
    ]
    # per-domain overall Pearson for the main rows
    if len(domains) > 1:
        per = []
        scorers = [("token F1", lexical_scores(instances, C.token_prf)),
                   (f"{args.checker}, sentences, Entailment share", binary), (f"{args.checker}, sentences, mean P", soft),
                   (f"{args.checker}, clauses, Entailment share", binary_c), (f"{args.checker}, clauses, mean P", soft_c)]
        if base is not None:
            scorers.append(("RAGChecker", base))
        for name, sc in scorers:
            row = [name]
            for d in domains:
                hd = [h for h in human if h["dataset"] == d]
                row.append(correlate(hd, sc)["overall_label"][0])
            per.append(row)
        lines += ["", "Overall-preference Pearson per domain (normalisation within the domain):", "",
                  C.md_table(["scorer"] + domains, per)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = C.parser(NAME, __doc__.splitlines()[0])
    return C.run_main(NAME, run, p, argv)


if __name__ == "__main__":
    sys.exit(main())
