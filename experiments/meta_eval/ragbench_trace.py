"""RAGBench's TRACe metrics (relevance, utilization, completeness) as the product computes them,
against RAGBench's shipped GPT-4 labels: which context sentences a response uses, cover the
answer or fit the question, and the RMSE section of ``results/ragbench.md``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from ragsweep.judge import trace as tr  # noqa: E402
from ragsweep.judge.labels import ENTAILMENT  # noqa: E402


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
    sentences each response sentence draws its words from (:func:`ragsweep.judge.trace.lexical_cover`)."""
    out = []
    for r in rows:
        per_claim = tr.lexical_cover([str(t) for _, t in r["response_sentences"]], _docs(r), min_new)
        out.append(list(dict.fromkeys(k for keys in per_claim for k in keys)))
    return out


def question_relevant_keys(embedder: Any, rows: Sequence[dict[str, Any]],
                           threshold: float = QUESTION_THRESHOLD) -> list[list[str]]:
    """Per row, the document sentence keys whose cosine with the question is >= ``threshold``
    (``embedder.encode`` gives unit-norm rows, as :class:`ragsweep.judge.ragas.Embedder`)."""
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
        from ragsweep.judge.ragas import Embedder

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
