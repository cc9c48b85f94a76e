"""Out-of-sample agreement of the offline judge with human / GPT-4 labels, on the frozen splits.

    python -m experiments.meta_eval.judge_agreement --data ../shared/data

Reads ``splits.json`` (frozen before any tuning by ``make_splits.py``; its sha256 is checked) and
writes ``results/out_of_sample.md`` (every table) and ``results/judge_agreement.json`` (the
judge card's source, schema: the judge card brief). Every design choice is made inside the
training part of its split and the held-out part is scored once:

- RAGChecker human preferences: leave-one-domain-out. For each held-out domain the claim unit
  (sentences with a content word, or clauses = the claims of the default evaluator's configured
  offline extractor, given the question), the aggregation (Entailment share at a threshold from a 0.05 grid, or mean
  P(entailed)) and the head (full / lexical features) are chosen by overall Pearson on the other 4
  domains. Score differences are min-max normalised within each domain (each domain may be scored
  by a different choice), then all 280 labels are pooled for Pearson x100.
- RAGBench adherence: a subset's ``test`` half is scored by a head fitted on the other 6 subsets'
  ``dev`` halves; the features (full / lexical) and the example aggregation (min / mean sentence
  P) are chosen by an inner leave-one-subset-out on those 6 ``dev`` halves. AUROC, mean of subsets.
- WiCE: the head (RAGBench-fitted full / lexical, or fitted on WiCE ``select``) is chosen by AUROC
  on ``select`` (the WiCE head by 5-fold CV inside ``select``); reported on ``test``.
- TRACe relevance (RAGBench ``test`` halves): RAGBench ships no answers, so the product's own
  relevance (context sentences covering the ground-truth answer) cannot be scored; the proxy of the
  ragbench suite (MiniLM question cosine >= tau, optionally united with the cover-utilized
  sentences) has tau and the union chosen on the other subsets' ``dev`` halves. RMSE against the
  shipped GPT-4 ``relevance_score``; the constant predictor is the mean ``relevance_score`` of the
  other subsets' ``dev`` halves.

The shipped head (``src/ragsweep/evaluator/offline_model.json``) was trained on all RAGBench
validation rows, so on RAGBench it is replaced by heads of the same recipe fitted
leave-one-subset-out on ``dev`` halves ("shipped recipe"). With ``--out-model FILE`` the re-trained
heads (fitted on all ``dev`` halves, ``answer_threshold`` chosen on WiCE ``select``) are written too,
never into ``src/``.

With ``--trained FILE`` (a weights file of ``train_checker.py``) the same run also measures, under the
same protocol on the same items, the judges ``trained`` (the cross-encoder's P alone, used directly:
RAGBench aggregation chosen by the inner leave-one-subset-out, WiCE max over oracle chunks,
RAGChecker unit x aggregation chosen on the other 4 domains) and ``stacked`` (a logistic head over the
full features plus logit(P), fitted where and how the full head is). A judge is a family of named
feature sets (``ja_core.JUDGES``: offline = full / lexical, trained, stacked) among which the protocol
chooses; P is a column ``trained`` of the features, computed once per pair and cached under
``--cache`` (key: sha256 of the weights file and the pairs). Each gets a section in the Markdown, an
entry in ``judges`` of the JSON, and paired bootstrap intervals of judge - token overlap (RAGChecker:
- token F1, - ROUGE-L F) and judge - offline protocol. Without it the output is what it was.
``--trained-device cuda`` scores the pairs on a GPU (on CPU the first run is the slow part).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import common as C  # noqa: E402
from experiments.meta_eval.ja_core import (  # noqa: E402,F401 - re-exported: the names of before the split
    B_BOOT, CAP, FEATS, GRID, JUDGES, OFFLINE, SHIPPED_ANSWER_THRESHOLD, TARGETS, TAUS, Feats, default_extractor_claims,
    fast_auroc, features, fit_head, paired_boot, shipped_heads,
)
from experiments.meta_eval.ja_ragbench import (  # noqa: E402,F401
    example_scores, fit_on, load_ragbench, ragbench_adherence, rb_auroc, trace_relevance,
)
from experiments.meta_eval.ja_render import BASELINE_NAMES, agreement_json, render, verdict_text  # noqa: E402,F401
from experiments.meta_eval.ja_suites import rc_suite, wice_suite  # noqa: E402,F401
from experiments.meta_eval.splits import SPLITS_PATH, load_splits  # noqa: E402

NAME = "judge_agreement"
JSON_PATH = C.RESULTS_DIR / "judge_agreement.json"
MD_PATH = C.RESULTS_DIR / "out_of_sample.md"
MODEL_PATH = C.RESULTS_DIR / "offline_model.json"


def run(args: argparse.Namespace) -> int:
    from ragsweep.judge.offline import OfflineChecker
    from ragsweep.judge.ragas import Embedder

    splits = load_splits(args.splits)
    C.set_threads(args.threads)
    cache = C.open_cache(args.cache)
    fdir = Path(args.cache) / "judge_agreement_features" if args.cache else None
    checker = OfflineChecker(threshold=0.5, model=args.model)
    trained = trained_scorer(args.trained, args.trained_device, args.trained_precision) if args.trained else None
    extra = [j for j in JUDGES if j != "offline"] if trained is not None else []
    try:
        rb_folder = C.find_data(args.data, "ragbench", "*/validation.*")
    except C.Skip as exc:
        print(f"[{NAME}] skipped: {exc}")
        return 0
    rb = load_ragbench(rb_folder, splits, checker, cache, fdir, args.limit, trained)
    print(f"[{NAME}] RAGBench features ready", flush=True)
    rba = ragbench_adherence(rb)
    more: dict[str, dict[str, Any]] = {j: {} for j in extra}  # suite -> result, per judge beside the offline one
    for j in extra:
        more[j]["rba"] = ragbench_adherence(rb, JUDGES[j], j, rba)
    print(f"[{NAME}] RAGBench adherence done", flush=True)
    subsets = list(rb)
    heads = {f: fit_on(rb, subsets, f) for f in OFFLINE}  # the re-trained heads: all dev halves
    jheads = {f: fit_on(rb, subsets, f) for j in extra for f in JUDGES[j]}
    w = rc = tr = None
    new_answer = {f: h["threshold"] for f, h in (heads | jheads).items()}
    try:
        wfolder = C.find_data(args.data, "wice", "oracle_chunks_claim_dev.jsonl")
        w = wice_suite(wfolder, splits, checker, cache, fdir, heads, trained)
        for j in extra:
            more[j]["w"] = wice_suite(wfolder, splits, checker, cache, fdir, jheads, trained, JUDGES[j], j, w)
            new_answer |= more[j]["w"]["answer_threshold"]
        new_answer |= w["answer_threshold"]
        print(f"[{NAME}] WiCE done", flush=True)
    except C.Skip as exc:
        print(f"[{NAME}] WiCE skipped: {exc}")
    try:
        rfolder = C.find_data(args.data, "ragchecker", "meta_eval_human_labeled_dev.json")
        rc = rc_suite(rfolder, splits, checker, cache, fdir, heads, new_answer, trained)
        for j in extra:
            more[j]["rc"] = rc_suite(rfolder, splits, checker, cache, fdir, jheads, new_answer, trained, JUDGES[j], j, rc)
        print(f"[{NAME}] RAGChecker done", flush=True)
    except C.Skip as exc:
        print(f"[{NAME}] RAGChecker skipped: {exc}")
    emb = Embedder(cache=cache)
    if not args.no_trace:
        tr = trace_relevance(rb, cache, emb)
        print(f"[{NAME}] TRACe relevance done", flush=True)
    # each distinct sentence is encoded once, ever: the vectors are kept in --cache keyed by (model, text)
    print(f"[{NAME}] sentence embeddings this run: {checker.stats['texts_encoded'] + emb.stats['encoded']} encoded, "
          f"{checker.stats['texts_cached'] + emb.stats['cached']} read from --cache {args.cache or '(off)'}", flush=True)
    weights = None if trained is None else (Path(args.trained).name, f"weights sha256 "
                                            f"{trained.cache_id['weights_sha256']}, {trained.precision}")
    md = render(rc, w, rba, tr, splits["sha256"], more, trained=weights)
    agreement = agreement_json(rc, w, rba, tr, splits, more)
    if args.ppi_draws:
        from experiments.meta_eval.ja_ppi import ppi_section

        ppi, ppi_md = ppi_section(rb, {"offline": rba, **{j: more[j]["rba"] for j in extra}}, args.ppi_draws)
        md += "\n\n" + ppi_md
        agreement["ppi_width_ratio"] = ppi
        print(f"[{NAME}] PPI width ratios done", flush=True)
    out_md, out_json = Path(args.out_md), Path(args.out_json)
    out_md.parent.mkdir(parents=True, exist_ok=True)
    out_md.write_text(md + "\n")
    out_json.write_text(json.dumps(agreement, indent=1) + "\n")
    if args.out_model:
        write_model(Path(args.out_model), heads, new_answer, rb, subsets, splits, checker)
    print(md)
    print(f"[{NAME}] wrote {out_md}, {out_json}" + (f", {args.out_model}" if args.out_model else ""))
    return 0


def trained_scorer(path: str, device: str = "cpu", precision: str = "auto") -> Any:
    """The trained cross-encoder of weights file ``path`` (``--trained``; its cached P is keyed by the
    checker's ``cache_id``: weights sha256, windows, lengths, precision); a clear error when the file
    is missing or is no weights file."""
    from ragsweep.judge.trained import TrainedChecker

    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"[{NAME}] --trained {path}: no such file; give a weights file written by "
                         "`python -m experiments.meta_eval.train_checker`")
    scorer = TrainedChecker(weights=str(p), device=device, precision=precision)
    try:
        scorer.meta  # noqa: B018 - raises a clear error when the file is no safetensors file
    except Exception as exc:  # noqa: BLE001 - reported with the option's name
        raise SystemExit(f"[{NAME}] --trained {path}: {exc}") from None
    print(f"[{NAME}] trained checker {p} on {device} in {scorer.precision}", flush=True)
    return scorer


def write_model(path: Path, heads: dict, new_answer: dict, rb: dict, subsets: list, splits: dict, checker: Any) -> None:
    """The re-trained heads in the format of ``src/ragsweep/evaluator/offline_model.json``."""
    for f, h in heads.items():
        h["answer_threshold"] = new_answer[f]
    model = {"about": "ragsweep offline checker head re-trained under the frozen splits: standardised logistic regression "
                      "over ragsweep.judge.offline.FEATURES, fitted on the dev halves of RAGBench validation "
                      "(experiments/meta_eval/splits.json); answer_threshold chosen on WiCE select claims.",
             "trained_on": {"ragbench_sentences": int(sum(int((rb[s]['sent_part'] == 'dev').sum()) for s in subsets)),
                            "part": "dev halves", "subsets": subsets, "splits_sha256": splits["sha256"]},
             "answer_threshold_from": "WiCE select claims (splits.json): middle of the balanced-accuracy plateau",
             "feature_config": {"model": checker.config.model, "window": checker.config.window,
                                "top_k_sentences": checker.config.top_k_sentences},
             "models": heads}
    path.write_text(json.dumps(model, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m experiments.meta_eval.{NAME}", description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--splits", default=str(SPLITS_PATH))
    p.add_argument("--cache", default=C.DEFAULT_CACHE)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--model", default="minilm", help="offline checker features: minilm (default) or none")
    p.add_argument("--limit", type=int, default=None, help="first N rows per RAGBench subset (smoke runs only)")
    p.add_argument("--no-trace", action="store_true", help="skip the TRACe relevance suite")
    p.add_argument("--ppi-draws", type=int, default=1000,
                   help="random labelled sets per PPI width-ratio cell (0: skip the PPI section)")
    p.add_argument("--trained", default=None, metavar="FILE",
                   help="also evaluate the trained cross-encoder of this weights file (train_checker.py) alone and "
                        "stacked with the offline features, under the same protocol on the same items")
    p.add_argument("--trained-device", default="cpu", help="device of the trained checker: cpu (default), cuda, ...")
    p.add_argument("--trained-precision", default="auto", choices=("auto", "fp32", "bf16"),
                   help="arithmetic of the trained checker (auto: bf16 where the hardware computes it natively)")
    p.add_argument("--out-md", default=str(MD_PATH))
    p.add_argument("--out-json", default=str(JSON_PATH))
    p.add_argument("--out-model", default=None,
                   help=f"also write the re-trained heads (e.g. {MODEL_PATH}); never into src/")
    args = p.parse_args(argv)
    if not Path(args.data).exists():
        print(f"[{NAME}] skipped: --data {args.data} does not exist")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
