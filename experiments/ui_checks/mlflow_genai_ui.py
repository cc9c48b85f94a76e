"""Check, in a real browser, ragsweep inside MLflow's GenAI pages (issues 38 and 51), and keep
screenshots of them:

    python experiments/ui_checks/mlflow_genai_ui.py --make DIR [--generator "generator=external ..."] [--out experiments/results/mlflow_ui]

1. ``--make DIR``: in DIR, ``ragsweep.sweep("retriever=bm25,tfidf retriever.top_k=2 dataset.limit=4
   experiment_name=genai_ui ...")`` with ``--generator``'s overrides (default ``generator=none``:
   retrieval only, no model server; the test points ``generator=external`` at a fake
   OpenAI-compatible server), ``ragsweep-label sample --n 2`` (a review queue of the sampled
   traces), then ``mlflow.genai.evaluate`` over the bm25 system's traces with ragsweep's scorers
   (``ragsweep.mlflow_scorers``: claim recall, context precision; offline judge), its run tagged
   with its trace count (``ragsweep.tracking.genai.tag_trace_count``). Without ``--make``:
   ``--tracking-uri`` and ``--experiment`` of a store made so before.
2. ``mlflow server`` over the store on 127.0.0.1 (a free port, stopped at the end) and headless
   Chromium through Playwright (``/usr/bin/chromium``), one session, each page checked:
   - ``datasets.png``: the Datasets page lists the sweep's question set (``clapnq-4q-<fingerprint>``),
     and every system's run page shows it with one and the same digest;
   - ``evaluation_runs.png``: the Evaluation runs page: each system's run with that set in its
     Dataset column and the headline metrics with their interval and n as the first metric columns;
   - ``runs_view.png``: the runs table opened at the sweep's saved view (linked from the parent
     run's description): the headline metrics and their 95% intervals are its columns;
   - ``trace.png``: one question's trace: its expectations and its assessments, every name unique
     (``faithfulness (RAGChecker)``, ``faithfulness (RAGAS)``), values rounded to their scale,
     RAGChecker's on 0-100 as the run's metric;
   - ``evaluation_run_overview.png``: the evaluation run's overview says how many traces it scanned;
   - ``review_form.png``: the review queue's form shows, beside the question and the answer, the
     system, the ground truth and the retrieved chunks; the queue's list names each trace's system.

Exit status 0 when every page shows what it should, else 1 with ``mlflow-genai-ui: FAILED: <reason>``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

CHROMIUM = "/usr/bin/chromium"
EXPERIMENT = "genai_ui"
SHOTS = ("datasets.png", "evaluation_runs.png", "runs_view.png", "trace.png", "evaluation_run_overview.png",
         "review_form.png")
SCORED = ("ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision")
HEADLINE = "ragchecker/retriever/claim_recall"  # the first headline metric a retrieval-only run defines
#: a value shown with more digits than any metric's scale carries (0.30000000000000004, 66.66666666666667)
LONG_NUMBER = re.compile(r"\b\d+\.\d{5,}\b")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mlflow_serve import CheckError, mlflow_server  # noqa: E402


@dataclass
class Store:
    uri: str
    experiment: str
    experiment_id: str
    dataset: str  # the question set's MLflow name
    question: str  # the query of the trace the screenshot opens
    system: str  # its system (the run name, a tag of the trace)
    eval_run: str  # the run mlflow.genai.evaluate made
    eval_run_name: str = ""
    eval_traces: int = 0  # the traces that run scored
    systems: dict[str, str] = field(default_factory=dict)  # run id -> run name of the sweep's systems
    view: str = ""  # the sweep's runs-table view (#/experiments/...?viewStateShareKey=...)
    headline: list[str] = field(default_factory=list)  # the sweep's headline metrics (summary.metrics)
    review: dict[str, list[str]] = field(default_factory=dict)  # ground truth of a sampled question -> its systems
    answers: bool = False  # the sweep generated answers (not retrieval only)


def make_store(root: Path, limit: int = 4, generator: Sequence[str] = ("generator=none",)) -> Store:
    """A 2-system sweep in ``root`` (``generator``: its generator overrides), a label sample with its
    review queue, and one ``mlflow.genai.evaluate`` of ragsweep's scorers."""
    import mlflow

    import ragsweep
    from ragsweep.analysis.labels.cli import main as label_main

    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAGSWEEP_CACHE_DIR", str(root / "cache"))
    os.environ["RAGSWEEP_MLFLOW_TRACES"] = "sync"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    sweep = ragsweep.sweep(f"retriever=bm25,tfidf retriever.top_k=2 {' '.join(generator)} dataset.limit={limit} "
                           f"experiment_name={EXPERIMENT}", cwd=root, echo=False)
    if label_main(["sample", "--experiment", EXPERIMENT, "--n", "2", "--tracking-uri", sweep.tracking_uri,
                   "--out", str(root / "labels.csv")]) != 0:
        raise CheckError("ragsweep-label sample failed")
    runs = sweep.runs()
    bm25 = runs[runs["retriever"] == "bm25"]["run_id"].iloc[0]
    data = ragsweep.mlflow_traces(EXPERIMENT, run=bm25, tracking_uri=sweep.tracking_uri)
    mlflow.set_tracking_uri(sweep.tracking_uri)
    mlflow.set_experiment(EXPERIMENT)
    res = mlflow.genai.evaluate(data=data, scorers=ragsweep.mlflow_scorers(list(SCORED), cache_dir=root / "cache"))
    try:
        from ragsweep.tracking.genai import tag_trace_count
    except ImportError:  # a ragsweep from before issue 51 (to see the pages fail on it)
        tag_trace_count = None
    if tag_trace_count is not None:
        tag_trace_count(res.run_id, sweep.tracking_uri)
    return store_of(sweep.tracking_uri, EXPERIMENT, res.run_id)


