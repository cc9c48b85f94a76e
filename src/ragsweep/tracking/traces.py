"""Per-question MLflow traces and the evaluation table of a run.

One trace per question, linked to the run (trace metadata ``mlflow.sourceRun``), with spans

- ``retrieve`` (RETRIEVER): the query; the chunks as documents (id, rank, score, text, offsets);
- ``prompt`` (PARSER): the rendered prompt, the chunks dropped to fit the model's context;
- ``generate`` (CHAT_MODEL): model, tokens in/out, latency, cache hit, finish reason (ERROR on a
  failed generation);
- ``evaluate`` (EVALUATOR): the claims of the response and of the ground truth, each claim's label
  against the ground truth and against each chunk, the judge and its failure if any;

every stage is a span even when it came from the cache (attribute ``ragsweep.cached``). Every
per-question metric (``rec["metrics"]``) and the failure reason is an assessment (feedback) on
the trace, its source the judge (LLM_JUDGE for an LLM judge, CODE otherwise; retrieval metrics
are CODE ``ragsweep.retrieval``), so the Traces view filters and sorts questions by any metric.

Speed: the traces are built here as finished entities and written with one ``start_trace`` per
question (the trace with all its assessments: one transaction) and one batched ``log_spans``,
instead of MLflow's live-span exporter plus one ``log_feedback`` call per assessment (hundreds
of transactions for a 20-question run). Logging never fails a run: errors are counted and warned.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Sequence

# re-exported: the import paths of before the split (building a trace; the evaluation table)
from ragsweep.tracking.genai import TRACE_COUNT_TAG
from ragsweep.tracking.eval_table import MODE_ENV, TABLE_FILE, log_eval_table, table_rows  # noqa: F401
from ragsweep.tracking.trace_build import (  # noqa: F401
    CODE_SOURCE,
    RETRIEVAL_SOURCE,
    TRACE_NAME,
    build_trace,
    claim_text,
    claims_view,
    failure_of,
    is_hallucination,
    source_for,
)

log = logging.getLogger(__name__)

TRACE_BATCH = 50  # spans of this many traces per log_spans call


# -- logging ---------------------------------------------------------------------------------------
def _tracing_client(tracker: Any):
    from mlflow.tracing.client import TracingClient

    return TracingClient(tracker.tracking_uri)


def send_traces(tracker: Any, records: Sequence[dict[str, Any]], *, judge: str, run_id: str | None,
                skip_logged: bool = False, spool: bool = True, system: str | None = None) -> dict[str, Any]:
    """Send one trace per record now, linked to ``run_id``, with its spans and assessments (see
    the module doc); ``skip_logged``: not for questions the run already has a trace of (a
    replayed spool); ``system``: the run's name, tagged on every trace (default: the tracker's
    ``run_name``). Never raises: returns ``{"traces", "assessments", "spans", "errors", "spooled",
    "seconds"}``; failures are counted and warned, and records whose trace could not be sent are
    handed to the tracker's spool (when it has one) to be sent on its next start."""
    t0 = time.perf_counter()
    out = {"traces": 0, "assessments": 0, "spans": 0, "errors": 0, "spooled": 0, "seconds": 0.0}
    if not records or tracker is None or not getattr(tracker, "enabled", False) or not run_id:
        return out
    failed: list[dict[str, Any]] = []
    have: set[str] = set()
    first_error: str | None = None
    try:
        from mlflow.entities import Span

        tc = _tracing_client(tracker)
        exp = str(tracker.experiment_id)
        system = system or getattr(tracker, "run_name", None)
        start_ns = time.time_ns()
        batch: list[tuple[dict[str, Any], Any, list[dict[str, Any]]]] = []
        if skip_logged:
            have.update(logged_query_ids(tc, exp, run_id))
            records = [r for r in records if str(r.get("query_id")) not in have]

        def flush() -> None:
            nonlocal first_error
            spans = []
            sent = []
            for rec, info, span_dicts in batch:
                try:
                    tc.start_trace(info)
                    sent.append((rec, info, span_dicts))
                    spans.extend(Span.from_dict(d) for d in span_dicts)
                except Exception as exc:  # noqa: BLE001 - counted, warned, spooled
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                    out["errors"] += 1
                    failed.append(rec)
            if spans:
                try:
                    tc.log_spans(exp, spans)
                    out["spans"] += len(spans)
                except Exception as exc:  # noqa: BLE001 - the traces exist; their spans are missing
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                    out["errors"] += len(sent)
                    failed.extend(r for r, _, _ in sent)
                    sent = []
            for _rec, info, _ in sent:
                out["traces"] += 1
                out["assessments"] += len(info.assessments)
            batch.clear()

        for i, rec in enumerate(records):
            try:
                info, spans = build_trace(rec, experiment_id=exp, run_id=run_id, judge=judge, t0_ns=start_ns + i * 1000,
                                          system=system)
            except Exception as exc:  # noqa: BLE001 - a malformed record: count it, go on
                first_error = first_error or f"{type(exc).__name__}: {exc}"
                out["errors"] += 1
                continue
            batch.append((rec, info, spans))
            if len(batch) >= TRACE_BATCH:
                flush()
        if batch:
            flush()
    except Exception as exc:  # noqa: BLE001 - never fail a run for its traces
        first_error = first_error or f"{type(exc).__name__}: {exc}"
        out["errors"] += 1
    if failed and spool and hasattr(tracker, "spool_traces"):
        try:
            tracker.spool_traces(run_id, failed, judge, system)
            out["spooled"] = len(failed)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not spool %d trace(s): %s", len(failed), exc)
    if out["traces"] and not out["errors"]:
        try:  # the count MLflow's run overview shows ("Scanned N traces": NaN without it)
            n = out["traces"] + (len(have) if skip_logged else 0)
            cl = getattr(tracker, "client", None)
            if cl is None:
                from mlflow.tracking import MlflowClient

                cl = MlflowClient(tracking_uri=tracker.tracking_uri)
            cl.set_tag(run_id, TRACE_COUNT_TAG, str(n))
        except Exception as exc:  # noqa: BLE001 - a count is no reason to fail
            log.warning("could not tag run %s with its trace count: %s", run_id, exc)
    if out["errors"]:
        log.warning("MLflow traces: %d of %d question(s) not logged (%s)%s", out["errors"], len(records), first_error,
                    f"; {out['spooled']} kept to send later" if out["spooled"] else "")
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out



