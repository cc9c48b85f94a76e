"""Check, in a real browser, that a ragsweep sweep can be compared question by question in the
MLflow UI (traces with assessments, a metric filter, the evaluation table, the compare page).

    python experiments/ui_checks/mlflow_ui_check.py --make-sweep /tmp/ui        # a small 2-system sweep, then the check
    python experiments/ui_checks/mlflow_ui_check.py --tracking-uri sqlite:///mlruns/mlflow.db --experiment NAME

1. ``--make-sweep DIR``: runs ``ragsweep -m retriever=bm25,tfidf dataset.limit=3 evaluator=offline``
   into a store in DIR (traces sent synchronously). Otherwise the latest sweep of ``--experiment``.
2. Children without traces (logged before traces existed) get them from their ``records.json``;
   the sweep's compare page (first child vs each other) is written and logged to the parent.
3. ``mlflow server`` over the store on 127.0.0.1 (free port; stopped at the end), and headless
   Chromium through Playwright (``executable_path=/usr/bin/chromium``: no browser download):
   - ``traces.png``: the Traces view lists every question, with the assessments as columns, the
     system (the run's name) in the Tags column of each trace, and each trace's Duration the
     question's own time (its prompt and its own request), not the batch's;
   - ``traces_assessments.png``: the same list scrolled to the headline assessment columns
     (``f1 (RAGChecker)``, ``precision (RAGChecker)``, ``recall (RAGChecker)``: MLflow orders
     assessment columns by name, after Input and Output);
   - ``traces_filtered.png``: the view's Filters (Feedback <metric> != 0.0) narrow the list to the
     questions with a non-zero value, exactly;
   - ``eval_table.png``: the runs' Evaluation (artifact) view shows ``eval_table.json`` for both runs,
     every question id as text (``#6401197308716204890``, never a rounded number);
   - ``compare_page.png``: the compare page in the run's artifact viewer, claims coloured by label.
4. The screenshots are saved to ``--out`` and logged to the parent run under ``ui_check/``.

Exit status 0 when everything checks out, else 1 with ``mlflow-ui-check: FAILED: <reason>``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
SHOTS = ("traces.png", "traces_assessments.png", "traces_filtered.png", "eval_table.png", "compare_page.png")
EXPERIMENT = "ui_check"
SYSTEMS = ("bm25", "tfidf")
ZERO = "0.0"  # how MLflow stores a float feedback of 0 (the UI filter compares strings)


sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlflow_serve import CheckError, free_port, mlflow_server, resolve_store_uri  # noqa: E402,F401 - free_port: re-exported

# -- the sweep -------------------------------------------------------------------------------------
def run_sweep(root: Path, limit: int = 3, systems: tuple[str, ...] = SYSTEMS, experiment: str = EXPERIMENT,
              timeout: float = 1500) -> str:
    """A finished ``len(systems)``-system sweep (offline evaluator) in a store under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{root.resolve() / 'mlflow.db'}"
    env = dict(os.environ, RAGSWEEP_MLFLOW_TRACES="sync", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("MLFLOW_TRACKING_URI", None)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "ragsweep.pipeline.cli", "-q", "-m", f"retriever={','.join(systems)}", f"dataset.limit={limit}",
           "evaluator=offline", f"experiment_name={experiment}", f"mlflow.tracking_uri={uri}",
           f"mlflow.artifact_location={root.resolve() / 'art'}", f"cache_dir={root.resolve() / 'cache'}"]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise CheckError(f"the sweep failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}")
    return uri


@dataclass
class Prepared:
    experiment_id: str
    parent_id: str
    runs: list[tuple[str, str]]  # (run id, run name) of the children
    questions: list[str]  # the query texts, every child's
    filter_metric: str  # a metric some questions have at 0 and some not
    n_traces: int
    n_nonzero: int  # traces whose filter_metric is not 0
    compare_artifact: str  # compare/<page>.html of the parent
    ids: list[str] = field(default_factory=list)  # every question id, as text
    systems: dict[str, int] = field(default_factory=dict)  # run name -> its traces
    own_s: list[float] = field(default_factory=list)  # each trace's own duration (prompt + generation)
    notes: list[str] = field(default_factory=list)


