"""RAGBench adherence: does the checker find the responses GPT-4 judged not fully supported?

Data: ``ragbench/<subset>/validation.parquet`` for covidqa, delucionqa, emanual, expertqa, hagrid,
hotpotqa, msmarco (CC-BY-4.0). Label: ``adherence_score`` (True = every response sentence is
supported by the documents, GPT-4 annotation).

Scores (higher = more adherent; AUROC is for predicting adherence = True, which equals the AUROC
of 1 - score for predicting non-adherence):

- offline checker: P(sentence supported by the documents) for each response sentence (the
  sentences RAGBench gives), example score = min over sentences. The head is re-fitted
  leave-one-subset-out (trained on the other 6 subsets' sentence labels, scored on the held-out
  one), so no subset is scored by a model that saw it. The shipped head (trained on all 7) is shown
  too, marked in-sample.
- token overlap: share of the response's content words found in the documents.
- gpt3_adherence: RAGBench's shipped GPT-3.5 judge score, where the column is filled.

Second table: RMSE of our TRACe relevance / utilization / completeness against RAGBench's shipped
``relevance_score`` / ``utilization_score`` / ``completeness_score`` (GPT-4 annotations), per
subset. All scores come from :func:`ragsweep.evaluator.trace.trace_scores` with
``length="sentences", ragbench_compat=True`` over RAGBench's own ``documents_sentences`` keys (the
setting that reproduces the shipped scores exactly from the shipped key lists), so only the keys
differ:

- utilized keys, two rules as the evaluator's ``trace_attribution``:
  ``cover`` (the default, no checker): for each response sentence, the document sentences that
  supply its content words (:func:`ragsweep.evaluator.trace.lexical_cover`: greedy, each
  sentence adding >= 3 new content words); ``entailment``: each response sentence is a claim; it
  is checked against each whole document (the document's sentences joined by spaces), and inside
  each document that entails it, against each sentence of that document; a document sentence
  that entails some response sentence is utilized. Only the checker's labels are used
  ("Entailment" counts), so ``--checker llm|nli`` run the same code.
- relevant keys: RAGBench's relevance is "sentences relevant to answering the question"; the
  product's relevance needs a ground-truth answer, which RAGBench rows do not have, so proxies:
  (a) question cosine: sentences whose all-MiniLM-L6-v2 cosine with the question is at least 0.5
  (the offline RAGAS context-relevance substitute); (b) main row: (a) united with the utilized
  sentences (a sentence the response used is relevant; RAGBench's own utilized keys are a subset
  of its relevant keys on 86% of validation rows).
- completeness: from the same relevant and utilized keys.

Reference rows: a constant predictor (each subset gets the mean shipped score over the rows of the
other loaded subsets) and RAGBench's shipped judge columns where they are filled on every row of a
subset (``gpt3_context_relevance`` vs ``relevance_score``, ``gpt35_utilization`` vs
``utilization_score``; ``ragas_context_relevance`` / ``trulens_context_relevance`` are compared to
``relevance_score`` when filled; no shipped judge column estimates completeness).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

import numpy as np

from experiments.meta_eval import common as C
from ragsweep.evaluator.labels import ENTAILMENT
from ragsweep.evaluator import trace as tr

NAME = "ragbench"
#: RAGBench paper, Table 3: hallucination-detection AUROC on the *test* splits (not rerun here)
PUBLISHED = {
    "GPT-3.5 judge": dict(covidqa=0.57, delucionqa=0.57, emanual=0.54, expertqa=0.55, hagrid=0.58, hotpotqa=0.59, msmarco=0.65),
    "RAGAS faithfulness": dict(covidqa=0.58, delucionqa=0.70, emanual=0.57, expertqa=0.57, hagrid=0.62, hotpotqa=0.62,
                               msmarco=0.63),
    "TruLens groundedness": dict(covidqa=0.62, delucionqa=0.55, emanual=0.61, expertqa=0.70, hagrid=0.67, hotpotqa=0.64,
                                 msmarco=0.62),
    "DeBERTa-v3-large NLI fine-tuned on RAGBench train": dict(covidqa=0.77, delucionqa=0.64, emanual=0.76, expertqa=0.87,
                                                              hagrid=0.81, hotpotqa=0.85, msmarco=0.70),
}


def example_scores(rows_idx: np.ndarray, p: np.ndarray, n_rows: int, agg: str = "min") -> np.ndarray:
    out = np.ones(n_rows)
    for i in range(n_rows):
        v = p[rows_idx == i]
        if len(v):
            out[i] = v.min() if agg == "min" else v.mean()
    return out


def loso_predictions(data: dict[str, Any], heads_fn: Any) -> tuple[np.ndarray, dict[str, str]]:
    """Sentence P from heads trained leave-one-subset-out; ``notes[subset]`` says when that was impossible."""
    from experiments.meta_eval.train_offline import predict

    X, y, sub = data["X"], data["y"], data["subset"]
    p = np.full(len(y), np.nan)
    notes: dict[str, str] = {}
    for s in data["rows"]:
        test = sub == s
        train = ~test
        if train.sum() < 10 or len(set(y[train].tolist())) < 2:
            notes[s] = "too little other-subset data for a LOSO fit: shipped head used"
            continue
        head = heads_fn(X[train], y[train], sub[train])
        p[test] = predict(head, X[test])
    return p, notes


# -- TRACe relevance / utilization / completeness ------------------------------------------------
TRACE_METRICS = ("relevance", "utilization", "completeness")
#: cosine(question, sentence) at or above which a context sentence is relevant (offline RAGAS default)
QUESTION_THRESHOLD = 0.5
#: RAGBench's shipped judge columns and the shipped TRACe score each one estimates
SHIPPED_JUDGES = {
    "gpt3_context_relevance": ("relevance", "RAGBench's GPT-3.5 judge"),
    "gpt35_utilization": ("utilization", "RAGBench's GPT-3.5 judge"),
    "ragas_context_relevance": ("relevance", "RAGBench's RAGAS run"),
    "trulens_context_relevance": ("relevance", "RAGBench's TruLens run"),
}


def _docs(row: dict[str, Any]) -> list[list[tuple[str, str]]]:
    return [[(str(k), str(t)) for k, t in doc] for doc in row["documents_sentences"]]


def _labels_unique(checker: Any, pairs: list[tuple[str, str]], cache: Any) -> list[Any]:
    """``C.check_pairs`` on the distinct pairs (one call), mapped back to every pair."""
    unique = list(dict.fromkeys(pairs))
    got = dict(zip(unique, C.check_pairs(checker, unique, cache)))
    return [got[p] for p in pairs]


def utilized_keys(checker: Any, rows: Sequence[dict[str, Any]], cache: Any = None) -> list[list[str]]:
    """Per row, the document sentence keys that entail some response sentence.

    Stage 1 checks every (response sentence, whole document) pair; stage 2 checks a response
    sentence against each sentence of the documents that entailed it in stage 1 (the product's
    pruning in ``pipeline._trace_entailment``). One ``check_pairs`` call per stage for all rows.
    """
    docs = [_docs(r) for r in rows]
    pairs1, where1 = [], []
    for i, r in enumerate(rows):
        for _, claim in r["response_sentences"]:
            for d, sents in enumerate(docs[i]):
                if sents:
                    pairs1.append((str(claim), " ".join(t for _, t in sents)))
                    where1.append((i, d))
    labels1 = _labels_unique(checker, pairs1, cache) if pairs1 else []
    pairs2, keys2 = [], []
    for (claim, _), (i, d), lab in zip(pairs1, where1, labels1):
        if lab == ENTAILMENT:
            for key, sent in docs[i][d]:
                pairs2.append((claim, sent))
                keys2.append((i, key))
    labels2 = _labels_unique(checker, pairs2, cache) if pairs2 else []
    out: list[dict[str, None]] = [{} for _ in rows]
    for (i, key), lab in zip(keys2, labels2):
        if lab == ENTAILMENT:
            out[i][key] = None
    order = [{k: n for n, (k, _) in enumerate(s for doc in d for s in doc)} for d in docs]
    return [sorted(o, key=order[i].__getitem__) for i, o in enumerate(out)]


COVER_MIN_NEW = tr.COVER_MIN_NEW


def cover_keys(rows: Sequence[dict[str, Any]], min_new: int = COVER_MIN_NEW) -> list[list[str]]:
    """Per row, the evaluator's ``trace_attribution="cover"`` rule (no checker): the document
    sentences each response sentence draws its words from (:func:`ragsweep.evaluator.trace.lexical_cover`)."""
    out = []
    for r in rows:
        per_claim = tr.lexical_cover([str(t) for _, t in r["response_sentences"]], _docs(r), min_new)
        out.append(list(dict.fromkeys(k for keys in per_claim for k in keys)))
    return out


def question_relevant_keys(embedder: Any, rows: Sequence[dict[str, Any]],
                           threshold: float = QUESTION_THRESHOLD) -> list[list[str]]:
    """Per row, the document sentence keys whose cosine with the question is >= ``threshold``
    (``embedder.encode`` gives unit-norm rows, as :class:`ragsweep.evaluator.ragas.Embedder`)."""
    texts: list[str] = []
    spans = []
    for r in rows:
        sents = [s for doc in _docs(r) for s in doc]
        spans.append((len(texts), sents))
        texts.append(str(r.get("question") or ""))
        texts += [t for _, t in sents]
    if not texts:
        return []
    vecs = np.asarray(embedder.encode(texts), dtype=np.float32)
    out = []
    for start, sents in spans:
        cos = vecs[start + 1 : start + 1 + len(sents)] @ vecs[start] if sents else np.zeros(0)
        out.append([k for (k, _), c in zip(sents, cos) if c >= threshold])
    return out


def trace_predictions(rows: Sequence[dict[str, Any]], relevant: Sequence[Sequence[str]],
                      utilized: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """``{metric: per-row value}`` from ``trace_scores`` with RAGBench's Len (sentences, compat)."""
    vals: dict[str, list[float]] = {m: [] for m in TRACE_METRICS}
    for r, rel, util in zip(rows, relevant, utilized):
        res = tr.trace_scores(_docs(r), rel, util, length="sentences", ragbench_compat=True)
        for m in TRACE_METRICS:
            vals[m].append(float(res[m]))
    return {m: np.asarray(v, dtype=float) for m, v in vals.items()}


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def shipped(rows: Sequence[dict[str, Any]], column: str) -> np.ndarray:
    """A row column as floats (missing / None -> NaN)."""
    return np.asarray([_num(r.get(column)) for r in rows], dtype=float)


