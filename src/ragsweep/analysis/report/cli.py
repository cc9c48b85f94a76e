"""The ``ragsweep-report`` command: read a sweep through :mod:`ragsweep.tracking`, write the table,
directions and figures, log them to the parent run."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ragsweep import tracking
from ragsweep.analysis import stats
from ragsweep.analysis.report import expected, paired
from ragsweep.analysis.report.directions import Verdict, check_direction, decide, directions_markdown, parse_expect
from ragsweep.analysis.report.figures import make_figures
from ragsweep.analysis.report.frame import ReportError, declared_order, distinguishing, runs_frame, varying_params
from ragsweep.analysis.report.table import LAYOUTS, RAGBENCH_LEGEND, RAGCHECKER_LEGEND, build_table, infer_layout, markdown_table
from ragsweep.tracking import SHORT_PARAMS, SweepRuns, TrackingError
from ragsweep.analysis.labels import LabelError
from ragsweep.analysis.ppi import PPIError

PROG = "ragsweep-report"
ARTIFACT_DIR = "report"

log = logging.getLogger(__name__)


def load_sweep_spec(client, runs: SweepRuns) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(the ``sweep`` node, where it came from, the experiment config's ``hydra.sweeper.params``):
    the node from the parent's sweep.json, else conf/experiment/NAME.yaml, else empty."""
    from omegaconf import OmegaConf

    from ragsweep.conf import CONF_DIR

    conf = CONF_DIR / "experiment" / f"{runs.experiment}.yaml"
    node = OmegaConf.load(conf) if conf.exists() else OmegaConf.create({})
    sweeper = OmegaConf.select(node, "hydra.sweeper.params")
    sweeper = OmegaConf.to_container(sweeper, resolve=False) if sweeper is not None else {}
    found, spec = tracking.read_json_artifact(client, runs.parent_id, "sweep.json")
    if found:
        if not isinstance(spec, dict):
            raise ReportError(f"sweep.json of run {runs.parent_id} must hold a mapping, got {type(spec).__name__}")
        return spec, f"sweep.json of parent run {runs.parent_id}", sweeper
    if node.get("sweep") is not None:
        return OmegaConf.to_container(node.sweep, resolve=False), f"{conf.name} (the parent run has no sweep.json)", sweeper
    return {}, "inferred from the runs (no sweep.json, no experiment config)", sweeper


#: metrics compared with the baseline when the sweep names no direction
DEFAULT_COMPARE = paired.DEFAULT_METRICS


def judge_text(children: Sequence[Any]) -> str:
    """Which judge produced the numbers: the runs' judge card tags, else their evaluator param."""
    seen = []
    for r in children:
        tags = r.data.tags
        text = ""
        if tags.get("ragsweep.judge.id"):
            model = tags.get("ragsweep.judge.model")
            text = (f"`{tags['ragsweep.judge.id']}`" + (f" ({model})" if model else "")
                    + f" — {tags.get('ragsweep.judge.statement') or tags.get('ragsweep.judge.agreement', '')}")
        if not text:
            ev = r.data.params.get("evaluator")
            text = f"evaluator={ev}" if ev else "unknown (no judge card on the runs)"
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) if seen else "unknown"


def extra_lines(client: Any, runs: SweepRuns) -> list[str]:
    """Lines put beside the verdicts: the sweep's corpus figures and degeneracy warnings, then the
    systems whose prompts lost chunks to the context window; each block ends with a blank line."""
    from ragsweep.analysis import degenerate

    found, data = tracking.read_json_artifact(client, runs.parent_id, "degeneracy.json")
    blocks = [degenerate.report_lines(data) if found else [], context_window_lines(runs.children)]
    return [line for block in blocks if block for line in (*block, "")]


