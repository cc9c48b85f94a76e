"""judge_agreement on RAGBench: loading its features by split, adherence (leave-one-subset-out on
``dev`` halves, scored on ``test`` halves) and the TRACe relevance proxy."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval import ja_core as K  # noqa: E402
from experiments.meta_eval.ja_core import OFFLINE, TAUS, fast_auroc, features, paired_boot  # noqa: E402


def load_ragbench(folder: Path, splits: dict[str, Any], checker: Any, cache: Any, fdir: Path | None,
                  limit: int | None, trained: Any = None) -> dict[str, Any]:
    """Per subset: rows, the part of each row (dev / test), sentence features (with the column
    ``trained`` when a trained scorer is given) and labels."""
    out: dict[str, Any] = {}
    for s, parts in splits["ragbench"]["subsets"].items():
        rows = C.load_ragbench_subset(folder / s, limit)
        if not rows:
            continue
        part_of = {i: "dev" for i in parts["dev"]} | {i: "test" for i in parts["test"]}
        pairs, y, rix = C.ragbench_sentence_pairs(rows)
        out[s] = {"rows": rows, "part": np.array([part_of[str(r["id"])] for r in rows]),
                  "adherent": np.array([int(bool(r["adherence_score"])) for r in rows]),
                  "f": features(checker, pairs, cache, fdir, trained), "y": np.asarray(y, int), "row": np.asarray(rix, int)}
        out[s]["sent_part"] = out[s]["part"][out[s]["row"]] if len(rix) else np.zeros(0, str)
    return out


def _stack(rb: dict[str, Any], subsets: Sequence[str], part: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y, g = [], [], []
    for s in subsets:
        m = rb[s]["sent_part"] == part
        X.append(rb[s]["f"].X[m])
        y.append(rb[s]["y"][m])
        g += [s] * int(m.sum())
    return np.vstack(X), np.concatenate(y), np.asarray(g)


def fit_on(rb: dict[str, Any], subsets: Sequence[str], feats: str, part: str = "dev") -> dict[str, Any]:
    X, y, g = _stack(rb, subsets, part)
    return K.fit_family(X, y, feats, groups=g)


def example_scores(d: dict[str, Any], p: np.ndarray, part: str, agg: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of the rows of ``part``: min or mean sentence P (1.0 for a row without sentences)."""
    idx = np.flatnonzero(d["part"] == part)
    sc = []
    for i in idx:
        v = p[d["row"] == i]
        sc.append(1.0 if not len(v) else (v.min() if agg == "min" else v.mean()))
    return d["adherent"][idx], np.asarray(sc)


def rb_auroc(d: dict[str, Any], head: dict[str, Any], part: str, agg: str) -> float:
    y, s = example_scores(d, d["f"].probs(head), part, agg)
    return C.auroc(y, s)


def ragbench_adherence(rb: dict[str, Any], family: Sequence[str] = OFFLINE, judge: str = "offline",
                       versus: dict[str, Any] | None = None) -> dict[str, Any]:
    """Adherence AUROC of the judge whose feature sets are ``family`` (see ``ja_core.JUDGES``); with
    ``versus`` (the offline judge's result) also the paired difference to its protocol."""
    subsets = list(rb)
    cands = [(f, a) for f in family for a in ("min", "mean")]
    default = (family[0], "min")
    res: dict[str, dict[str, float]] = defaultdict(dict)
    chosen: dict[str, tuple[str, str]] = {}
    arr: dict[str, dict[str, np.ndarray]] = {}
    for s in subsets:
        others = [o for o in subsets if o != s]
        heads = {f: fit_on(rb, others, f) for f in family}
        arr[s] = {}
        for f, a in cands:
            yt, arr[s][f"{f}/{a}"] = example_scores(rb[s], rb[s]["f"].probs(heads[f]), "test", a)
            res[f"{f}/{a}"][s] = C.auroc(yt, arr[s][f"{f}/{a}"])
        arr[s]["y"] = yt
        # inner leave-one-subset-out on the other subsets' dev halves
        inner = {c: [] for c in cands}
        for t in others:
            rest = [o for o in others if o != t]
            ih = {f: fit_on(rb, rest, f) for f in family}
            for f, a in cands:
                inner[(f, a)].append(rb_auroc(rb[t], ih[f], "dev", a))
        best = max(cands, key=lambda c: (np.nanmean(inner[c]), c == default))
        chosen[s] = best
        res["protocol"][s] = res[f"{best[0]}/{best[1]}"][s]
        arr[s]["protocol"] = arr[s][f"{best[0]}/{best[1]}"]
        idx = np.flatnonzero(rb[s]["part"] == "test")
        rows = [rb[s]["rows"][i] for i in idx]
        arr[s]["token"] = np.array([C.content_overlap(r["response"], C.ragbench_reference(r)) for r in rows])
        res["token"][s] = C.auroc(rb[s]["adherent"][idx], arr[s]["token"])
        res["n"][s] = len(idx)
    # the choice the protocol makes on all 7 dev halves (what a re-trained model ships)
    inner = {c: [] for c in cands}
    for t in subsets:
        ih = {f: fit_on(rb, [o for o in subsets if o != t], f) for f in family}
        for f, a in cands:
            inner[(f, a)].append(rb_auroc(rb[t], ih[f], "dev", a))
    final = max(cands, key=lambda c: (np.nanmean(inner[c]), c == default))
    if versus is not None:
        for s in subsets:
            arr[s]["offline"] = versus["arr"][s]["protocol"]

    def diff(pk: dict[str, np.ndarray], a: str, b: str = "token") -> float:
        return float(np.mean([fast_auroc(arr[s]["y"][pk[s]], arr[s][a][pk[s]])
                              - fast_auroc(arr[s]["y"][pk[s]], arr[s][b][pk[s]])
                              for s in subsets]))

    groups = {s: arr[s]["y"] for s in subsets}
    if judge == "offline":
        pairs = [("shipped recipe - token overlap", "full/min", "token"), ("protocol - token overlap", "protocol", "token")]
    else:
        pairs = [(f"{judge} - token overlap", "protocol", "token")]
        pairs += [(f"{judge} - offline protocol", "protocol", "offline")] if versus is not None else []
    boot = {n: paired_boot(lambda pk, a=a, b=b: diff(pk, a, b), groups) for n, a, b in pairs}
    return {"per": dict(res), "chosen": chosen, "final": final, "subsets": subsets, "boot": boot,
            "dev_loso": {f"{f}/{a}": float(np.nanmean(v)) for (f, a), v in inner.items()},
            "judge": judge, "family": tuple(family), "arr": arr}