def store_of(uri: str, experiment: str, eval_run: str | None = None) -> Store:
    import mlflow
    from mlflow.genai import datasets

    from ragsweep.tracking import read_json_artifact
    from ragsweep.tracking.labels import run_traces

    VIEW_TAG, VIEW_PARAM = "mlflow.sharedViewState.", "viewStateShareKey"  # as ragsweep.tracking.genai writes them

    mlflow.set_tracking_uri(uri)
    cl = mlflow.MlflowClient(uri)
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        raise CheckError(f"no experiment {experiment!r} in {uri}")
    sets = datasets.search_datasets(experiment_ids=[exp.experiment_id])
    if not sets:
        raise CheckError(f"experiment {experiment!r} has no evaluation dataset: run a sweep with this ragsweep first")
    traces = mlflow.search_traces(locations=[exp.experiment_id], return_type="list", max_results=200)

    def scorer_value(t) -> float | None:
        vals = [a.value for a in t.info.assessments or [] if a.name == SCORED[0] and getattr(a, "feedback", None) is not None
                and "ragsweep:" in str(a.source.source_id) and a.value is not None]
        return vals[0] if vals else None

    scored = sorted((t for t in traces if scorer_value(t) is not None), key=lambda t: -scorer_value(t))
    if not scored:
        raise CheckError("no trace carries a ragsweep scorer's assessment: run with --make")
    question = scored[0].data.spans[0].inputs.get("query") if scored[0].data.spans else None
    system = (scored[0].info.tags or {}).get("system", "")
    runs = cl.search_runs([exp.experiment_id])
    kids = {r.info.run_id: r.info.run_name for r in runs if r.data.tags.get("ragsweep.role") == "child"}
    eval_run = eval_run or next((r.info.run_id for r in runs if "ragsweep.role" not in r.data.tags), "")
    ev = cl.get_run(eval_run) if eval_run else None
    views = [k for k in exp.tags if k.startswith(VIEW_TAG + "ragsweep-")]
    view = f"#/experiments/{exp.experiment_id}/runs?{VIEW_PARAM}={views[0][len(VIEW_TAG):]}" if views else ""
    if views:  # the metrics the view shows
        cols = json.loads(exp.tags[views[0]])["selectedColumns"]
        headline = [c[len("metrics.`"):-1] for c in cols if c.startswith("metrics.`") and not c.endswith(("ci_low`", "ci_high`"))]
    else:  # the sweep's headline metrics
        found, cfg = read_json_artifact(cl, next(iter(kids)), "config.json") if kids else (False, None)
        headline = list(((cfg or {}).get("summary") or {}).get("metrics", [])) if found else []
    review, answers = {}, False
    for rid, name in kids.items():
        for t in run_traces(cl, exp.experiment_id, rid):
            answers = answers or bool(t.info.response_preview and not t.info.response_preview.startswith("*(no answer"))
            if (t.info.tags or {}).get("ragsweep.label") == "sample":
                gt = [a.value for a in t.info.assessments or [] if a.name == "expected_response"]
                if gt:
                    review.setdefault(str(gt[0]), []).append(name)
    n_eval = len(mlflow.search_traces(locations=[exp.experiment_id], run_id=eval_run, return_type="list")) if eval_run else 0
    return Store(uri, experiment, exp.experiment_id, sets[0].name, str(question), system[:12], eval_run or "",
                 ev.info.run_name if ev else "", n_eval, kids, view, headline, review, answers)


