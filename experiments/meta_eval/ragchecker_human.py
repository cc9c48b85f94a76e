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
from typing import Sequence

from experiments.meta_eval import common as C
from experiments.meta_eval.ragchecker_human_lib import (  # noqa: F401 - re-exported: the names of before the split
    BASELINE, HUMAN, METRICS, annotator_agreement, baseline_scores, checker_scores, claims_of, correlate, lexical_scores,
    load, normalise, prf,
)

NAME = "ragchecker_human"


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
