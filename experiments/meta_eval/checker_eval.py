"""The trained checker's out-of-sample evaluation under the frozen splits (``splits.json``).

Only the allowed parts choose anything (WiCE ``select`` claims, RAGBench ``dev`` halves: the
thresholds written into the weights file, the learning signal watched during training); the
reported parts are WiCE ``test`` claims and RAGBench ``test`` halves, scored once per budget:

- WiCE: a claim's score is the max over its oracle chunks of P(chunk supports claim); AUROC of
  supported vs the rest (as ``judge_agreement``'s WiCE suite).
- RAGBench adherence: a row's score is the min over its response sentences of P(documents support
  the sentence); AUROC of ``adherence_score`` per subset, mean of the 7 (as the "min" aggregation
  of ``judge_agreement``).

Baselines on the same items: token overlap (content-word recall of the claim / the whole response
in the reference, the protocol's baseline); the offline judge's figures on the same parts are read
from ``results/judge_agreement.json`` (shipped recipe, leave-one-subset-out heads). The paired
bootstrap (1,000 resamples within each subset) gives trained minus token overlap.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval.heads import best_threshold  # noqa: E402
from experiments.meta_eval.ja_core import fast_auroc, paired_boot  # noqa: E402

Scorer = Callable[[Sequence[tuple[str, str]]], np.ndarray]  # (claim, reference) pairs -> P


def load_suites(data: Path, splits: dict[str, Any], limit: int | None = None) -> dict[str, Any]:
    """WiCE chunks and RAGBench response sentences, each with its claim / row key and part."""
    from experiments.meta_eval import wice_lib as W

    out: dict[str, Any] = {}
    wdir = data / "wice"
    if (wdir / W.FILE).is_file():
        items, claims = W.load(wdir, limit)
        part = {k: "select" for k in splits["wice"]["select"]} | {k: "test" for k in splits["wice"]["test"]}
        keys = list(claims)
        out["wice"] = {"pairs": [(it["claim"], C.wice_reference(it)) for it in items], "claims": claims, "keys": keys,
                       "part": np.array([part[str(k)] for k in keys]),
                       "y": np.array([int(items[claims[k][0]]["label"] == "supported") for k in keys])}
    rb: dict[str, Any] = {}
    for s, parts in splits["ragbench"]["subsets"].items():
        rows = C.load_ragbench_subset(data / "ragbench" / s, limit)
        if not rows:
            continue
        part_of = {i: "dev" for i in parts["dev"]} | {i: "test" for i in parts["test"]}
        pairs, y, rix = C.ragbench_sentence_pairs(rows)
        rb[s] = {"pairs": pairs, "sent_y": np.asarray(y, int), "row": np.asarray(rix, int),
                 "part": np.array([part_of[str(r["id"])] for r in rows]),
                 "y": np.array([int(bool(r["adherence_score"])) for r in rows]),
                 "token": np.array([C.content_overlap(r["response"], C.ragbench_reference(r)) for r in rows])}
    if rb:
        out["ragbench"] = rb
    return out


def _rows_of(d: dict[str, Any], part: str, max_rows: int | None) -> np.ndarray:
    idx = np.flatnonzero(d["part"] == part)
    return idx[:max_rows] if max_rows else idx


def score(suites: dict[str, Any], scorer: Scorer, part_wice: str | None, part_rb: str | None,
          max_rows: int | None = None) -> dict[str, Any]:
    """P per WiCE claim of ``part_wice`` and per RAGBench sentence of rows of ``part_rb`` (the
    first ``max_rows`` rows of the part per subset: a quick signal during training)."""
    out: dict[str, Any] = {}
    if "wice" in suites and part_wice:
        w = suites["wice"]
        ks = [i for i, p in enumerate(w["part"]) if p == part_wice]
        chunk_idx = [j for i in ks for j in w["claims"][w["keys"][i]]]
        p = dict(zip(chunk_idx, scorer([w["pairs"][j] for j in chunk_idx])))
        out["wice"] = {"idx": np.array(ks), "p": np.array([max(p[j] for j in w["claims"][w["keys"][i]]) for i in ks])}
    if "ragbench" in suites and part_rb:
        out["ragbench"] = {}
        for s, d in suites["ragbench"].items():
            rows = _rows_of(d, part_rb, max_rows)
            sent = np.flatnonzero(np.isin(d["row"], rows))
            ps = scorer([d["pairs"][j] for j in sent]) if len(sent) else np.zeros(0)
            row_p = np.array([ps[d["row"][sent] == i].min() if np.any(d["row"][sent] == i) else 1.0 for i in rows])
            out["ragbench"][s] = {"rows": rows, "p": row_p, "sent": sent, "sent_p": ps}
    return out


def metrics(suites: dict[str, Any], sc: dict[str, Any], boot: bool = False) -> dict[str, Any]:
    """AUROCs of the scored parts, token overlap beside, and (``boot``) trained - token overlap."""
    m: dict[str, Any] = {}
    if "wice" in sc:
        w, s = suites["wice"], sc["wice"]
        y = w["y"][s["idx"]]
        tok_chunk = np.array([C.content_overlap(c, r) for c, r in w["pairs"]])
        tok = np.array([tok_chunk[w["claims"][w["keys"][i]]].max() for i in s["idx"]])
        m["wice"] = {"auroc": C.auroc(y, s["p"]), "token": C.auroc(y, tok), "n": len(y)}
        if boot:
            m["wice"]["boot"] = paired_boot(lambda pk: fast_auroc(y[pk["all"]], s["p"][pk["all"]])
                                            - fast_auroc(y[pk["all"]], tok[pk["all"]]), {"all": y})
    if "ragbench" in sc:
        per, arr = defaultdict(dict), {}
        for name, s in sc["ragbench"].items():
            d = suites["ragbench"][name]
            y, tok = d["y"][s["rows"]], d["token"][s["rows"]]
            per["auroc"][name], per["token"][name], per["n"][name] = C.auroc(y, s["p"]), C.auroc(y, tok), len(y)
            arr[name] = (y, s["p"], tok)
        m["ragbench"] = {"auroc": float(np.nanmean(list(per["auroc"].values()))),
                         "token": float(np.nanmean(list(per["token"].values()))), "per": dict(per),
                         "n": int(sum(per["n"].values()))}
        if boot:
            def diff(pk: dict[str, np.ndarray]) -> float:
                return float(np.mean([fast_auroc(arr[k][0][pk[k]], arr[k][1][pk[k]])
                                      - fast_auroc(arr[k][0][pk[k]], arr[k][2][pk[k]]) for k in arr]))

            m["ragbench"]["boot"] = paired_boot(diff, {k: v[0] for k, v in arr.items()})
    return m


def thresholds(suites: dict[str, Any], sc: dict[str, Any]) -> dict[str, float]:
    """Entailment thresholds from allowed parts only: ``context`` on RAGBench ``dev`` sentence
    labels (mean per-subset balanced accuracy), ``answer`` on WiCE ``select`` claims."""
    out = {}
    if "ragbench" in sc:
        ys, ps, gs = [], [], []
        for name, s in sc["ragbench"].items():
            ys.append(suites["ragbench"][name]["sent_y"][s["sent"]])
            ps.append(s["sent_p"])
            gs += [name] * len(s["sent"])
        out["context_threshold"] = best_threshold(np.concatenate(ys), np.concatenate(ps), np.asarray(gs))
    if "wice" in sc:
        out["answer_threshold"] = best_threshold(suites["wice"]["y"][sc["wice"]["idx"]], sc["wice"]["p"])
    return out


def offline_reference() -> dict[str, Any]:
    """The offline judge's out-of-sample figures on the same reported parts (judge_agreement.json)."""
    import json

    path = Path(__file__).resolve().parent / "results" / "judge_agreement.json"
    try:
        suites = json.loads(path.read_text())["judges"]["offline"]["suites"]
    except (OSError, ValueError, KeyError):
        return {}
    return {s["suite"]: s["value"] for s in suites}