def _wait(cond, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return
        time.sleep(0.5)
    raise CheckError(f"timed out after {timeout:.0f}s waiting for {what}")


def _dismiss(page) -> None:
    """Close MLflow's assistant side panel and any first-visit popover, so the page is the page."""
    close = page.locator("[data-component-id='mlflow.assistant.chat_panel.close']")
    if close.count():
        try:
            close.first.click(timeout=2000)
        except Exception:  # noqa: BLE001 - nothing to close
            pass
    for label in ("Close", "Dismiss", "Got it"):
        btn = page.get_by_role("button", name=label)
        if btn.count():
            try:
                btn.first.click(timeout=2000)
            except Exception:  # noqa: BLE001 - nothing to close
                pass


def _assessment_names(text: str, known: Sequence[str]) -> list[str]:
    """The assessment names of an Assessments pane's text: the lines that are a name the store holds
    or that name as MLflow's UI shortens it (the part after the last slash)."""
    shown = {n: n for n in known} | {n.split("/", 2)[-1] if n.count("/") >= 2 else n.split("/")[-1]: n for n in known}
    return [line.strip() for line in text.splitlines() if line.strip() in shown]


def check_digests(page, base: str, store: Store) -> str:
    """Every system's run page shows the question set with one digest."""
    digests = {}
    for rid, name in store.systems.items():
        page.goto(f"{base}/#/experiments/{store.experiment_id}/runs/{rid}")
        pattern = re.compile(re.escape(store.dataset) + r"\s*\((\w+)\)")
        _wait(lambda: pattern.search(page.inner_text("body")) is not None, 60, f"the dataset on {name}'s run page")
        digests[name] = pattern.search(page.inner_text("body")).group(1)
    if len(set(digests.values())) != 1:
        raise CheckError(f"the systems' runs show different digests for the one question set {store.dataset}: {digests}")
    return next(iter(digests.values()))


def check_trace(page, store: Store, base_url: str, base: str, out: Path) -> str:
    """The trace's Assessments pane: unique names, values rounded to their scale."""
    import mlflow

    mlflow.set_tracking_uri(store.uri)
    page.goto(f"{base}/{base_url}/traces")
    _wait(lambda: store.question[:30] in page.inner_text("body"), 90, "the scored question in the Traces view")
    _dismiss(page)
    page.set_viewport_size({"width": 1600, "height": 2300})  # the whole assessments pane, expectations at its end
    row = page.locator("[role=row], tr").filter(has_text=store.question[:30]).filter(has_text=store.system)
    (row.first if row.count() else page.get_by_text(store.question[:30]).first).click()
    page.get_by_role("button", name="Assess").first.click()  # the assessments pane: expectations and feedback
    _wait(lambda: page.get_by_text("expected_response").first.is_visible(), 60, "the trace's expectations")
    time.sleep(1.5)
    dialog = page.get_by_role("dialog")  # the trace's drawer (the Traces list behind it has the names as columns)
    traces = mlflow.search_traces(locations=[store.experiment_id], return_type="list", max_results=200)
    names = sorted({a.name for t in traces for a in t.info.assessments or [] if getattr(a, "feedback", None) is not None})
    pane = (dialog.first if dialog.count() else page.locator("body")).inner_text()
    shown = _assessment_names(pane, names)
    twice = sorted(n for n, c in Counter(shown).items() if c > 1)
    if twice:
        raise CheckError(f"the trace's assessments show these names more than once: {twice}")
    long_values = LONG_NUMBER.findall(pane)
    if long_values:
        raise CheckError(f"the trace's assessments show values unrounded: {long_values[:4]}")
    recall = [a.value for t in traces for a in t.info.assessments or [] if a.name in ("claim recall (RAGChecker)", "claim_recall")
              and isinstance(a.value, (int, float)) and (a.source.source_id or "").startswith("offline")]
    if any(v > 0 for v in recall) and not any(v > 1 for v in recall):
        raise CheckError(f"RAGChecker's per-question claim recall sits on 0-1 ({sorted(set(recall))[:4]}) where the run's "
                         "metric is on 0-100")
    page.screenshot(path=str(out / "trace.png"))
    return f"{len(set(shown))} assessment names, each once, values rounded"


def check_review(page, base: str, store: Store, out: Path) -> str:
    """The review queue lists each trace's system; its form shows the system, ground truth and chunks."""
    page.goto(f"{base}/#/experiments/{store.experiment_id}/review-queue")
    queue = page.get_by_text("ragsweep-sample-", exact=False)
    _wait(lambda: queue.count() > 0, 60, "the label sample's review queue")
    _dismiss(page)
    queue.first.click()
    _wait(lambda: "Start review" in page.inner_text("body"), 30, "the queue's items")
    systems = sorted({s for names in store.review.values() for s in names})
    _wait(lambda: all(s[:20] in page.inner_text("body") for s in systems), 30, f"the systems {systems} in the queue's list")
    page.get_by_role("button", name="Start review").first.click()
    _wait(lambda: "Exit review" in page.inner_text("body"), 30, "the review form")
    time.sleep(2)
    body = page.inner_text("body")
    gt = next((g for g in store.review if g[:40] in " ".join(body.split())), None)
    if gt is None:
        raise CheckError(f"the review form does not show the ground truth (one of {[g[:40] for g in store.review]})")
    system = next((s for s in store.review[gt] if s[:20] in body), None)
    if system is None:
        raise CheckError(f"the review form does not say which system answered (one of {store.review[gt]})")
    if "Retrieved chunks" not in body:
        raise CheckError("the review form does not show the retrieved chunks")
    page.screenshot(path=str(out / "review_form.png"))
    return f"review form: system {system[:24]}, ground truth, retrieved chunks"


def shoot(store: Store, out: Path, timeout: float = 240) -> dict[str, str]:
    """The screenshots, each page checked; returns what each showed (one line each)."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    base_url = f"#/experiments/{store.experiment_id}"
    with mlflow_server(store.uri, timeout=timeout) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            failed: list[str] = []

            def step(name: str, check) -> None:
                """One page's check; its failure is kept and the next page checked (all are reported)."""
                try:
                    seen[name] = check()
                except CheckError as exc:
                    failed.append(f"{name}: {exc}")
                    page.screenshot(path=str(out / f"FAILED_{name}.png"))
                finally:
                    page.set_viewport_size({"width": 1600, "height": 1000})

            def datasets() -> str:
                page.goto(f"{base}/{base_url}/datasets")
                _wait(lambda: store.dataset in page.inner_text("body"), 90, f"the dataset {store.dataset} on the Datasets page")
                _dismiss(page)
                page.screenshot(path=str(out / "datasets.png"))
                digest = check_digests(page, base, store)
                return f"Datasets page lists {store.dataset}; every system's run shows digest {digest}"

            def evaluation_runs() -> str:
                page.goto(f"{base}/{base_url}/evaluation-runs")
                _wait(lambda: "bm25-k2" in page.inner_text("body"), 90, "the systems' runs on the Evaluation runs page")
                _dismiss(page)
                headers = [h.strip() for h in page.locator("[role=columnheader], th").all_inner_texts() if h.strip()]
                metric_cols = [h for h in headers if "/" in h and not h.endswith("/mean")]
                if not metric_cols or metric_cols[0].startswith("data/"):
                    raise CheckError(f"Evaluation runs: the first metric columns are {metric_cols[:4]}, not the headline metrics")
                if store.dataset[:12] not in page.inner_text("body"):
                    raise CheckError(f"Evaluation runs: no run shows the question set {store.dataset} as its dataset")
                page.screenshot(path=str(out / "evaluation_runs.png"))
                return f"first metric columns {metric_cols[:4]}; dataset {store.dataset}"

            def runs_view() -> str:
                if not store.view:
                    raise CheckError("the experiment has no runs-table view of the sweep (tag mlflow.sharedViewState.ragsweep-*): "
                                     "the runs table shows no metric until a person picks columns")
                page.set_viewport_size({"width": 2400, "height": 1000})  # the table draws only the columns in sight
                page.goto(f"{base}/{store.view}")
                _dismiss(page)
                first = store.headline[0]
                _wait(lambda: first in page.inner_text("body"), 60, f"the headline metric {first} as a column of the runs table")
                expander = page.locator("button[data-component-id*='runnamecellrenderer' i]")
                if expander.count():
                    expander.first.click()  # the systems, under their sweep
                _wait(lambda: all(n[:12] in page.inner_text("body") for n in store.systems.values()), 30, "the systems' rows")
                body = page.inner_text("body")
                missing = [c for m in store.headline for c in (m, f"{m}/ci_low", f"{m}/ci_high") if c not in body]
                if missing:
                    raise CheckError(f"the runs table's view lacks the columns {missing[:4]}")
                page.screenshot(path=str(out / "runs_view.png"))
                return f"runs table columns {store.headline} with their intervals"

            def overview() -> str:
                page.goto(f"{base}/{base_url}/evaluation-runs/{store.eval_run}/details")
                _wait(lambda: "Scanned" in page.inner_text("body"), 60, "the evaluation run's overview")
                _dismiss(page)
                scanned = re.search(r"Scanned (\S+) traces?", page.inner_text("body")).group(1)
                if scanned != str(store.eval_traces):
                    raise CheckError(f"the evaluation run's overview says 'Scanned {scanned} traces', not {store.eval_traces}")
                page.screenshot(path=str(out / "evaluation_run_overview.png"))
                return f"Scanned {scanned} traces"

            step("datasets", datasets)
            step("evaluation_runs", evaluation_runs)
            step("runs_view", runs_view)
            step("trace", lambda: check_trace(page, store, base_url, base, out))
            step("evaluation_run_overview", overview)
            step("review_form", lambda: check_review(page, base, store, out))
            if failed:
                raise CheckError(f"{len(failed)} page(s) failed: " + " | ".join(failed))
        finally:
            browser.close()
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mlflow-genai-ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--make", help="make the store in this folder first (a sweep and one mlflow.genai.evaluate)")
    ap.add_argument("--generator", default="generator=none", help="the sweep's generator overrides (with --make)")
    ap.add_argument("--tracking-uri", help="a store made with --make before")
    ap.add_argument("--experiment", default=EXPERIMENT)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "mlflow_ui"))
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"mlflow-genai-ui: FAILED: {CHROMIUM} not installed (apt-get install -y chromium)", file=sys.stderr)
        return 1
    try:
        t0 = time.perf_counter()
        if args.make:
            store = make_store(Path(args.make).resolve(), generator=args.generator.split())
        elif args.tracking_uri:
            store = store_of(args.tracking_uri, args.experiment)
        else:
            raise CheckError("give --make DIR or --tracking-uri URI")
        print(f"store ready in {time.perf_counter() - t0:.0f}s: {store.uri}")
        for page, line in shoot(store, Path(args.out)).items():
            print(f"  {page}: {line}")
    except CheckError as exc:
        print(f"mlflow-genai-ui: FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"screenshots in {args.out}: {', '.join(SHOTS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
