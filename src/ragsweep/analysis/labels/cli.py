"""``ragsweep-label``: choose the questions a person labels, then turn the labels into
prediction-powered estimates (issue 25).

    ragsweep-label sample   --experiment X [--run PARENT] (--n 50 | --width 0.2) [--seed 0]
    ragsweep-label import   --experiment X labels.csv        # a labels file -> HUMAN assessments
    ragsweep-label estimate --experiment X [--labels labels.csv] [--out DIR]

``sample`` marks the drawn questions' traces (tag ``ragsweep.label = sample``: in the MLflow UI's
Traces view, filter on that tag) and writes a labels template (CSV) to fill in instead of the UI.
It samples the sweep's systems only (never the oracle ceiling or a declared closed-book floor), asks
for the labels their metrics use (a retrieval-only sweep: ``retrieved``, one row per ground-truth
point, against the retrieved context; a full sweep: every answer label) and, with ``--width``, says
how many labels each system needs for it (issue 34).
``estimate`` reads the HUMAN feedback assessments on the traces plus ``--labels``, logs
``<metric>/ppi_mean|ppi_ci_low|ppi_ci_high|ppi_n_labels`` to each system's run and writes
``ppi.md`` / ``ppi.json`` (also logged to the parent run under ``labels/``).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from ragsweep.analysis import labels as L

PROG = "ragsweep-label"
log = logging.getLogger(__name__)
ARTIFACT_DIR = "labels"


def _runs(args: argparse.Namespace):
    from ragsweep import tracking

    uri = tracking.resolve_tracking_uri(args.tracking_uri)
    client = tracking.client(uri)
    runs = tracking.load_sweep_runs(client, args.experiment, args.run)
    return client, runs


def _records(client: Any, runs: Any) -> dict[str, list[dict[str, Any]] | None]:
    from ragsweep.analysis.report.paired import records_of

    return {r.info.run_id: records_of(client, r.info.run_id) for r in runs.children}


def common_questions(records: dict[str, list[dict[str, Any]] | None]) -> list[str]:
    """The questions every system answered (those a paired comparison can use)."""
    sets = [{str(r.get("query_id")) for r in recs} for recs in records.values() if recs]
    return sorted(set.intersection(*sets)) if sets else []


def plan(client: Any, runs: Any) -> tuple[list[Any], dict[str, Any], bool, list[str]]:
    """What ``sample`` asks for: (the systems - the sweep's runs less its bounds, the oracle ceiling
    and a declared closed-book floor, which are no system and no one labels -, the labels their
    metrics use, retrieval-only?, the bound runs' names). A retrieval-only sweep (generator=none)
    generated nothing, so it asks only whether the retrieved context holds each ground-truth point
    (``retrieved`` -> claim recall); a full sweep asks for every answer label."""
    from ragsweep.tracking.identity import is_retrieval_only
    from ragsweep.judge.metrics.human import RETRIEVAL_LABELS
    from ragsweep.analysis.report import bounds
    from ragsweep.analysis.report.frame import runs_frame

    systems_df, _ = bounds.split(runs_frame(runs.children), {"bounds": _declared_bounds(client, runs)})
    keep = set(systems_df["run_id"]) if not systems_df.empty else set()
    systems = [r for r in runs.children if r.info.run_id in keep]
    skipped = [r.info.run_name for r in runs.children if r.info.run_id not in keep]
    only = bool(systems) and all(is_retrieval_only(r) for r in systems)
    kinds = {k: h for k, h in L.label_kinds().items() if (k in RETRIEVAL_LABELS) == only}
    return systems, kinds, only, skipped


def _declared_bounds(client: Any, runs: Any) -> list[str]:
    """``sweep.bounds`` as the sweep logged it (the parent's sweep.json), else as its experiment config
    states it (what ``ragsweep-report`` reads too): which closed-book runs are the floor."""
    from omegaconf import OmegaConf

    from ragsweep import tracking
    from ragsweep.conf import CONF_DIR

    found, spec = tracking.read_json_artifact(client, runs.parent_id, "sweep.json")
    if not (found and isinstance(spec, dict)):
        conf = CONF_DIR / "experiment" / f"{runs.experiment}.yaml"
        spec = OmegaConf.to_container(OmegaConf.select(OmegaConf.load(conf), "sweep") or {}) if conf.exists() else {}
    return [str(b) for b in (spec.get("bounds") or [])] if isinstance(spec, dict) else []


def width_needs(records: dict[str, Any], systems: Sequence[Any], kinds: dict[str, Any], width: float) -> dict[str, int]:
    """Per system (run name): labels for a labels-only 95% interval of ``width`` (the PPI one is at most
    about as wide) from the largest spread of its judge values over the asked labels' metrics (0..1
    scale), floor 0.3 (a judge with no spread says little about the labels')."""
    import numpy as np

    from ragsweep.analysis.labels.estimate import _scale, judge_values

    out = {}
    for r in systems:
        sd = 0.3
        for h in kinds.values():
            v = np.asarray([x for x in judge_values(records.get(r.info.run_id), h.metric).values() if math.isfinite(x)])
            if v.size > 1:
                sd = max(sd, float(np.std(v / _scale(h.metric), ddof=1)))
        out[r.info.run_name] = L.n_for_width(min(sd, 0.5), width)
    return out


def _template(out: Path, systems: Sequence[Any], records: dict[str, Any], sample: Sequence[str], kinds: dict[str, Any],
              only: bool, evidence: dict[str, str] | None = None) -> int:
    """The labels template: one row per (system, question, label) to fill in; a retrieval-only sweep's
    has one row per ground-truth point (``claim``) with the retrieved context, and no response."""
    from ragsweep.records import as_record

    by_q = {rid: {str(r.get("query_id")): as_record(r) for r in (recs or [])} for rid, recs in records.items()}
    rows = 0
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        extra = ("claim", "retrieved_context") if only else ("response",)
        w.writerow([*L.FILE_COLUMNS, "question", "ground_truth", *extra, *(("evidence",) if evidence is not None else ())])
        for r in systems:
            for q in sample:
                rec = by_q.get(r.info.run_id, {}).get(q)
                question, gt = (rec.query, rec.gt_answer or "") if rec is not None else ("", "")
                for name in kinds:
                    if not only:
                        w.writerow([r.info.run_name, q, name, "", "", question, gt, rec.response if rec else ""])
                        rows += 1
                        continue
                    context = "\n---\n".join(c.text for c in rec.retrieved_context) if rec is not None else ""
                    points = [c.text for c in (rec.gt_answer_claims or [])] if rec is not None else []
                    for point in points or [""]:  # no extracted points: label the whole answer (0..1)
                        w.writerow([r.info.run_name, q, name, "", "", question, gt, point, context])
                        rows += 1
        if evidence is not None:  # a generated set: the questions themselves, once each
            first = {str(r.get("query_id")): as_record(r) for recs in records.values() for r in (recs or [])}
            for q in sample:
                rec = first.get(q)
                for name in L.QUESTION_LABELS:
                    w.writerow([L.QUESTION_SYSTEM, q, name, "", "", rec.query if rec else "", rec.gt_answer if rec else "",
                                *([""] * len(extra)), evidence.get(q, "")])
                    rows += 1
    return rows


def synthetic_evidence(systems: Sequence[Any]) -> dict[str, str] | None:
    """A sweep over a generated set (tag ``ragsweep.questions``): each question's evidence quotes from
    the set's file where it can be read ({} where not); None for people's questions."""
    tags = [r.data.tags for r in systems if r.data.tags.get("ragsweep.questions") == "synthetic"]
    if not tags:
        return None
    path = Path(tags[0].get("ragsweep.questions.file", ""))
    out: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                out[str(row.get("query_id"))] = " | ".join(f"{e.get('doc_id')}: {e.get('quote')}" for e in row.get("evidence") or []
                                                           if isinstance(e, dict)) or "(none: unanswerable)"
    return out


def cmd_sample(args: argparse.Namespace) -> int:
    from ragsweep.analysis import ppi
    from ragsweep.tracking import labels as TL

    client, runs = _runs(args)
    systems, kinds, only, skipped = plan(client, runs)
    if not systems:
        raise L.LabelError(f"the sweep (parent run {runs.parent_id}) has no system to label, only bounds: {', '.join(skipped)}")
    ids = {r.info.run_id for r in systems}
    records = {rid: recs for rid, recs in _records(client, runs).items() if rid in ids}
    qids = common_questions(records)
    if not qids:
        raise L.LabelError(f"the sweep's runs have no records.json with questions (parent run {runs.parent_id})")
    needs = width_needs(records, systems, kinds, args.width) if args.n is None else {}
    n = args.n if args.n is not None else max(needs.values())
    sample = L.draw_sample(qids, n, args.seed)
    marked = TL.mark_sample(client, runs.experiment_id, [r.info.run_id for r in systems], sample)
    TL.log_sample(client, runs.parent_id, {"seed": args.seed, "n": len(sample), "of": len(qids), "question_ids": sample,
                                            "requested": {"n": args.n, "width": args.width},
                                            "systems": [r.info.run_name for r in systems], "labels": list(kinds)})
    traces = TL.sample_trace_ids(client, runs.experiment_id, [r.info.run_id for r in systems], sample)
    queue = TL.review_queue(client, runs.experiment_id, f"ragsweep-sample-{runs.parent_id[:8]}", traces, kinds)
    out = Path(args.out or f"labels_{runs.experiment}.csv")
    evidence = synthetic_evidence(systems)
    rows = _template(out, systems, records, sample, kinds, only, evidence)
    print(f"{runs.experiment}: drew {len(sample)} of the {len(qids)} questions every system answered (seed {args.seed})"
          + (f", for a 95% interval of width about {args.width}" if args.n is None else ""))
    for name, need in needs.items():
        print(f"  {name}: {need} labels for a 95% interval of width {args.width} on the 0..1 scale")
    if skipped:
        print(f"not sampled (bounds, not systems: nothing to label): {', '.join(skipped)}")
    if only:
        print("retrieval-only sweep (nothing generated): one label, 'retrieved': does the retrieved context state this "
              "ground-truth point? (yes/no per point; the question's value is the share)")
    need = ppi.MIN_LABELS_BINARY if all(h.values == "yes/no" for h in kinds.values()) else ppi.MIN_LABELS
    if len(sample) < need:
        print(f"note: {len(sample)} labelled questions are fewer than the {need} a PPI interval needs (docs/statistics.md)")
    if evidence is not None:
        print("generated questions (synthetic set): also label each sampled question once, system 'questions': "
              + "; ".join(f"'{k}' (yes/no): {v}" for k, v in L.QUESTION_LABELS.items())
              + " - the report shows the valid share with its interval and each system's estimate over the valid questions")
    for r in systems:
        print(f"  {r.info.run_name}: {marked.get(r.info.run_id, 0)} trace(s) marked")
    if "queue" in queue:  # MLflow >= 3.14: the Review page lists the queue, each trace with the labels' questions
        print(f"Label them on the MLflow UI's Review page: queue {queue['queue']} ({queue['items']} traces, labels "
              f"{', '.join(queue['schemas'])}); or")
    names = [f"{k} ({h.values})" for k, h in kinds.items()] + ([f"{k} (yes/no)" for k in L.QUESTION_LABELS] if evidence is not None else [])
    print(f"Label them in the MLflow UI: Traces, Filters: Tag {L.SAMPLE_TAG} = {L.SAMPLE_TAG_VALUE}; open a trace, "
          "Assess > Add feedback > Human feedback, named one of: " + ", ".join(names))
    print(f"or fill in {out} ({rows} rows; value: yes/no or 0..1) and run: {PROG} estimate --experiment {runs.experiment} --labels {out}")
    return 0


def gather_labels(client: Any, runs: Any, labels_path: str | None = None) -> tuple[list[L.Label], list[str]]:
    """The HUMAN assessments on the sweep's traces plus the rows of ``labels_path`` (system = run id)."""
    from ragsweep.tracking import labels as TL

    names = {r.info.run_id: r.info.run_name for r in runs.children}
    got, notes = TL.human_labels(client, runs.experiment_id, list(names))
    if labels_path:
        filed, unknown = L.resolve_systems(L.read_file(labels_path), names)
        if unknown:
            raise L.LabelError(f"{labels_path}: field 'system' names no run of this sweep: {', '.join(unknown)}; "
                               f"use a run name ({', '.join(names.values())}) or run id")
        got += filed
    return got, notes


def report_labels(client: Any, runs: Any, records: dict[str, Any], out_dir: Path, labels_path: str | None = None,
                  baseline: str | None = None, log: bool = True) -> list[Path]:
    """``ragsweep-report``'s hook: with human labels on the sweep, attach them to ``records`` (so the
    paired comparisons and verdicts become prediction-powered, :mod:`ragsweep.analysis.labels.hook`), log the
    PPI metrics and write ``ppi.md``; without labels, nothing (returns [])."""
    from ragsweep.analysis.labels import estimate as E
    from ragsweep.tracking import labels as TL

    try:
        labels, notes = gather_labels(client, runs, labels_path)
    except L.LabelError:
        raise
    except Exception as exc:  # noqa: BLE001 - a store that cannot search traces: the report goes on without labels
        if labels_path:
            raise
        log.warning("human labels not read from MLflow (%s: %s); the report uses the judge alone", type(exc).__name__, exc)
        return []
    if not labels:
        return []
    sample = TL.read_sample(client, runs.parent_id)
    if sample:
        keep = {str(q) for q in sample.get("question_ids") or []}
        L.attach(records, [lab for lab in labels if lab.question_id in keep])
    else:
        L.attach(records, labels)
    res = estimate_sweep(client, runs, labels, records, baseline, log=log)
    res.notes += notes
    out = Path(out_dir) / "ppi.md"
    out.write_text(f"# {runs.experiment}: human labels\n\n" + E.markdown(res), encoding="utf-8")
    return [out]


def cmd_import(args: argparse.Namespace) -> int:
    from ragsweep.tracking import labels as TL

    client, runs = _runs(args)
    names = {r.info.run_id: r.info.run_name for r in runs.children}
    filed, unknown = L.resolve_systems(L.read_file(args.file), names)
    if unknown:
        raise L.LabelError(f"{args.file}: field 'system' names no run of this sweep: {', '.join(unknown)}")
    n = TL.log_human_assessments(client, runs.experiment_id, filed)
    print(f"{args.file}: {n} of {len(filed)} label(s) logged as HUMAN feedback on their traces"
          + (f" ({len(filed) - n} without a trace: give the file to `{PROG} estimate --labels` instead)" if n < len(filed) else ""))
    return 0


def estimate_sweep(client: Any, runs: Any, labels: Sequence[L.Label], records: dict[str, Any] | None = None,
                   baseline: str | None = None, log: bool = True):
    """The estimates for a sweep (see :mod:`ragsweep.analysis.labels.estimate`), logged to its runs."""
    from ragsweep.analysis.labels import estimate as E
    from ragsweep.tracking import labels as TL

    records = records if records is not None else _records(client, runs)
    order = [(r.info.run_id, r.info.run_name) for r in runs.children]
    if baseline:
        order.sort(key=lambda x: x[1] != baseline and x[0] != baseline)
    sample = TL.read_sample(client, runs.parent_id)
    res = E.estimate(order, records, labels, sample.get("question_ids") if sample else None)
    if log:
        for rid, m in res.metrics_by_run().items():
            TL.log_metrics(client, rid, m)
        text = E.in_domain_text(res)
        if text:
            for rid, _ in order:
                TL.set_tags(client, rid, {"ragsweep.judge.in_domain": text})
                TL.update_judge_card(client, rid, [ln.strip() for ln in text.split(";")])
    return res


def cmd_estimate(args: argparse.Namespace) -> int:
    from ragsweep.analysis.labels import estimate as E
    from ragsweep.tracking import log_files

    client, runs = _runs(args)
    labels, notes = gather_labels(client, runs, args.labels)
    res = estimate_sweep(client, runs, labels)
    res.notes += notes
    out = Path(args.out or Path("reports") / runs.experiment)
    out.mkdir(parents=True, exist_ok=True)
    md = out / "ppi.md"
    md.write_text(f"# {runs.experiment}: human labels\n\n" + E.markdown(res), encoding="utf-8")
    js = out / "ppi.json"
    js.write_text(json.dumps({"systems": [{**{k: v for k, v in r.__dict__.items() if k not in ("judge", "estimate")},
                                          "judge": r.judge.as_dict(), "ppi": r.estimate.as_dict() if r.estimate else None,
                                          "metrics": r.metrics()} for r in res.systems],
                              "pairs": [{"label": p.label, "metric": p.metric, "a": p.a, "b": p.b, "judge": p.judge.as_dict(),
                                         "ppi": p.ppi.as_dict() if p.ppi else None, "method": p.method} for p in res.pairs],
                              "agreement": [a.__dict__ for a in res.agreement], "notes": res.notes},
                             indent=1, default=str), encoding="utf-8")
    log_files(client, runs.parent_id, [md, js], ARTIFACT_DIR)
    print(E.markdown(res))
    print(f"Wrote {md} and {js}; logged <metric>/ppi_* to {len(res.metrics_by_run())} run(s)")
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--experiment", "-e", help="MLflow experiment of the sweep")
        p.add_argument("--run", help="parent run id (default: the experiment's latest sweep)")
        p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlruns/mlflow.db)")

    s = sub.add_parser("sample", help="draw and mark the questions to label")
    common(s)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--n", type=int, help="how many questions (the same for every system)")
    g.add_argument("--width", type=float, help="target total width of a 95%% interval on the 0..1 scale (e.g. 0.2)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", help="labels template CSV (default: labels_<experiment>.csv)")
    i = sub.add_parser("import", help="log a labels file as HUMAN feedback on the traces")
    common(i)
    i.add_argument("file")
    e = sub.add_parser("estimate", help="PPI++ estimates from the labels; log them")
    common(e)
    e.add_argument("--labels", help="a labels file (CSV/JSONL) besides the UI's HUMAN assessments")
    e.add_argument("--out", help="output folder (default: reports/<experiment>/)")
    args = ap.parse_args(argv)
    if not args.experiment and not args.run:
        ap.error("give --experiment NAME (or --run PARENT_RUN_ID)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from ragsweep.analysis.ppi import PPIError
    from ragsweep.tracking import TrackingError

    try:
        return {"sample": cmd_sample, "import": cmd_import, "estimate": cmd_estimate}[args.cmd](args)
    except (L.LabelError, PPIError, TrackingError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