def _filter_metric(records: list[dict[str, Any]]) -> tuple[str, int]:
    """A per-question metric, by its name on the traces, that is 0 for some questions and not for
    others (hallucination first)."""
    from ragsweep.tracking.trace_build import assessment_name, question_values

    per: dict[str, list[float]] = {}
    for r in records:
        for m, v in question_values(r):
            per.setdefault(assessment_name(m), []).append(v)
    for name in sorted(per, key=lambda k: ("hallucination" not in k, k)):
        vals = per[name]
        nonzero = sum(1 for v in vals if v != 0)
        if 0 < nonzero < len(vals):
            return name, nonzero
    raise CheckError("no per-question metric is 0 for some questions and not for others: nothing to filter on")


def prepare(uri: str, experiment: str) -> Prepared:
    """Read the sweep, give children without traces theirs, write the compare page(s)."""
    from ragsweep import tracking
    from ragsweep.analysis.report.compare_page import compare_pages_for_sweep
    from ragsweep.tracking.traces import log_eval_table, logged_query_ids, send_traces, _tracing_client

    cl = tracking.client(uri)
    runs = tracking.load_sweep_runs(cl, experiment, None)
    if len(runs.children) < 2:
        raise CheckError(f"sweep {runs.parent_id} has {len(runs.children)} finished child run(s); 2 needed")
    tracker = tracking.Tracker(uri, "unused", experiment)
    from ragsweep.tracking.trace_build import own_timings

    notes, all_recs, kids, systems = [], [], [], {}
    for r in runs.children:
        rid = r.info.run_id
        found, data = tracking.read_json_artifact(cl, rid, "records.json")
        if not found:
            raise CheckError(f"run {rid} has no records.json")
        recs = data["results"]
        all_recs += recs
        kids.append((rid, r.info.run_name or rid))
        systems[r.info.run_name or rid] = len(recs)
        tracker.run_id = rid
        if not logged_query_ids(_tracing_client(tracker), runs.experiment_id, rid):
            send_traces(tracker, recs, judge="offline", run_id=rid, system=r.info.run_name)
            notes.append(f"traces added to {r.info.run_name}")
        if "eval_table.json" not in {a.path for a in cl.list_artifacts(rid)}:
            os.environ["RAGSWEEP_MLFLOW_TRACES"] = "sync"
            log_eval_table(tracker, recs)
    metric, nonzero = _filter_metric(all_recs)
    with tempfile.TemporaryDirectory() as tmp:
        pages = compare_pages_for_sweep(cl, runs, tmp)
        if not pages:
            raise CheckError("no compare page could be made")
        name = pages[0][1].name
    own = [(lambda t: (t[1] - t[0]) / 1e9)(own_timings(r, 0)["question"]) for r in all_recs]
    return Prepared(runs.experiment_id, runs.parent_id, kids, [str(r.get("query", "")) for r in all_recs], metric,
                    len(all_recs), nonzero, f"compare/{name}", [str(r.get("query_id")) for r in all_recs], systems, own,
                    notes)


# -- the browser -----------------------------------------------------------------------------------
def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise CheckError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)


def _dismiss(page) -> None:
    """Close MLflow's first-visit popovers (they take the clicks)."""
    got = page.locator("[data-component-id='mlflow.detect_issues.guidance.got_it']")
    with contextlib.suppress(Exception):
        if got.count():
            got.first.click(timeout=3000)


_DURATION = re.compile(r"^(?:(\d+)h ?)?(?:(\d+)m(?!s) ?)?(?:(\d+(?:\.\d+)?)s)?$|^(\d+(?:\.\d+)?)ms$")


def parse_duration(text: str) -> float | None:
    """Seconds of a Duration cell (``850ms``, ``18.7s``, ``1m 5s``, ``4m``); None if not one."""
    m = _DURATION.match(text.strip())
    if not m or not any(m.groups()):
        return None
    if m.group(4):
        return float(m.group(4)) / 1000
    return 3600 * float(m.group(1) or 0) + 60 * float(m.group(2) or 0) + float(m.group(3) or 0)


def check_durations(shown: list[float], own: list[float]) -> None:
    """Each trace's Duration is a question's own time (not its batch's), to the view's rounding."""
    if len(shown) != len(own):
        raise CheckError(f"{len(shown)} durations in the Traces view for {len(own)} traces")
    for d, e in zip(sorted(shown), sorted(own)):
        if abs(d - e) > 0.06 + 0.02 * e + (30 if e >= 60 else 0):  # "4m" hides up to 30 s
            raise CheckError(f"trace durations {sorted(shown)} s are not the questions' own times {sorted(own)} s")