def logged_query_ids(tc: Any, experiment_id: str, run_id: str) -> set[str]:
    """Query ids of the traces run ``run_id`` already has."""
    have: set[str] = set()
    token = None
    while True:
        page = tc.search_traces(locations=[experiment_id], filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'",
                                max_results=500, include_spans=False, page_token=token)
        have.update(str(t.info.trace_metadata.get("ragsweep.query_id")) for t in page)
        token = getattr(page, "token", None)
        if not token:
            return have


def log_traces(tracker: Any, records: Sequence[dict[str, Any]], *, judge: str, run_id: str | None) -> dict[str, Any]:
    """The traces of a run's records (call once, at the end of the run). Never raises.

    ``$RAGSWEEP_MLFLOW_TRACES``: ``background`` (default) writes the records to the tracker's
    local spool and starts a detached process that sends them (the run does not wait: sending
    20 traces with their assessments takes about a second, a warm run five), and a later Tracker
    on the same store sends whatever that process could not; ``sync`` sends now; ``off`` skips.
    Returns counts and seconds (``background``: the pid of the sender).
    """
    mode = os.environ.get(MODE_ENV, "background").strip().lower()
    t0 = time.perf_counter()
    if mode == "off" or not records or tracker is None or not getattr(tracker, "enabled", False) or not run_id:
        return {"traces": 0, "assessments": 0, "spans": 0, "errors": 0, "spooled": 0, "seconds": 0.0, "mode": mode}
    if mode == "background" and hasattr(tracker, "spool_traces"):
        try:
            tracker.spool_traces(run_id, list(records), judge, getattr(tracker, "run_name", None))
            pid = tracker.send_spool_in_background()
            return {"traces": 0, "assessments": 0, "spans": 0, "errors": 0, "spooled": len(records),
                    "seconds": round(time.perf_counter() - t0, 4), "mode": mode, "sender_pid": pid}
        except Exception as exc:  # noqa: BLE001 - fall back to sending now
            log.warning("could not hand the traces to a background sender (%s); sending them now", exc)
    res = send_traces(tracker, records, judge=judge, run_id=run_id)
    res["mode"] = "sync"
    return res
