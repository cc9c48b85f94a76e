"""The ``ragsweep-report`` command: read a sweep through :mod:`ragsweep.tracking`, write the table,
directions and figures, log them to the parent run."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from ragsweep import tracking
from ragsweep.report.directions import Verdict, check_direction, directions_markdown, parse_expect
from ragsweep.report.figures import make_figures
from ragsweep.report.frame import ReportError, declared_order, runs_frame, varying_params
from ragsweep.report.table import LAYOUTS, RAGBENCH_LEGEND, RAGCHECKER_LEGEND, build_table, infer_layout, markdown_table
from ragsweep.tracking import SHORT_PARAMS, SweepRuns, TrackingError

PROG = "ragsweep-report"
ARTIFACT_DIR = "report"

log = logging.getLogger(__name__)


def load_sweep_spec(client, runs: SweepRuns) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(the ``sweep`` node, where it came from, the experiment config's ``hydra.sweeper.params``):
    the node from the parent's sweep.json, else conf/experiment/NAME.yaml, else empty."""
    from omegaconf import OmegaConf

    from ragsweep.config import CONF_DIR

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


def build_report(tracking_uri: str | None, experiment: str | None, run_id: str | None, out: str | None, log_to_parent: bool = True) -> Report:
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

    disp, csv, _ = build_table(df, layout, params)
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
    )
    files = []
    p = out_dir / "table.md"
    p.write_text(header + legend + "\n\n" + table_md + "\n", encoding="utf-8")
    files.append(p)
    p = out_dir / "table.csv"
    csv.to_csv(p, index=False)
    files.append(p)

    verdicts = [check_direction(df, d) for d in directions]
    p = out_dir / "directions.md"
    p.write_text(directions_markdown(verdicts, runs, source), encoding="utf-8")
    files.append(p)
    p = out_dir / "directions.json"
    p.write_text(json.dumps([asdict(v) for v in verdicts], indent=1, default=str), encoding="utf-8")
    files.append(p)

    files += make_figures(df, layout, params, directions, runs.experiment, out_dir)

    # -- search (issue 16): successive-halving rungs, quality-vs-cost Pareto front, tie set --
    from ragsweep.report.pareto import search_report

    files += search_report(client, runs, spec, out_dir)

    if log_to_parent:
        tracking.log_files(client, runs.parent_id, files, ARTIFACT_DIR)
    return Report(runs, layout, params, table_md, verdicts, files, out_dir, source)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=PROG, description="Paper-style table, figures and direction checks of a ragsweep sweep, from MLflow.")
    ap.add_argument("--experiment", "-e", help="MLflow experiment (= the experiment config's name)")
    ap.add_argument("--run", help="parent run id (default: the experiment's latest parent run)")
    ap.add_argument("--out", help="output folder (default: reports/NAME/)")
    ap.add_argument("--tracking-uri", help=f"MLflow tracking URI (default: $MLFLOW_TRACKING_URI or {tracking.DEFAULT_TRACKING_URI})")
    ap.add_argument("--no-log", action="store_true", help="do not log the report to the parent run")
    args = ap.parse_args(argv)
    if not args.experiment and not args.run:
        ap.error("give --experiment NAME (or --run PARENT_RUN_ID)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        rep = build_report(args.tracking_uri, args.experiment, args.run, args.out, log_to_parent=not args.no_log)
    except (ReportError, TrackingError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
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