def context_window_lines(children: list[Any]) -> list[str]:
    """One line per system whose prompts could not hold all k chunks (``prompt/chunks_dropped``):
    at that point the generator saw fewer chunks than the swept value says, a confound to name."""
    out = []
    for r in sorted(children, key=lambda r: r.info.run_name or ""):
        m, p = r.data.metrics, r.data.params
        n_drop = m.get("prompt/chunks_dropped") or 0
        if n_drop <= 0:
            continue
        asked = int(m.get("ledger/attempted") or 0)
        k = p.get("top_k") or p.get("retriever.top_k")
        line = f"context window: {r.info.run_name} dropped {int(n_drop)} retrieved chunk(s) to fit the generator's context"
        if asked and k and str(k).isdigit():
            kept = int(k) - n_drop / asked
            line += f" (about {kept:.1f} of k={k} per question reached the prompt)"
        out.append(line + "; its RAGChecker retriever and generator metrics are over the chunks kept, retrieval/* over all k")
    if out:
        out.insert(0, "context window (prompt.fit=drop_lowest; raise generator.server.n_ctx, or read the size / k axis with this in mind):")
    return out


@dataclass
class Report:
    runs: SweepRuns
    layout: str
    params: list[str]
    table_md: str
    verdicts: list[Verdict]
    files: list[Path]
    out: Path
    spec_source: str
    df: Any = None
    spec: Any = None