def trace_relevance(rb: dict[str, Any], cache: Any, emb: Any = None) -> dict[str, Any]:
    from experiments.meta_eval import ragbench_trace as R
    from ragsweep.judge.ragas import Embedder

    emb = emb if emb is not None else Embedder(cache=cache)
    subsets = list(rb)
    preds: dict[str, dict[tuple[float, bool], np.ndarray]] = {}
    truth: dict[str, np.ndarray] = {}
    for s in subsets:
        rows = rb[s]["rows"]
        texts, spans = [], []
        for r in rows:
            sents = [x for doc in R._docs(r) for x in doc]
            spans.append((len(texts), sents))
            texts.append(str(r.get("question") or ""))
            texts += [t for _, t in sents]
        vecs = np.asarray(emb.encode(texts), dtype=np.float32)
        cos = [(vecs[a + 1: a + 1 + len(st)] @ vecs[a]) if st else np.zeros(0) for a, st in spans]
        cover = R.cover_keys(rows)
        truth[s] = R.shipped(rows, "relevance_score")
        preds[s] = {}
        for tau in TAUS:
            q = [[k for (k, _), c in zip(st, cs) if c >= tau] for (_, st), cs in zip(spans, cos)]
            for union in (False, True):
                rel = [list(dict.fromkeys([*a, *b])) for a, b in zip(q, cover)] if union else q
                preds[s][(tau, union)] = R.trace_predictions(rows, rel, cover)["relevance"]

    def rm(s: str, key: Any, part: str) -> float:
        m = rb[s]["part"] == part
        pred = key if isinstance(key, np.ndarray) else preds[s][key]
        return R.rmse(pred[m], truth[s][m])

    def const(s: str) -> float:
        vals = np.concatenate([truth[o][rb[o]["part"] == "dev"] for o in subsets if o != s])
        return float(np.nanmean(vals))

    out: dict[str, dict[str, float]] = defaultdict(dict)
    chosen = {}
    for s in subsets:
        others = [o for o in subsets if o != s]
        best = min(preds[s], key=lambda k: (np.nanmean([rm(o, k, "dev") for o in others]), k != (0.5, True)))
        chosen[s] = best
        out["protocol"][s] = rm(s, best, "test")
        out["shipped_proxy"][s] = rm(s, (0.5, True), "test")
        out["question_only"][s] = rm(s, (0.5, False), "test")
        out["constant"][s] = rm(s, np.full(len(truth[s]), const(s)), "test")
        out["n"][s] = int((rb[s]["part"] == "test").sum())
    final = min(preds[subsets[0]], key=lambda k: (np.nanmean([rm(o, k, "dev") for o in subsets]), k != (0.5, True)))
    test = {s: rb[s]["part"] == "test" for s in subsets}
    tt = {s: truth[s][test[s]] for s in subsets}
    pa = {"shipped proxy": {s: preds[s][(0.5, True)][test[s]] for s in subsets},
          "protocol": {s: preds[s][chosen[s]][test[s]] for s in subsets},
          "constant": {s: np.full(int(test[s].sum()), const(s)) for s in subsets}}

    def diff(pk: dict[str, np.ndarray], a: str) -> float:
        return float(np.mean([R.rmse(pa[a][s][pk[s]], tt[s][pk[s]]) - R.rmse(pa["constant"][s][pk[s]], tt[s][pk[s]])
                              for s in subsets]))

    boot = {f"{n} - constant": paired_boot(lambda pk, a=a: diff(pk, a), tt) for a, n in
            (("shipped proxy", "shipped proxy"), ("protocol", "protocol"))}
    return {"per": dict(out), "chosen": chosen, "final": final, "subsets": subsets, "boot": boot}


# -- WiCE --------------------------------------------------------------------------------------
