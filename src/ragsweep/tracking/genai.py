"""ragsweep inside MLflow 3's GenAI evaluation (issue 38): question sets as MLflow evaluation
datasets and run inputs, ground truth on the traces as expectations, and the traces handed to
``mlflow.genai.evaluate``.

- A run's questions are an MLflow evaluation dataset (``inputs: {question}``, ``expectations:
  {expected_response, expected_retrieved_context}``, ``tags: {query_id}``), found or created once
  per question set (its name carries a fingerprint of the questions, so every system of a sweep
  logs the same one), and logged as the run's input (the Datasets page, the runs' Dataset column).
- Each trace carries its question's ground truth as expectations (:func:`expectations_of`):
  ``expected_response`` (the reference answer), ``expected_facts`` (the ground-truth claims the
  judge extracted) and ``expected_retrieved_context`` (the relevant spans: ``doc_uri``,
  ``start``, ``end``), so MLflow's own judges find them.
- :func:`mlflow_traces`: a run's (or an experiment's) traces as the DataFrame
  ``mlflow.genai.evaluate(data=...)`` takes, with the expectations a judge should read.

An MLflow without one of these features (an older release) logs the rest: one warning per
missing feature and process, never a failed run.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

from ragsweep.records import Claim
from ragsweep.store.cache import content_hash

log = logging.getLogger(__name__)

EXPECTED_RESPONSE = "expected_response"
EXPECTED_FACTS = "expected_facts"
EXPECTED_CONTEXT = "expected_retrieved_context"
QUESTION_KEY = "question"
ID_TAG = "query_id"
#: the source of the expectations ragsweep writes (the question set's ground truth)
SOURCE_ID = "ragsweep.dataset"
#: a dataset loaded from MLflow (``dataset=mlflow``) keeps its MLflow name behind this prefix
FROM_MLFLOW = "mlflow:"

#: the run tag MLflow's evaluation-run overview reads as the run's trace count ("Scanned N traces")
TRACE_COUNT_TAG = "total_traces"

_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """``message`` as a warning, once per ``key`` and process."""
    if key not in _warned:
        _warned.add(key)
        log.warning("%s", message)


def warn_missing(feature: str, exc: BaseException | str) -> None:
    """One warning per missing MLflow feature and process (never an error)."""
    import mlflow

    why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    warn_once(feature, f"MLflow {getattr(mlflow, '__version__', '?')}: {feature} is not available here ({why}); "
                       "ragsweep logs everything else")


def mlflow_module(name: str) -> Any:
    """``importlib.import_module(name)`` (e.g. ``mlflow.genai.datasets``); ImportError on an MLflow without it."""
    import importlib

    return importlib.import_module(name)


# -- question sets ---------------------------------------------------------------------------------
def question_records(queries: Iterable[Any]) -> list[dict[str, Any]]:
    """An MLflow evaluation dataset's records for ragsweep's questions
    (:class:`ragsweep.types.Query`): the question as ``inputs``, its ground truth as
    ``expectations``, its id as a tag."""
    out = []
    for q in queries:
        exp: dict[str, Any] = {}
        if q.gt_answer:
            exp[EXPECTED_RESPONSE] = q.gt_answer
        if q.relevant:
            exp[EXPECTED_CONTEXT] = [{"doc_uri": s.doc_id, "start": s.start, "end": s.end} for s in q.relevant]
        out.append({"inputs": {QUESTION_KEY: q.query}, "expectations": exp, "tags": {ID_TAG: str(q.query_id)}})
    return out


def set_name(dataset_name: str, records: Sequence[Mapping[str, Any]]) -> str:
    """The MLflow name of a question set: ``<dataset>-<n>q-<fingerprint>`` (the same questions,
    spans and answers give the same name, so a sweep's systems share one dataset)."""
    return f"{dataset_name}-{len(records)}q-{content_hash('question-set', list(records))[:10]}"


def _find(name: str, experiment_id: str | None) -> Any:
    datasets = mlflow_module("mlflow.genai.datasets")
    found = datasets.search_datasets(experiment_ids=[experiment_id] if experiment_id else None,
                                     filter_string=f"name = '{name}'", max_results=5)
    return found[0] if found else None


def log_question_set(tracker: Any, dataset: Any) -> dict[str, Any]:
    """Find or create the evaluation dataset of ``dataset``'s questions in the tracker's experiment
    and log it as an input of the tracker's run. Never raises: ``{"name", "dataset_id",
    "created"}``, or ``{"error"}`` (warned once)."""
    if tracker is None or not getattr(tracker, "enabled", False) or not getattr(tracker, "run_id", None):
        return {}
    try:
        datasets = mlflow_module("mlflow.genai.datasets")
    except ImportError as exc:
        warn_missing("evaluation datasets (mlflow.genai.datasets)", exc)
        return {"error": str(exc)}
    try:
        records = question_records(dataset.queries)
        name = str(dataset.name)
        created = False
        if name.startswith(FROM_MLFLOW):  # dataset=mlflow: the set it was read from is the input
            found = _find(name[len(FROM_MLFLOW):], None)
        else:
            name = set_name(name, records)
            found = _find(name, tracker.experiment_id)
        if found is None:
            found = datasets.create_dataset(name=name, experiment_id=[tracker.experiment_id],
                                            tags={"ragsweep.source": str(dataset.name), "ragsweep.questions": str(len(records))})
            found.merge_records(records)
            created = True
            # read it back: merging records gives the dataset a new digest (MLflow's store hashes its
            # name and last update time), which the object create_dataset returned does not carry,
            # so the first run logged the pre-merge digest and every later run another one
            found = _find(name, tracker.experiment_id) or found
        log_input(tracker, found)
        return {"name": found.name, "dataset_id": found.dataset_id, "created": created}
    except Exception as exc:  # noqa: BLE001 - never fail a run for its dataset input
        warn_once("question-set", f"the run's questions were not logged as an MLflow evaluation dataset "
                                  f"({type(exc).__name__}: {str(exc)[:300]}); the run goes on")
        return {"error": f"{type(exc).__name__}: {exc}"}


def log_input(tracker: Any, eval_dataset: Any) -> None:
    """``eval_dataset`` as an input of the tracker's run (context ``evaluation``)."""
    from mlflow.entities import DatasetInput, InputTag

    entity = eval_dataset._to_mlflow_entity()
    tracker.client.log_inputs(tracker.run_id, [DatasetInput(entity, [InputTag("mlflow.data.context", "evaluation")])])


# -- expectations on traces ------------------------------------------------------------------------
def expectations_of(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A record's ground truth as MLflow expectations: ``expected_response`` (a non-blank reference
    answer), ``expected_facts`` (the ground-truth claims, where the judge extracted them) and
    ``expected_retrieved_context`` (the relevant spans)."""
    out: dict[str, Any] = {}
    gt = rec.get("gt_answer")
    if isinstance(gt, str) and gt.strip():
        out[EXPECTED_RESPONSE] = gt
    claims = rec.get("gt_answer_claims")
    if isinstance(claims, list) and claims:
        facts = [t for t in (Claim.from_json(c).text for c in claims if c is not None) if t]
        if facts:
            out[EXPECTED_FACTS] = facts
    spans = rec.get("relevant_spans")
    if isinstance(spans, list) and spans:
        out[EXPECTED_CONTEXT] = [{"doc_uri": s.get("doc_id"), "start": s.get("start"), "end": s.get("end")}
                                 for s in spans if isinstance(s, Mapping)]
    return out


def expectation_entities(rec: Mapping[str, Any]) -> list[Any]:
    """:func:`expectations_of` as MLflow ``Expectation`` assessments (source HUMAN: the question
    set's ground truth, ``ragsweep.dataset``)."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Expectation

    src = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id=SOURCE_ID)
    return [Expectation(name=k, value=v, source=src) for k, v in expectations_of(rec).items()]


# -- traces for mlflow.genai.evaluate ---------------------------------------------------------------
def mlflow_traces(experiment: str = "default", *, run: str | None = None, tracking_uri: str | None = None,
                  expectations: str | Sequence[str] | None = EXPECTED_RESPONSE, max_results: int = 10_000):
    """ragsweep's traces as the ``data`` of ``mlflow.genai.evaluate``: a DataFrame with a ``trace``
    column and an ``expectations`` column built from each trace's expectations.

    ``run``: one run id (default: every trace of ``experiment``). ``expectations``: which
    expectations the judges get (default ``expected_response``; MLflow's Correctness judge takes
    either ``expected_response`` or ``expected_facts``, not both, while the traces carry both; a
    list for several; None: all of them).

    >>> from mlflow.genai.scorers import Correctness                      # doctest: +SKIP
    >>> mlflow.genai.evaluate(data=ragsweep.mlflow_traces("default"), scorers=[Correctness(model=...)])  # doctest: +SKIP
    """
    import mlflow
    import pandas as pd

    from ragsweep.tracking.runs import _experiment, client, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    mlflow.set_tracking_uri(uri)
    exp = _experiment(client(uri), experiment)
    filt = f"metadata.`mlflow.sourceRun` = '{run}'" if run else None
    traces = mlflow.search_traces(locations=[exp.experiment_id], filter_string=filt, max_results=max_results,
                                  return_type="list")
    keep = [expectations] if isinstance(expectations, str) else list(expectations) if expectations is not None else None
    rows = []
    for t in traces:
        exp_values = {a.name: a.value for a in (t.info.assessments or []) if _is_expectation(a)}
        rows.append({"trace": t, "expectations": {k: v for k, v in exp_values.items() if keep is None or k in keep}})
    return pd.DataFrame(rows, columns=["trace", "expectations"])


def _is_expectation(a: Any) -> bool:
    return getattr(a, "expectation", None) is not None and getattr(a, "valid", True) is not False


def tag_trace_count(run_id: str, tracking_uri: str | None = None) -> int:
    """Tag run ``run_id`` (an ``mlflow.genai.evaluate`` run, say) with the number of traces linked
    to it (``total_traces``): MLflow's evaluation-run overview reads that tag and says "Scanned NaN
    traces" without it. A sweep's runs are tagged when their traces are sent. Returns the count."""
    import mlflow

    from ragsweep.tracking.runs import client, resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    mlflow.set_tracking_uri(uri)
    cl = client(uri)
    run = cl.get_run(run_id)
    n = len(mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list",
                                 include_spans=False, max_results=100_000))
    cl.set_tag(run_id, TRACE_COUNT_TAG, str(n))
    return n