def build_report(tracking_uri: str | None, experiment: str | None, run_id: str | None, out: str | None, log_to_parent: bool = True,
                 labels: str | None = None) -> Report:
    uri = tracking.resolve_tracking_uri(tracking_uri)
    client = tracking.client(uri)
    runs = tracking.load_sweep_runs(client, experiment, run_id)
    spec, source, sweeper = load_sweep_spec(client, runs)
    pp = runs.parent_params or {}
    try:
        logged = json.loads(pp.get("sweeper_params") or "{}")
    except json.JSONDecodeError:  # cut at MLflow's param length: the other sources still order
        logged = {}
    df = runs_frame(runs.children, declared_order(logged if isinstance(logged, dict) else {}, pp.get("overrides"), sweeper))
    from ragsweep.analysis.report import bounds


    df, bound_runs = bounds.split(df, spec)  # oracle / declared closed-book runs: floor and ceiling, never systems
    layout = str(spec.get("layout") or infer_layout(df))
    if layout not in LAYOUTS:
        raise ReportError(f"sweep.layout '{layout}' unknown; valid: {', '.join(LAYOUTS)}")
    params = [str(p) for p in (spec.get("params") or [])] or varying_params(df)
    unknown = [p for p in params if p not in SHORT_PARAMS]
    if unknown:
        raise ReportError(f"sweep.params: unknown param(s) {unknown}; valid: {', '.join(SHORT_PARAMS)}")
    directions = list(spec.get("directions") or [])
    for i, d in enumerate(directions):
        if not isinstance(d, dict) or not d.get("metric") or not d.get("param") or "expect" not in d:
            raise ReportError(f"sweep.directions[{i}]: needs metric, param and expect (from {source})")
        parse_expect(d["expect"])

    out_dir = Path(out) if out else Path("reports") / runs.experiment
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("fig_*.png"):
        stale.unlink()

    # systems the swept params cannot tell apart (a knob without a short name) are named by the
    # config keys that differ: in the table, the comparisons and the bounds, not in figures or directions
    shown = list(params) + distinguishing(df)
    disp, csv, _ = build_table(df, layout, shown)
    legend = RAGCHECKER_LEGEND if layout == "ragchecker" else RAGBENCH_LEGEND
    table_md = markdown_table(disp)
    ignored = []
    if runs.n_not_finished:
        ignored.append(f"{runs.n_not_finished} unfinished")
    if runs.n_duplicates:
        ignored.append(f"{runs.n_duplicates} superseded duplicate")
    skipped = f" ({' and '.join(ignored)} child run(s) ignored)" if ignored else ""
    header = (
        f"# {runs.experiment}: {'RAGChecker Table 3' if layout == 'ragchecker' else 'RAGBench Table 6'} layout\n\n"
        f"Parent run `{runs.parent_id}` ({runs.parent_name}), {len(runs.children)} finished systems{skipped}.\n\n"
        f"Each cell: mean ± half-width of its 95% {stats.METHOD} interval over questions (n = questions scored; "
        "failed and undefined questions are not scored, see each run's ledger.json).\n\n"
    )
    files = []
    p = out_dir / "table.md"
    p.write_text(header + legend + "\n\n" + table_md + "\n", encoding="utf-8")
    files.append(p)
    p = out_dir / "table.csv"
    csv.to_csv(p, index=False)
    files.append(p)

    records = {r.info.run_id: paired.records_of(client, r.info.run_id) for r in runs.children}
    from ragsweep.analysis.labels.cli import report_labels  # human labels (issue 25): PPI intervals decide where they exist

    files += report_labels(client, runs, records, out_dir, labels, spec.get("baseline"), log=log_to_parent)
    verdicts = [check_direction(df, d, records) for d in directions]
    compared = list(dict.fromkeys([str(d["metric"]) for d in directions] or list(DEFAULT_COMPARE)))
    baseline = paired.baseline_comparisons(df, compared, records, spec.get("baseline"), shown)
    paired.adjust([c for v in verdicts for c in v.comparisons] + baseline)  # one Holm family per report
    for v in verdicts:
        decide(v)
    judge = judge_text(runs.children)
    p = out_dir / "directions.md"
    lines = bounds.retrieval_only_note(runs.children) + extra_lines(client, runs)
    p.write_text(directions_markdown(verdicts, runs, source, judge, lines), encoding="utf-8")
    files.append(p)
    p = out_dir / "directions.json"
    p.write_text(json.dumps([v.as_dict() for v in verdicts], indent=1, default=str), encoding="utf-8")
    files.append(p)
    base_name = baseline[0].a if baseline else ""
    p = out_dir / "comparisons.md"
    p.write_text(f"# {runs.experiment}: every system against the baseline\n\nJudge: {judge}\n\n"
                 + paired.comparisons_markdown(baseline, f"B - A with A = baseline `{base_name}`",
                                               "The baseline is `sweep.baseline` (a run name or a label such as `k=5`) or the first system.")
                 + "\n" + paired.RULES + "\n", encoding="utf-8")
    files.append(p)

    files += make_figures(df, layout, params, directions, runs.experiment, out_dir, records)
    block = bounds.markdown(df, bound_runs, shown, [str(d["metric"]) for d in directions])
    if block:  # the floor and ceiling beside every system, in the table and on its own
        p = out_dir / "bounds.md"
        p.write_text(f"# {runs.experiment}: floor and ceiling\n\n{block}", encoding="utf-8")
        files.append(p)
        (out_dir / "table.md").write_text((out_dir / "table.md").read_text(encoding="utf-8") + "\n" + block, encoding="utf-8")
    from ragsweep.analysis.report.compare_page import compare_pages_for_sweep

    base_id = str(df.iloc[paired.baseline_index(df, spec.get("baseline"), shown)]["run_id"]) if not df.empty else None
    from ragsweep.tracking.identity import is_retrieval_only

    # retrieval-only runs have no response to score: their pages order questions by claim recall
    retro = bool(runs.children) and all(is_retrieval_only(r) for r in runs.children)
    pages = compare_pages_for_sweep(client, runs, out_dir / "compare", baseline=base_id, log=log_to_parent,
                                    **({"metric": "ragchecker/retriever/claim_recall"} if retro else {}))
    if pages:  # one question-by-question page per comparison with the baseline, linked from the table
        names = {r.info.run_id: paired.system_label(row, shown) for r in runs.children
                 for _, row in df[df["run_id"] == r.info.run_id].iterrows()}
        links = "\n".join(f"- [{names.get(rid, rid)} vs the baseline](compare/{p.name})" for rid, p in pages)
        table = out_dir / "table.md"
        table.write_text(table.read_text(encoding="utf-8") + "\nQuestion by question (claims coloured by label):\n\n"
                         + links + "\n", encoding="utf-8")

    # -- search (issue 16): successive-halving rungs, quality-vs-cost Pareto front, tie set --
    from ragsweep.analysis.report.pareto import search_report

    files += search_report(client, runs, spec, out_dir)

    if log_to_parent:
        tracking.log_files(client, runs.parent_id, files, ARTIFACT_DIR)
    return Report(runs, layout, params, table_md, verdicts, files, out_dir, source, df, spec)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description="Paper-style table, figures and direction checks of a ragsweep sweep, from MLflow.")
    ap.add_argument("--experiment", "-e", help="MLflow experiment (= the experiment config's name)")
    ap.add_argument("--run", help="parent run id (default: the experiment's latest parent run)")
    ap.add_argument("--out", help="output folder (default: reports/NAME/)")
    ap.add_argument("--tracking-uri", help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {tracking.DEFAULT_TRACKING_URI})")
    ap.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    ap.add_argument("--labels", help="human labels file (CSV/JSONL; see ragsweep-label) besides the HUMAN assessments in MLflow: "
                                     "PPI intervals and verdicts for the labelled metrics")
    ap.add_argument("--check", action="store_true",
                    help="compare the sweep with the expected results its experiment config states (sweep.expected); "
                         "exit 1 naming what moved")
    ap.add_argument("--write-expected", action="store_true",
                    help="print this sweep's results as a sweep.expected block for its experiment config")
    # --compare: one HTML page, question by question (ragsweep.analysis.report.compare_page)
    ap.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two runs question by question (HTML page)")
    ap.add_argument("--metric", help="with --compare: the metric questions are sorted by (default ragchecker/overall/f1)")
    ap.add_argument("--export", choices=("parquet", "csv"),
                    help="also write results.parquet|csv: one row per system x question, every metric, the systems' "
                         "parameters as columns, failures marked (the table ragsweep.results() returns)")
    args = ap.parse_args(argv)
    if not args.experiment and not args.run and not args.compare:
        ap.error("give --experiment NAME (or --run PARENT_RUN_ID)")
    return args


