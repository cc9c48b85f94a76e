"""Check, in a real browser, ragsweep inside MLflow's GenAI evaluation pages (issue 38), and keep
screenshots of them:

    python experiments/mlflow_genai_ui.py --make DIR [--out experiments/results/mlflow_ui]

1. ``--make DIR``: in DIR, ``ragsweep.sweep("retriever=bm25,tfidf retriever.top_k=2 generator=none
   dataset.limit=4 experiment_name=genai_ui")`` (retrieval-only: no model server), then
   ``mlflow.genai.evaluate`` over the bm25 system's traces with ragsweep's scorers
   (``ragsweep.mlflow_scorers``: claim recall, context precision; offline judge).
   Without ``--make``: ``--tracking-uri`` and ``--experiment`` of a store made so before.
2. ``mlflow server`` over the store on 127.0.0.1 (a free port, stopped at the end) and headless
   Chromium through Playwright (``/usr/bin/chromium``), three pages:
   - ``datasets.png``: the experiment's Datasets page lists the sweep's question set (an MLflow
     evaluation dataset ``clapnq-4q-<fingerprint>``);
   - ``evaluation_runs.png``: the Evaluation runs page: each system's run with that set in its
     Dataset column, its name saying what varied (``bm25-k2-...``), and the headline metrics
     with their interval and n as the first metric columns (not ``data/*`` counts);
   - ``trace.png``: one question's trace with its expectations (``expected_response``,
     ``expected_facts``, ``expected_retrieved_context``) and the assessments of ragsweep's scorers.

Exit status 0 when every page shows what it should, else 1 with ``mlflow-genai-ui: FAILED: <reason>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
EXPERIMENT = "genai_ui"
SHOTS = ("datasets.png", "evaluation_runs.png", "trace.png")
SCORED = ("ragchecker/retriever/claim_recall", "ragchecker/retriever/context_precision")
HEADLINE = "ragchecker/retriever/claim_recall"  # the first headline metric a retrieval-only run defines

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


def make_store(root: Path, limit: int = 4) -> Store:
    """A 2-system retrieval-only sweep in ``root`` and one ``mlflow.genai.evaluate`` of ragsweep's scorers."""
    import mlflow

    import ragsweep

    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAGSWEEP_CACHE_DIR", str(root / "cache"))
    os.environ["RAGSWEEP_MLFLOW_TRACES"] = "sync"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    sweep = ragsweep.sweep(f"retriever=bm25,tfidf retriever.top_k=2 generator=none dataset.limit={limit} "
                           f"experiment_name={EXPERIMENT}", cwd=root, echo=False)
    runs = sweep.runs()
    bm25 = runs[runs["retriever"] == "bm25"]["run_id"].iloc[0]
    data = ragsweep.mlflow_traces(EXPERIMENT, run=bm25, tracking_uri=sweep.tracking_uri)
    mlflow.set_tracking_uri(sweep.tracking_uri)
    mlflow.set_experiment(EXPERIMENT)
    res = mlflow.genai.evaluate(data=data, scorers=ragsweep.mlflow_scorers(list(SCORED), cache_dir=root / "cache"))
    return store_of(sweep.tracking_uri, EXPERIMENT, res.run_id)


def store_of(uri: str, experiment: str, eval_run: str | None = None) -> Store:
    import mlflow
    from mlflow.genai import datasets

    mlflow.set_tracking_uri(uri)
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
    return Store(uri, experiment, exp.experiment_id, sets[0].name, str(question), system[:12], eval_run or "")


def _wait(cond, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if cond():
            return
        time.sleep(0.5)
    raise CheckError(f"timed out after {timeout:.0f}s waiting for {what}")


def _dismiss(page) -> None:
    """Close MLflow's assistant side panel and any first-visit popover, so the page is the page."""
    for label in ("Close", "Dismiss", "Got it"):
        btn = page.get_by_role("button", name=label)
        if btn.count():
            try:
                btn.first.click(timeout=2000)
            except Exception:  # noqa: BLE001 - nothing to close
                pass


def shoot(store: Store, out: Path, timeout: float = 240) -> dict[str, str]:
    """The three screenshots, each page checked; returns what each showed (one line each)."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    base_url = f"#/experiments/{store.experiment_id}"
    with mlflow_server(store.uri, timeout=timeout) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(30_000)
            page.goto(f"{base}/{base_url}/datasets")
            _wait(lambda: store.dataset in page.inner_text("body"), 90, f"the dataset {store.dataset} on the Datasets page")
            _dismiss(page)
            page.screenshot(path=str(out / "datasets.png"))
            seen["datasets"] = f"Datasets page lists {store.dataset}"

            page.goto(f"{base}/{base_url}/evaluation-runs")
            _wait(lambda: "bm25-k2" in page.inner_text("body"), 90, "the systems' runs on the Evaluation runs page")
            _dismiss(page)
            headers = [h.strip() for h in page.locator("[role=columnheader], th").all_inner_texts() if h.strip()]
            metric_cols = [h for h in headers if "/" in h]
            if not metric_cols or metric_cols[0].startswith("data/"):
                raise CheckError(f"Evaluation runs: the first metric columns are {metric_cols[:4]}, not the headline metrics")
            body = page.inner_text("body")
            if store.dataset[:12] not in body:
                raise CheckError(f"Evaluation runs: no run shows the question set {store.dataset} as its dataset")
            page.screenshot(path=str(out / "evaluation_runs.png"))
            seen["evaluation_runs"] = f"first metric columns {metric_cols[:4]}; dataset {store.dataset}"

            page.goto(f"{base}/{base_url}/traces")
            _wait(lambda: store.question[:30] in page.inner_text("body"), 90, "the scored question in the Traces view")
            _dismiss(page)
            page.set_viewport_size({"width": 1600, "height": 2300})  # the whole assessments pane, expectations at its end
            row = page.locator("[role=row], tr").filter(has_text=store.question[:30]).filter(has_text=store.system)
            (row.first if row.count() else page.get_by_text(store.question[:30]).first).click()
            page.get_by_role("button", name="Assess").first.click()  # the assessments pane: expectations and feedback
            _wait(lambda: page.get_by_text("expected_response").first.is_visible()
                  and page.get_by_text(SCORED[0]).first.is_visible(), 60, "the trace's expectations and ragsweep's assessments")
            time.sleep(1.5)
            page.screenshot(path=str(out / "trace.png"))
            seen["trace"] = f"trace of {store.question[:40]!r}: expected_response and {SCORED[0]}"
        finally:
            browser.close()
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mlflow-genai-ui", description=__doc__.split("\n\n")[0])
    ap.add_argument("--make", help="make the store in this folder first (a sweep and one mlflow.genai.evaluate)")
    ap.add_argument("--tracking-uri", help="a store made with --make before")
    ap.add_argument("--experiment", default=EXPERIMENT)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "mlflow_ui"))
    args = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"mlflow-genai-ui: FAILED: {CHROMIUM} not installed (apt-get install -y chromium)", file=sys.stderr)
        return 1
    try:
        t0 = time.perf_counter()
        if args.make:
            store = make_store(Path(args.make).resolve())
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
