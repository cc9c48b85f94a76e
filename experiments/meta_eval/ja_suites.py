"""judge_agreement on WiCE (head chosen on ``select``, scored on ``test``) and on RAGChecker's human
preferences (leave-one-domain-out)."""

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
from experiments.meta_eval.ja_core import (  # noqa: E402
    FEATS, GRID, OFFLINE, SHIPPED_ANSWER_THRESHOLD, default_extractor_claims, fast_auroc, features, paired_boot,
    shipped_heads,
)
from experiments.meta_eval.heads import best_threshold  # noqa: E402


def wice_suite(folder: Path, splits: dict[str, Any], checker: Any, cache: Any, fdir: Path | None,
               heads: dict[str, dict[str, Any]], trained: Any = None, family: Sequence[str] = OFFLINE,
               judge: str = "offline", versus: dict[str, Any] | None = None) -> dict[str, Any]:
    """WiCE AUROC of the judge whose feature sets are ``family``: ``heads[f]`` (fitted on RAGBench
    dev halves) for f in ``family``, or a head of ``family[0]`` fitted on ``select`` (not for the
    trained P, used directly); with ``versus`` (the offline judge's result) also the paired
    difference to its protocol."""
    from experiments.meta_eval import wice_lib as W

    items, claims = W.load(folder)
    f = features(checker, [(it["claim"], C.wice_reference(it)) for it in items], cache, fdir, trained)
    keys = list(claims)
    lab = {k: items[claims[k][0]]["label"] for k in keys}
    part = {k: "select" for k in splits["wice"]["select"]} | {k: "test" for k in splits["wice"]["test"]}
    sel = [k for k in keys if part[str(k)] == "select"]
    tst = [k for k in keys if part[str(k)] == "test"]
    y_chunk = np.array([int(it["label"] == "supported") for it in items])

    def claim_scores(p: np.ndarray, ks: list[str]) -> np.ndarray:
        return np.array([p[claims[k]].max() for k in ks])

    def sup(ks: list[str]) -> list[int]:
        return [int(lab[k] == "supported") for k in ks]

    def chunk_mask(ks: list[str]) -> np.ndarray:
        m = np.zeros(len(items), bool)
        for k in ks:
            m[claims[k]] = True
        return m

    cands = {("trained P" if fn == "trained" else f"ragbench-dev head, {fn}"): heads[fn] for fn in family}
    sel_auc = {n: C.auroc(sup(sel), claim_scores(f.probs(h), sel)) for n, h in cands.items()}
    if family[0] != "trained":
        # WiCE-fitted head: 5-fold CV inside select (for the choice), fitted on all of select (for test)
        cv = np.zeros(len(items))
        for fold in range(5):
            te = [k for i, k in enumerate(sel) if i % 5 == fold]
            tr = [k for i, k in enumerate(sel) if i % 5 != fold]
            h = K.fit_head(f.X[chunk_mask(tr)], y_chunk[chunk_mask(tr)], FEATS[family[0]])
            cv[chunk_mask(te)] = f.probs(h)[chunk_mask(te)]
        wice_head = K.fit_head(f.X[chunk_mask(sel)], y_chunk[chunk_mask(sel)], FEATS[family[0]])
        sel_auc[f"WiCE-select head, {family[0]}"] = C.auroc(sup(sel), claim_scores(cv, sel))
        cands[f"WiCE-select head, {family[0]}"] = wice_head
    best = max(sel_auc, key=lambda n: (sel_auc[n], n == next(iter(cands))))
    test_auc = {n: C.auroc(sup(tst), claim_scores(f.probs(h), tst)) for n, h in cands.items()}
    if judge == "offline":
        ship = shipped_heads()
        test_auc["shipped head (all RAGBench)"] = C.auroc(sup(tst), claim_scores(f.probs(ship["full"]), tst))
    test_auc["protocol"] = test_auc[best]
    tok = np.array([C.content_overlap(it["claim"], C.wice_reference(it)) for it in items])
    test_auc["token overlap"] = C.auroc(sup(tst), claim_scores(tok, tst))
    pp = claim_scores(f.probs(cands[best]), tst)
    pt = claim_scores(tok, tst)
    ys = np.array(sup(tst))
    if judge == "offline":
        ps = claim_scores(f.probs(ship["full"]), tst)
        pairs = [("shipped - token overlap", ps, pt), ("protocol - token overlap", pp, pt)]
    else:
        pairs = [(f"{judge} - token overlap", pp, pt)]
        pairs += [(f"{judge} - offline protocol", pp, versus["protocol_scores"])] if versus is not None else []
    boot = {n: paired_boot(
        lambda pk, a=a, b=b: fast_auroc(ys[pk["all"]], a[pk["all"]]) - fast_auroc(ys[pk["all"]], b[pk["all"]]), {"all": ys})
        for n, a, b in pairs}
    # answer thresholds of the re-trained heads: plateau of claim-level balanced accuracy on select
    answer = {n: best_threshold(np.array(sup(sel)), claim_scores(f.probs(heads[n]), sel)) for n in family}
    return {"select": sel_auc, "test": test_auc, "chosen": best, "boot": boot, "n_select": len(sel), "n_test": len(tst),
            "answer_threshold": answer, "judge": judge, "protocol_scores": pp,
            "counts": {k: sum(1 for x in tst if lab[x] == k) for k in ("supported", "partially_supported", "not_supported")}}