def rmse(pred: np.ndarray, truth: np.ndarray) -> float:
    """Root mean squared error over the rows where both are finite; NaN when truth is missing on
    any row (a column that is not filled on the whole subset) or nothing is left."""
    pred, truth = np.asarray(pred, dtype=float), np.asarray(truth, dtype=float)
    if not len(truth) or not np.isfinite(truth).all():
        return float("nan")
    ok = np.isfinite(pred)
    if not ok.any():
        return float("nan")
    return float(np.sqrt(np.mean((pred[ok] - truth[ok]) ** 2)))


def trace_rmse_section(rows_by: dict[str, list[dict[str, Any]]], checker: Any, cache: Any, name: str,
                       embedder: Any = None) -> list[str]:
    """The Markdown lines of the TRACe RMSE table (see the module doc)."""
    subsets = [s for s in rows_by if rows_by[s]]
    truth = {s: {m: shipped(rows_by[s], f"{m}_score") for m in TRACE_METRICS} for s in subsets}
    if not any(np.isfinite(truth[s][m]).any() for s in subsets for m in TRACE_METRICS):
        return ["TRACe RMSE: - (the data has no shipped relevance_score / utilization_score / completeness_score)."]
    if embedder is None:
        from ragsweep.evaluator.ragas import Embedder

        embedder = Embedder(cache=cache)
    ours: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    n_pred_nan = 0
    for s in subsets:
        rows = rows_by[s]
        entail = utilized_keys(checker, rows, cache)  # trace_attribution=entailment
        cover = cover_keys(rows)  # trace_attribution=cover (the evaluator's default)
        qrel = question_relevant_keys(embedder, rows)
        union = [list(dict.fromkeys([*q, *u])) for q, u in zip(qrel, cover)]
        union_e = [list(dict.fromkeys([*q, *u])) for q, u in zip(qrel, entail)]
        ours[s] = {"union": trace_predictions(rows, union, cover), "question": trace_predictions(rows, qrel, cover),
                   "entail": trace_predictions(rows, union_e, entail)}
        n_pred_nan += int(np.isnan(ours[s]["union"]["relevance"]).sum())

    def row(label: str, vals: list[float]) -> list[Any]:
        finite = [v for v in vals if v == v]
        return [label] + vals + [float(np.mean(finite)) if finite and len(finite) == len(vals) else float("nan")]

    cos = f"question cosine (MiniLM) >= {QUESTION_THRESHOLD}"
    table: list[list[Any]] = [["rows"] + [str(len(rows_by[s])) for s in subsets] + [""]]
    cov = f"trace_attribution=cover (default): sentences supplying >= {COVER_MIN_NEW} of a response sentence's content words"
    ent = "trace_attribution=entailment: sentences entailing a response sentence (checker)"
    labels = {
        "relevance": [(f"**{name}**, relevance: {cos}, or utilized (cover)", "union"),
                      (f"{name}, relevance: {cos} only", "question"),
                      (f"{name}, relevance: {cos}, or utilized (entailment)", "entail")],
        "utilization": [(f"**{name}**, utilization: {cov}", "union"),
                        (f"{name}, utilization: {ent}", "entail")],
        "completeness": [(f"**{name}**, completeness (relevant = {cos} or utilized; cover)", "union"),
                         (f"{name}, completeness (relevant = {cos} only; cover)", "question"),
                         (f"{name}, completeness (entailment)", "entail")],
    }
    filled_somewhere = []
    for m in TRACE_METRICS:
        for label, variant in labels[m]:
            table.append(row(label, [rmse(ours[s][variant][m], truth[s][m]) for s in subsets]))
        const = []
        for s in subsets:
            other = np.concatenate([truth[o][m] for o in subsets if o != s] or [np.zeros(0)])
            other = other[np.isfinite(other)]
            c = float(other.mean()) if len(other) else float("nan")
            const.append(rmse(np.full(len(truth[s][m]), c), truth[s][m]))
        table.append(row(f"constant: mean shipped {m}_score of the other subsets' rows", const))
        for col, (metric, who) in SHIPPED_JUDGES.items():
            if metric != m:
                continue
            vals = [rmse(shipped(rows_by[s], col), truth[s][m]) if np.isfinite(shipped(rows_by[s], col)).all()
                    else float("nan") for s in subsets]
            if any(v == v for v in vals):
                table.append(row(f"{col} ({who}, shipped, where filled) vs {m}_score", vals))
                filled_somewhere.append(col)
    empty = [c for c in SHIPPED_JUDGES if c not in filled_somewhere]

    def means(m: str, variant: str = "union") -> str:
        t = np.concatenate([truth[s][m] for s in subsets])
        o = np.concatenate([ours[s][variant][m] for s in subsets])
        return f"{np.nanmean(t):.3f} / {np.nanmean(o):.3f}"

    lines = [
        "## RAGBench validation: RMSE of TRACe relevance / utilization / completeness against the shipped "
        "relevance_score / utilization_score / completeness_score (lower is better)",
        "",
        C.md_table(["scorer, metric"] + subsets + ["mean"], table, digits=3),
        "",
        f"- ours: utilized keys by the lexical cover (default) or the {name} checker's labels (entailment), relevant "
        "keys by MiniLM question cosine (and utilized), scored by "
        "trace_scores(length='sentences', ragbench_compat=True) over RAGBench's documents_sentences keys; bold = the "
        "main rows. The shipped scores are GPT-4 annotations, so every row measures agreement with GPT-4.",
        "- mean over all rows, shipped / ours (main rows): relevance " + means("relevance")
        + ", utilization " + means("utilization") + ", completeness " + means("completeness")
        + f"; relevance with the {cos} proxy alone: " + means("relevance", "question") + ".",
        "- constant: each subset is predicted by the mean shipped score over the rows of the other loaded subsets.",
        "- no shipped judge column estimates completeness; judge rows are n/a where the column is not filled on every "
        "row of the subset" + (f"; not filled on any loaded subset: {', '.join(empty)}" if empty else "") + ".",
    ]
    if n_pred_nan:
        lines.append(f"- {n_pred_nan} rows without document sentences have no score (left out of the RMSE).")
    return lines