# -- the runs table's view of a sweep ----------------------------------------------------------------
#: MLflow keeps a shareable view of an experiment's runs table in an experiment tag of this prefix and
#: opens it from ``#/experiments/<id>/runs?viewStateShareKey=<key>``
VIEW_TAG = "mlflow.sharedViewState."
VIEW_PARAM = "viewStateShareKey"
#: how many headline metrics the view shows (each with its interval: three columns)
VIEW_METRICS = 4


def view_columns(metrics: Sequence[str]) -> list[str]:
    """The runs table's columns of a sweep's view: the dataset, then each headline metric followed by
    its 95% interval (``/ci_low``, ``/ci_high``), in the runs table's column keys."""
    from ragsweep.tracking.identity import metric_name

    cols = ["attributes.`Dataset`"]
    for m in metrics:
        cols += [f"metrics.`{metric_name(k)}`" for k in (m, f"{m}/ci_low", f"{m}/ci_high")]
    return cols


def runs_view(tracker: Any, metrics: Sequence[str]) -> str | None:
    """Save a view of the experiment's runs table that shows ``metrics`` (the sweep's headline
    metrics, ``summary.metrics``) with their intervals, instead of MLflow's default (no metric of
    hundreds); returns the path to open it (``#/experiments/<id>/runs?viewStateShareKey=<key>``), also
    written to the tracker's run (the sweep's parent) as its description. Never raises (None)."""
    if tracker is None or not getattr(tracker, "enabled", False) or not metrics:
        return None
    import json

    try:
        key = "ragsweep-" + content_hash("runs-view", list(metrics))[:16]
        cols = view_columns(metrics)
        state = {"selectedColumns": cols, "columnOrder": cols, "groupBy": None}
        tracker.client.set_experiment_tag(tracker.experiment_id, VIEW_TAG + key, json.dumps(state))
        path = f"#/experiments/{tracker.experiment_id}/runs?{VIEW_PARAM}={key}"
        if getattr(tracker, "run_id", None):
            tracker.client.set_tag(tracker.run_id, "mlflow.note.content",
                                   f"The sweep's systems side by side, headline metrics with their 95% intervals: "
                                   f"[open this view]({path}) (MLflow's runs table shows no metric until columns are picked).")
        return path
    except Exception as exc:  # noqa: BLE001 - a view is a convenience
        warn_once("runs-view", f"no runs-table view saved for the sweep ({type(exc).__name__}: {str(exc)[:200]})")
        return None
