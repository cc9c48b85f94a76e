"""MLflow side of human labels (issue 25): mark the sampled questions' traces, read back the
feedback assessments people added with a HUMAN source, log labels from a file as such assessments,
and log the prediction-powered metrics. The logic lives in :mod:`ragsweep.analysis.labels`."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragsweep.judge.human import SAMPLE_ARTIFACT, SAMPLE_TAG, SAMPLE_TAG_VALUE, Label, canonical_name, parse_value, LabelError

log = logging.getLogger(__name__)


def run_traces(client: Any, experiment_id: str, run_id: str) -> list[Any]:
    """The traces of run ``run_id`` (with their assessments, without spans)."""
    out: list[Any] = []
    token = None
    while True:
        page = client.search_traces(locations=[experiment_id], filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'",
                                    max_results=500, include_spans=False, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return out


def query_id(trace: Any) -> str:
    info = trace.info
    return str((info.trace_metadata or {}).get("ragsweep.query_id") or (info.tags or {}).get("ragsweep.query_id"))


def mark_sample(client: Any, experiment_id: str, run_ids: Sequence[str], question_ids: Iterable[str]) -> dict[str, int]:
    """Tag ``ragsweep.label = sample`` on the sampled questions' traces of every run; run id ->
    traces marked (a sampled question without a trace in some run is missing from its count)."""
    wanted = {str(q) for q in question_ids}
    marked: dict[str, int] = {}
    for rid in run_ids:
        marked[rid] = 0
        for t in run_traces(client, experiment_id, rid):
            if query_id(t) in wanted:
                client.set_trace_tag(t.info.trace_id, SAMPLE_TAG, SAMPLE_TAG_VALUE)
                marked[rid] += 1
    return marked


def log_sample(client: Any, parent_id: str, sample: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / SAMPLE_ARTIFACT
        p.write_text(json.dumps(sample, indent=1), encoding="utf-8")
        client.log_artifact(parent_id, str(p))


def read_sample(client: Any, parent_id: str) -> dict[str, Any] | None:
    from ragsweep.tracking import read_json_artifact

    found, data = read_json_artifact(client, parent_id, SAMPLE_ARTIFACT)
    return data if found and isinstance(data, dict) else None


def _is_human(a: Any) -> bool:
    src = getattr(a, "source", None)
    kind = getattr(src, "source_type", None)
    return str(getattr(kind, "value", kind) or "").upper() == "HUMAN"


def human_labels(client: Any, experiment_id: str, run_ids: Sequence[str]) -> tuple[list[Label], list[str]]:
    """The HUMAN feedback assessments on the runs' traces whose name is a registry label, as
    :class:`Label` rows (system = run id); second: why other HUMAN assessments were skipped."""
    out, skipped = [], []
    for rid in run_ids:
        for t in run_traces(client, experiment_id, rid):
            for a in t.info.assessments or []:
                if not _is_human(a) or not getattr(a, "valid", True) or getattr(a, "expectation", None) is not None:
                    continue  # an expectation is the question set's ground truth, not a person's label
                name = canonical_name(a.name)
                value = getattr(a, "value", None)
                if value is None and getattr(a, "feedback", None) is not None:
                    value = a.feedback.value
                if name is None:
                    skipped.append(f"{a.name!r} on question {query_id(t)} (not a label of the registry)")
                    continue
                try:
                    v = parse_value(value, f"assessment {a.name!r} on question {query_id(t)}")
                except LabelError as exc:
                    skipped.append(str(exc))
                    continue
                out.append(Label(rid, query_id(t), name, v, str(getattr(a.source, "source_id", "") or ""), "mlflow"))
    return out, skipped


def log_human_assessments(client: Any, experiment_id: str, labels: Sequence[Label]) -> int:
    """Log labels (system = run id) as HUMAN feedback on their questions' traces; returns how many
    (a label whose question has no trace in its run is not logged)."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.tracing.client import TracingClient

    tc = TracingClient(client.tracking_uri)

    by_run: dict[str, list[Label]] = {}
    for lab in labels:
        by_run.setdefault(lab.system, []).append(lab)
    n = 0
    for rid, labs in by_run.items():
        traces = {query_id(t): t.info.trace_id for t in run_traces(client, experiment_id, rid)}
        for lab in labs:
            tid = traces.get(lab.question_id)
            if tid is None:
                continue
            tc.log_assessment(tid, Feedback(name=lab.name, value=lab.value, trace_id=tid, source=AssessmentSource(
                source_type=AssessmentSourceType.HUMAN, source_id=lab.labeller or "labels-file")))
            n += 1
    return n