def traces_columns(page, prep: Prepared) -> tuple[list[float], dict[str, int]]:
    """The Duration of every listed trace, and per system how many traces show it in the Tags column."""
    texts = page.eval_on_selector_all("[role=row]", "els => els.map(e => e.innerText)")
    shown = [d for t in texts for d in (parse_duration(x) for x in t.split("\n")) if d is not None]
    # each tag pill of the Tags column is a button "Filter by tag <key>: <value>"
    tags = page.eval_on_selector_all("[aria-label^='Filter by tag system: ']", "els => els.map(e => e.getAttribute('aria-label'))")
    return shown, {name: tags.count(f"Filter by tag system: {name}") for name in prep.systems}


def browse(base: str, prep: Prepared, out_dir: Path, chromium: str = CHROMIUM, timeout: float = 120,
           log=print) -> list[Path]:
    """Open the four views in headless Chromium, check them, save one PNG each."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    shots = []
    eid = prep.experiment_id
    rows = "[data-component-id='web-shared.traces-table.row-select']"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(timeout * 1000)

            # 1. the Traces view: every question, the metrics as assessment columns
            page.goto(f"{base}/#/experiments/{eid}/traces")
            _wait(lambda: page.locator(rows).count() >= prep.n_traces, timeout, f"{prep.n_traces} trace rows")
            _dismiss(page)
            body = page.inner_text("body")
            missing = [q for q in prep.questions if q[:30] not in body]
            if missing:
                raise CheckError(f"the Traces view does not list: {missing[:2]}")
            if not page.get_by_label(f"Column options for {prep.filter_metric}").count():
                raise CheckError(f"the Traces view has no assessment column {prep.filter_metric}")
            close = page.locator("[data-component-id='mlflow.assistant.chat_panel.close']")
            if close.count():  # the first-visit assistant panel covers the right half of the list
                close.first.click()
            seen: list = [([], {})]
            with contextlib.suppress(CheckError):  # the list re-renders after the panel closes
                _wait(lambda: (seen.__setitem__(0, traces_columns(page, prep)) or seen[0][1] == prep.systems), 30, "")
            shown, tagged = seen[0]
            if tagged != prep.systems:
                raise CheckError(f"the Tags column shows the system on {tagged} traces, expected {prep.systems}")
            check_durations(shown, prep.own_s)
            shots.append(out_dir / "traces.png")
            page.screenshot(path=str(shots[-1]))
            log(f"traces: {page.locator(rows).count()} questions listed with assessment columns, a system column "
                f"and their own durations ({min(shown):.1f}-{max(shown):.1f} s)")
            headline = [m for m in ("f1 (RAGChecker)", "precision (RAGChecker)", "recall (RAGChecker)", prep.filter_metric)
                        if page.get_by_label(f"Column options for {m}").count()]
            if len(headline) < 2:
                raise CheckError(f"the Traces view lacks the headline assessment columns (has {headline})")
            page.get_by_label(f"Column options for {headline[0]}").first.scroll_into_view_if_needed()
            shots.append(out_dir / "traces_assessments.png")
            page.screenshot(path=str(shots[-1]))
            log(f"headline assessments: {', '.join(headline)}")

            # 2. a filter on the metric narrows them (the view's own Filters: Feedback != 0.0)
            page.get_by_label("Filters").click()
            page.get_by_label("Filter field").click()
            page.get_by_role("option", name="Feedback", exact=True).click()
            page.get_by_label("Filter key").click()
            page.get_by_role("option", name=prep.filter_metric, exact=True).click()
            page.get_by_label("Filter operator").click()
            page.get_by_role("option", name="!=", exact=True).click()
            page.locator("[data-component-id='web-shared.traces-table.filter.value']").fill(ZERO)
            page.locator("[data-component-id='web-shared.traces-table.filter.apply']").click()
            _wait(lambda: page.locator(rows).count() == prep.n_nonzero, timeout,
                  f"{prep.n_nonzero} rows with {prep.filter_metric} != 0 (showing {page.locator(rows).count()})")
            shots.append(out_dir / "traces_filtered.png")
            page.screenshot(path=str(shots[-1]))
            log(f"filter {prep.filter_metric} != 0: {prep.n_nonzero} of {prep.n_traces} questions")

            # 3. the evaluation table of both runs side by side
            # (MLflow shows children collapsed under their parent and compares only shown runs:
            # expand the parent on the runs table first)
            page.goto(f"{base}/#/experiments/{eid}/runs")
            expander = page.locator(f'.ag-row[row-id="{prep.parent_id}"] button[data-component-id*="runnamecellrenderer" i]')
            _wait(lambda: expander.count() > 0, timeout, "the expander of the sweep's parent run")
            expander.first.click()
            _wait(lambda: all(page.locator(f'.ag-row[row-id="{rid}"]').count() for rid, _ in prep.runs), timeout,
                  "the child runs under the parent")
            page.goto(f"{base}/#/experiments/{eid}/runs?compareRunsMode=ARTIFACT")
            _wait(lambda: "eval_table.json" in page.inner_text("body")
                  and all(name in page.inner_text("body") for _, name in prep.runs), timeout, "the evaluation table of both runs")
            _wait(lambda: prep.questions[0][:30] in page.inner_text("body"), timeout, "the questions in the evaluation table")
            from ragsweep.tracking.eval_table import table_id

            _wait(lambda: all(table_id(i) in page.inner_text("body") for i in prep.ids), timeout,
                  f"the question ids as text in the evaluation table ({[table_id(i) for i in prep.ids[:2]]}, never rounded)")
            shots.append(out_dir / "eval_table.png")
            page.screenshot(path=str(shots[-1]))
            log(f"evaluation table: eval_table.json of {', '.join(n for _, n in prep.runs)}, "
                f"{len(set(prep.ids))} question ids as text")

            # 4. the compare page in the artifact viewer, claims coloured
            page.goto(f"{base}/#/experiments/{eid}/runs/{prep.parent_id}/artifacts/{prep.compare_artifact}")
            frame = page.frame_locator("iframe").first
            claims = frame.locator("li.claim")
            _wait(lambda: claims.count() > 0, timeout, "claims in the compare page")
            colours = {claims.nth(i).evaluate("e => getComputedStyle(e).backgroundColor") for i in range(claims.count())}
            if len(colours) < 2:
                raise CheckError(f"compare page: claims are not coloured by label ({colours})")
            shots.append(out_dir / "compare_page.png")
            page.screenshot(path=str(shots[-1]), full_page=True)
            log(f"compare page: {claims.count()} claims in {len(colours)} colours")
        finally:
            browser.close()
    for s in shots:
        if s.stat().st_size < 10_000:
            raise CheckError(f"{s} looks blank ({s.stat().st_size} bytes)")
    return shots


def check(uri: str, experiment: str, out_dir: Path, chromium: str = CHROMIUM, port: int = 0, timeout: float = 120,
          log=print) -> list[Path]:
    """Prepare the sweep, serve it, check it in the browser, log the screenshots to the parent."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    prep = prepare(uri, experiment)
    for n in prep.notes:
        log(n)
    with mlflow_server(uri, port=port, timeout=240) as base:
        shots = browse(base, prep, out_dir, chromium, timeout, log)
    from ragsweep import tracking

    tracking.log_files(tracking.client(uri), prep.parent_id, shots, "ui_check")
    log(f"screenshots logged to run {prep.parent_id} under ui_check/: {', '.join(str(s) for s in shots)}")
    return shots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tracking-uri", help="the store of an existing sweep")
    ap.add_argument("--experiment", default=EXPERIMENT)
    ap.add_argument("--make-sweep", metavar="DIR", help="run a small 2-system sweep into DIR first")
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--out", default="reports/ui")
    ap.add_argument("--chromium", default=CHROMIUM)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        if args.make_sweep:
            uri = run_sweep(Path(args.make_sweep), args.limit, experiment=args.experiment)
        elif args.tracking_uri:
            uri = resolve_store_uri(args.tracking_uri)
        else:
            ap.error("give --make-sweep DIR or --tracking-uri URI")
        check(uri, args.experiment, Path(args.out), args.chromium, args.port)
    except CheckError as exc:
        print(f"mlflow-ui-check: FAILED: {exc}", file=sys.stderr)
        return 1
    print("mlflow-ui-check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