def rc_suite(folder: Path, splits: dict[str, Any], checker: Any, cache: Any, fdir: Path | None,
             heads: dict[str, dict[str, Any]], new_answer: dict[str, float], trained: Any = None,
             family: Sequence[str] = OFFLINE, judge: str = "offline", versus: dict[str, Any] | None = None) -> dict[str, Any]:
    """Human-preference Pearson of the judge whose feature sets are ``family`` (``heads[f]`` fitted on
    RAGBench dev halves, ``new_answer[f]`` their WiCE-select answer thresholds); with ``versus`` (the
    offline judge's result) also the paired difference to its protocol."""
    from experiments.meta_eval import ragchecker_human_lib as H

    human, instances, baseline = H.load(folder)
    folds = {d: set(v) for d, v in splits["ragchecker_human"]["folds"].items()}
    dom_of = {i: d for d, v in folds.items() for i in v}
    ids = [inst["instance_id"] for inst in instances]
    # per unit: the pairs (claim, reference) and their slots
    per_unit: dict[str, Any] = {}
    claims_of = {"sentence": lambda text, q: H.claims_of(text, "sentence"),
                 "clause": default_extractor_claims()}
    for unit in ("sentence", "clause"):
        pairs, slots = [], []
        for inst in instances:
            gt, q = inst["gt_answer"], inst.get("query")
            for m in ("model1", "model2"):
                resp = inst[m]["response"]
                for c in claims_of[unit](resp, q):
                    pairs.append((c, gt))
                    slots.append((inst["instance_id"], m, "p"))
                for c in claims_of[unit](gt, q):
                    pairs.append((c, resp))
                    slots.append((inst["instance_id"], m, "r"))
        per_unit[unit] = (features(checker, pairs, cache, fdir, trained), slots)

    def scores(unit: str, head: dict[str, Any], thr: float | None) -> dict[int, dict[str, tuple]]:
        f, slots = per_unit[unit]
        v = f.probs(head) if thr is None else f.labels(head, thr)
        acc: dict[tuple, list[float]] = defaultdict(list)
        for sl, x in zip(slots, v):
            acc[sl].append(float(x))
        out: dict[int, dict[str, tuple]] = {}
        for i in ids:
            out[i] = {}
            for m in ("model1", "model2"):
                p = float(np.mean(acc[(i, m, "p")])) if acc.get((i, m, "p")) else 0.0
                r = float(np.mean(acc[(i, m, "r")])) if acc.get((i, m, "r")) else 0.0
                out[i][m] = H.prf(p, r)
        return out

    labels_of: dict[int, list[float]] = defaultdict(list)
    for h in human:
        labels_of[h["instance_id"]].append(float(h["overall_label"]))
    ids_of = {d: np.array([i for i in ids if dom_of[i] == d]) for d in sorted(folds)}

    def pooled(sc: dict[int, dict[str, tuple]], domains: Sequence[str], pick: dict[str, np.ndarray] | None = None) -> float:
        """Overall Pearson x100 over the labels of ``domains`` (F1 difference, normalised within each
        domain); ``pick[d]``: positions of the instances of ``d`` to use (a bootstrap resample)."""
        xs, ys = [], []
        for d in domains:
            di = ids_of[d] if pick is None else ids_of[d][pick[d]]
            norm = H.normalise([sc[i]["model2"][2] - sc[i]["model1"][2] for i in di])
            for i, x in zip(di, norm):
                for lab in labels_of[i]:
                    xs.append(x)
                    ys.append(lab)
        return C.correlation(xs, ys)[0]

    domains = sorted(folds)
    if judge == "offline":
        fixed = _offline_rows(scores, heads, new_answer)
    else:
        fn = family[0]
        what = "trained P" if fn == "trained" else f"{fn} head (RAGBench dev)"
        fixed = {f"{what}, clause claims, Entailment share (WiCE-select answer_threshold {new_answer[fn]:.2f})":
                 scores("clause", heads[fn], new_answer[fn]),
                 f"{what}, clause claims, mean P(entailed)": scores("clause", heads[fn], None)}
    fixed |= {"token F1": H.lexical_scores(instances, C.token_prf), "ROUGE-L F": H.lexical_scores(instances, C.rouge_l)}
    base = H.baseline_scores(instances, baseline)
    if base is not None:
        fixed["RAGChecker, Llama3-70B (shipped scores; published overall 65.5 with global normalisation)"] = base
    # candidates of the protocol: unit x aggregation (share at t, or mean P) x head
    cands: dict[tuple, dict] = {}
    for unit in ("sentence", "clause"):
        for hn in family:
            h = heads[hn]
            cands[(unit, "mean P", hn)] = scores(unit, h, None)
            for t in GRID:
                cands[(unit, f"share@{t:.2f}", hn)] = scores(unit, h, t)
    chosen = {}
    sel_sc: dict[int, dict] = {}
    for d in domains:
        train = [o for o in domains if o != d]
        best = max(cands, key=lambda c: pooled(cands[c], train))
        chosen[d] = best
        for i in ids:
            if dom_of[i] == d:
                sel_sc[i] = cands[best][i]
    rows = {}
    for name, sc in fixed.items():
        rows[name] = {"pooled": pooled(sc, domains), "per": {d: pooled(sc, [d]) for d in domains},
                      "global": H.correlate(human, sc)["overall_label"][0]}
    rows["protocol (choice made on the other 4 domains)"] = {
        "pooled": pooled(sel_sc, domains), "per": {d: pooled(sel_sc, [d]) for d in domains}, "global": float("nan")}
    final = max(cands, key=lambda c: pooled(cands[c], domains))
    n_labels = len(human)
    groups = {d: ids_of[d] for d in domains}
    boot = {}
    if judge == "offline":
        ship_sc = fixed["shipped: clause claims, Entailment share (answer_threshold 0.30), what ragsweep logs"]
        mean_p = fixed["shipped head, clause claims, mean P(entailed)"]
        boot["clause mean P - shipped (clause share@0.30)"] = paired_boot(
            lambda pk: pooled(mean_p, domains, pk) - pooled(ship_sc, domains, pk), groups)
        pairs = [(f"{a_name} - {b_name}", a, fixed[b_name]) for a_name, a in (("shipped", ship_sc), ("protocol", sel_sc))
                 for b_name in ("token F1", "ROUGE-L F")]
    else:
        pairs = [(f"{judge} - {b_name}", sel_sc, fixed[b_name]) for b_name in ("token F1", "ROUGE-L F")]
        pairs += [(f"{judge} - offline protocol", sel_sc, versus["protocol_scores"])] if versus is not None else []
    for name, a, b in pairs:
        boot[name] = paired_boot(lambda pk, a=a, b=b: pooled(a, domains, pk) - pooled(b, domains, pk), groups)
    return {"rows": rows, "chosen": chosen, "final": final, "final_in_sample": pooled(cands[final], domains), "boot": boot,
            "domains": domains, "n_labels": n_labels, "n_pairs": len(instances),
            "annotators": H.annotator_agreement(human)["overall_label"][0], "judge": judge, "protocol_scores": sel_sc}


def _offline_rows(scores: Any, heads: dict[str, dict[str, Any]], new_answer: dict[str, float]) -> dict[str, Any]:
    """The offline judge's fixed rows: the shipped head as ragsweep logs it and its variants, the re-trained head."""
    ship = shipped_heads()
    return {
        "shipped: clause claims, Entailment share (answer_threshold 0.30), what ragsweep logs":
            scores("clause", ship["full"], SHIPPED_ANSWER_THRESHOLD),
        "shipped head, clause claims, mean P(entailed)": scores("clause", ship["full"], None),
        "shipped head, sentence claims, Entailment share (0.30)": scores("sentence", ship["full"], SHIPPED_ANSWER_THRESHOLD),
        "shipped head, sentence claims, mean P(entailed)": scores("sentence", ship["full"], None),
        "re-trained head (RAGBench dev), clause claims, Entailment share (WiCE-select answer_threshold "
        f"{new_answer['full']:.2f})": scores("clause", heads["full"], new_answer["full"]),
        "re-trained head (RAGBench dev), clause claims, mean P(entailed)": scores("clause", heads["full"], None),
    }