def run(args: argparse.Namespace) -> str:
    folder = C.find_data(args.data, "ragbench", "*/validation.*")
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    checker = C.checker_from_args(args)
    offline = hasattr(checker, "features") and hasattr(checker, "predict")  # a feature-based checker (offline)

    per: dict[str, dict[str, Any]] = {}
    if offline:
        from experiments.meta_eval.train_offline import FULL_FEATURES, LEX_FEATURES, fit_head, ragbench_sentence_data

        data = ragbench_sentence_data(folder, checker, cache, args.limit)
        feats = FULL_FEATURES if checker.use_embeddings else LEX_FEATURES
        p_loso, notes = loso_predictions(data, lambda X, y, g: fit_head(X, y, feats, groups=g))
        p_ship = checker.predict(data["X"])
        p_loso = np.where(np.isnan(p_loso), p_ship, p_loso)
        rows_by = data["rows"]
    else:
        rows_by = {s: r for s in C.RAGBENCH_SUBSETS if (r := C.load_ragbench_subset(folder / s, args.limit))}
        notes = {}
    if not rows_by:
        raise C.Skip(f"no RAGBench subsets under {folder}")

    for s, rows in rows_by.items():
        y = np.array([int(bool(r["adherence_score"])) for r in rows])
        res: dict[str, Any] = {"n": len(rows), "adherent": float(y.mean())}
        if offline:
            m = data["subset"] == s
            ri, ys = data["row"][m], data["y"][m]
            res["offline_loso"] = C.auroc(y, example_scores(ri, p_loso[m], len(rows)))
            res["offline_loso_sent"] = C.auroc(ys, p_loso[m])
            res["offline_ship"] = C.auroc(y, example_scores(ri, p_ship[m], len(rows)))
            res["offline_loso_mean"] = C.auroc(y, example_scores(ri, p_loso[m], len(rows), "mean"))
        else:
            pairs, ri = [], []
            for i, r in enumerate(rows):
                ref = C.ragbench_reference(r)
                for _, t, _lab in C.ragbench_sentence_labels(r):
                    pairs.append((t, ref))
                    ri.append(i)
            ps = C.score_pairs(checker, pairs, cache)
            res["offline_loso"] = C.auroc(y, example_scores(np.asarray(ri), ps, len(rows)))
        tok = [C.content_overlap(r["response"], C.ragbench_reference(r)) for r in rows]
        res["token"] = C.auroc(y, tok)
        g3 = [r.get("gpt3_adherence") for r in rows]
        ok = [i for i, v in enumerate(g3) if v is not None and v == v]
        res["gpt3"] = C.auroc(y[ok], [g3[i] for i in ok]) if len(ok) == len(rows) else float("nan")
        per[s] = res

    name = args.checker
    subsets = list(per)
    def row(label: str, key: str) -> list[Any]:
        vals = [per[s].get(key, float("nan")) for s in subsets]
        finite = [v for v in vals if v == v]
        return [label] + vals + [float(np.mean(finite)) if len(finite) == len(vals) else float("nan")]

    rows_out = []
    if offline:
        rows_out.append(row(f"**{name}**, min sentence P, leave-one-subset-out head", "offline_loso"))
        rows_out.append(row(f"{name}, mean sentence P, leave-one-subset-out head", "offline_loso_mean"))
        rows_out.append(row(f"{name}, min sentence P, shipped head (in-sample: saw all subsets)", "offline_ship"))
    else:
        rows_out.append(row(f"**{name}**, min sentence P", "offline_loso"))
    rows_out.append(row("token overlap (content-word recall of the response)", "token"))
    rows_out.append(row("gpt3_adherence (RAGBench's GPT-3.5 judge, where filled)", "gpt3"))
    for label, vals in PUBLISHED.items():
        pv = [vals.get(s, float("nan")) for s in subsets]
        rows_out.append([f"{label} (published, RAGBench paper, test split)"] + pv + [float(np.mean(pv))])
    header = ["scorer"] + subsets + ["mean"]
    counts = ["rows (adherent share)"] + [f"{per[s]['n']} ({per[s]['adherent']:.2f})" for s in subsets] + [""]
    lines = [
        "## RAGBench validation: AUROC of the example score for adherence (adherent = positive; "
        "= AUROC of 1 - score for detecting non-adherence)",
        "",
        C.md_table(header, [counts] + rows_out, digits=3),
    ]
    if offline:
        lines += ["", "Sentence-level AUROC (response sentence supported, LOSO head):", "",
                  C.md_table(header, [row(f"{name}, sentence P", "offline_loso_sent")], digits=3)]
    if notes:
        lines.append("")
    for s, n in notes.items():
        lines.append(f"- {s}: {n}")
    lines += ["", *trace_rmse_section(rows_by, checker, cache, name)]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = C.parser(NAME, __doc__.splitlines()[0])
    return C.run_main(NAME, run, p, argv)


if __name__ == "__main__":
    sys.exit(main())