def export(rep: Report, fmt: str, tracking_uri: str | None) -> Path:
    """``results.<fmt>`` in the report's folder: :func:`ragsweep.analysis.results.results_frame` of the sweep."""
    from ragsweep.analysis.results import results_frame

    df = results_frame(tracking.client(tracking.resolve_tracking_uri(tracking_uri)), rep.runs.children)
    path = rep.out / f"results.{fmt}"
    if fmt == "parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    if args.compare:
        from ragsweep.analysis.report.compare_page import main_compare

        return main_compare(args)
    try:
        rep = build_report(args.tracking_uri, args.experiment, args.run, args.out, log_to_parent=not args.no_log,
                           labels=args.labels)
    except (ReportError, TrackingError, LabelError, PPIError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if args.export:
        rep.files.append(export(rep, args.export, args.tracking_uri))
    if args.write_expected:
        print(expected.block(rep.df, rep.params, rep.spec or {}))
        return 0
    if args.check:
        problems, lines = expected.check(rep.df, rep.params, expected.current_spec(rep.runs.experiment, rep.spec or {}))
        print("\n".join(lines))
        if problems is None:
            print(f"{PROG}: error: {rep.runs.experiment} states no expected results for this dataset.limit "
                  "(add them with --write-expected)", file=sys.stderr)
            return 2
        if problems:
            print(f"{PROG}: error: {len(problems)} result(s) moved outside the expected interval:", file=sys.stderr)
            for line in problems:
                print(f"  {line}", file=sys.stderr)
            return 1
        return 0
    r = rep.runs
    print(f"{r.experiment}: parent run {r.parent_id}, {len(r.children)} systems ({rep.layout} layout; swept: {', '.join(rep.params) or '-'})")
    print(rep.table_md)
    print()
    if rep.verdicts:
        print("Paper directions:")
        for v in rep.verdicts:
            print(f"  {v.line()}")
    else:
        print(f"No paper directions ({rep.spec_source}).")
    where = f"; logged to run {r.parent_id} under {ARTIFACT_DIR}/" if not args.no_log else ""
    print(f"\nWrote {rep.out}/ ({', '.join(f.name for f in rep.files)}){where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