def log_metrics(client: Any, run_id: str, metrics: dict[str, float]) -> None:
    from mlflow.entities import Metric
    import time

    from ragsweep.tracking import finite, metric_name  # the package's exports (tracker.py is being split)

    ts = int(time.time() * 1000)
    batch = [Metric(metric_name(k), float(v), ts, 0) for k, v in metrics.items() if finite(v)]
    if batch:
        client.log_batch(run_id, metrics=batch)


def set_tags(client: Any, run_id: str, tags: dict[str, str]) -> None:
    for k, v in tags.items():
        client.set_tag(run_id, k, str(v)[:5000])


def update_judge_card(client: Any, run_id: str, in_domain: list[str]) -> bool:
    """Add the judge's in-domain agreement with the user's labels to the run's judge card
    (``judge_card.json`` / ``.md``, beside the shipped out-of-sample figures); False without a card."""
    from ragsweep.judge import card as judge_card
    from ragsweep.tracking import read_json_artifact

    found, card = read_json_artifact(client, run_id, "judge_card.json")
    if not found or not isinstance(card, dict):
        return False
    card["in_domain"] = in_domain
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("judge_card.json", json.dumps(card, indent=1, default=str)), ("judge_card.md", judge_card.markdown(card))):
            p = Path(tmp) / name
            p.write_text(text, encoding="utf-8")
            client.log_artifact(run_id, str(p))
    return True


def sample_trace_ids(client: Any, experiment_id: str, run_ids: Sequence[str], question_ids: Iterable[str]) -> list[str]:
    """The trace ids of the sampled questions in every run (the traces ``mark_sample`` tagged)."""
    wanted = {str(q) for q in question_ids}
    return [t.info.trace_id for rid in run_ids for t in run_traces(client, experiment_id, rid) if query_id(t) in wanted]


def review_queue(client: Any, experiment_id: str, name: str, trace_ids: Sequence[str], kinds: dict[str, Any]) -> dict[str, Any]:
    """MLflow's label schemas (one per registry label: yes/no as pass/fail, 0..1 as a number) and a
    review queue ``name`` holding the sampled traces, so people label them on the Review page; their
    answers are HUMAN feedback named after the label, read back by :func:`human_labels` as any other.
    Label schemas and review queues are experimental in MLflow 3.14+; on an MLflow without them,
    or a store that refuses them, one warning and ``{"error"}`` (the Traces view still works)."""
    from ragsweep.tracking.genai import mlflow_module, warn_missing

    try:
        ls = mlflow_module("mlflow.genai.label_schemas")
        rq = mlflow_module("mlflow.genai.review_queues")
    except ImportError as exc:
        warn_missing("label schemas and review queues (MLflow >= 3.14)", exc)
        return {"error": str(exc)}
    import warnings

    import mlflow

    mlflow.set_tracking_uri(client.tracking_uri)  # the fluent label-schema and queue functions use it
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "experimental": said once in the docs, not on every call
            schema_ids = []
            for label, kind in kinds.items():
                try:
                    schema = ls.get_label_schema(label, experiment_id=experiment_id)
                except Exception:  # noqa: BLE001 - not there yet
                    answer = ls.InputPassFail(positive_label="yes", negative_label="no") if kind.values == "yes/no" \
                        else ls.InputNumeric(min_value=0.0, max_value=1.0)
                    schema = ls.create_label_schema(label, type="feedback", input=answer, instruction=kind.description,
                                                    enable_comment=True, experiment_id=experiment_id)
                schema_ids.append(schema.schema_id)
            queue = next((q for q in rq.list_review_queues(experiment_id=experiment_id) if q.name == name), None)
            if queue is None:
                queue = rq.create_review_queue(name, queue_type="custom", schema_ids=schema_ids, experiment_id=experiment_id)
            if trace_ids:
                rq.add_items_to_review_queue(queue.queue_id, item_ids=list(trace_ids))
        return {"queue": name, "queue_id": queue.queue_id, "schemas": list(kinds), "items": len(trace_ids)}
    except Exception as exc:  # noqa: BLE001 - the sample stands without a queue
        warn_missing("a review queue for the sample", f"{type(exc).__name__}: {exc}")
        return {"error": f"{type(exc).__name__}: {exc}"}
