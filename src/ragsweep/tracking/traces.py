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

import json
import logging
import math
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

log = logging.getLogger(__name__)

TRACE_NAME = "ragsweep.question"
TABLE_FILE = "eval_table.json"
CODE_SOURCE = "ragsweep"
RETRIEVAL_SOURCE = "ragsweep.retrieval"
MODE_ENV = "RAGSWEEP_MLFLOW_TRACES"  # background (default) | sync | off
TRACE_BATCH = 50  # spans of this many traces per log_spans call

_rng = random.Random()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def claim_text(claim: Any) -> str:
    """A claim as text: RAGChecker's triplets ``[s, p, o]`` joined by spaces."""
    if isinstance(claim, (list, tuple)):
        return " ".join(str(c) for c in claim)
    return "" if claim is None else str(claim)


def _label(labels: Any, i: int) -> Any:
    if isinstance(labels, list) and i < len(labels):
        return labels[i]
    return None


def _row(matrix: Any, i: int) -> list[Any]:
    """Labels of claim ``i`` against each chunk (``matrix[claim][chunk]``)."""
    if not isinstance(matrix, list) or i >= len(matrix) or not isinstance(matrix[i], list):
        return []
    return list(matrix[i])


def claims_view(rec: dict[str, Any]) -> dict[str, Any]:
    """The claims of the response and of the ground truth with their labels (RAGChecker's schema,
    see :mod:`ragsweep.evaluator.ragchecker_metrics`): a response claim's ``vs_gt`` is
    ``answer2response[i]``, its ``vs_chunks`` ``retrieved2response[i]`` (one label per chunk); a
    ground-truth claim's ``vs_response`` is ``response2answer[j]``, its ``vs_chunks``
    ``retrieved2answer[j]``."""
    resp = rec.get("response_claims") or []
    gt = rec.get("gt_answer_claims") or []
    out_resp = []
    for i, c in enumerate(resp if isinstance(resp, list) else []):
        vs_gt = _label(rec.get("answer2response"), i)
        vs_chunks = _row(rec.get("retrieved2response"), i)
        out_resp.append({
            "claim": claim_text(c), "vs_gt": vs_gt, "vs_chunks": vs_chunks,
            "hallucination": is_hallucination(vs_gt, vs_chunks),
        })
    out_gt = []
    for j, c in enumerate(gt if isinstance(gt, list) else []):
        out_gt.append({"claim": claim_text(c), "vs_response": _label(rec.get("response2answer"), j),
                       "vs_chunks": _row(rec.get("retrieved2answer"), j)})
    return {"response_claims": out_resp, "gt_answer_claims": out_gt}


def is_hallucination(vs_gt: Any, vs_chunks: Sequence[Any]) -> bool | None:
    """RAGChecker's hallucination: a response claim entailed neither by the ground truth nor by
    any retrieved chunk. None when the claim was not checked (no labels)."""
    if vs_gt is None and not any(v is not None for v in vs_chunks):
        return None
    return vs_gt != "Entailment" and not any(v == "Entailment" for v in vs_chunks)


def source_for(metric: str, judge: str):
    """The assessment source of ``metric``: retrieval metrics are code, judge metrics the judge."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    if metric.startswith("retrieval/"):
        return AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=RETRIEVAL_SOURCE)
    kind = AssessmentSourceType.LLM_JUDGE if "llm" in (judge or "").lower() else AssessmentSourceType.CODE
    return AssessmentSource(source_type=kind, source_id=judge or CODE_SOURCE)


def failure_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    """``{"stage", "reason"}`` of a failed question (``failure``, or a generation ``error``)."""
    f = rec.get("failure")
    if isinstance(f, dict) and f.get("reason"):
        return {"stage": f.get("stage") or "unknown", "reason": str(f["reason"])}
    if rec.get("error"):
        return {"stage": "generation", "reason": str(rec["error"])}
    return None


# -- building one trace ---------------------------------------------------------------------------
class _TraceBuilder:
    def __init__(self, experiment_id: str):
        self.experiment_id = experiment_id
        self.otel_trace_id = uuid.uuid4().int & ((1 << 128) - 1)
        self.trace_id = f"tr-{self.otel_trace_id:032x}"
        self.spans: list[dict[str, Any]] = []

    def span(self, name: str, span_type: str, start_ns: int, end_ns: int, *, parent: str | None,
             inputs: Any = None, outputs: Any = None, attributes: dict[str, Any] | None = None,
             error: str | None = None) -> str:
        span_id = f"{_rng.getrandbits(64) or 1:016x}"
        attrs = {
            "mlflow.traceRequestId": json.dumps(self.trace_id),
            "mlflow.spanType": json.dumps(span_type),
            "mlflow.spanInputs": json.dumps(inputs, ensure_ascii=False, default=str),
            "mlflow.spanOutputs": json.dumps(outputs, ensure_ascii=False, default=str),
        }
        for k, v in (attributes or {}).items():
            attrs[k] = json.dumps(v, ensure_ascii=False, default=str)
        self.spans.append({
            "trace_id": self.trace_id, "span_id": span_id, "parent_span_id": parent, "name": name,
            "start_time_unix_nano": start_ns, "end_time_unix_nano": end_ns,
            "status": {"code": "ERROR" if error else "OK", "message": error or ""},
            "attributes": attrs, "events": [],
        })
        return span_id


def _documents(rec: dict[str, Any]) -> list[dict[str, Any]]:
    docs = []
    for rank, c in enumerate(rec.get("retrieved_context") or [], start=1):
        if not isinstance(c, dict):
            continue
        docs.append({
            "id": str(c.get("chunk_id", "")),
            "page_content": c.get("text", ""),
            "metadata": {"doc_id": c.get("doc_id"), "chunk_id": c.get("chunk_id"), "rank": rank,
                         "score": c.get("score"), "start": c.get("start"), "end": c.get("end")},
        })
    return docs


def build_trace(rec: dict[str, Any], *, experiment_id: str, run_id: str | None, judge: str, t0_ns: int):
    """(TraceInfo with its assessments, span dicts) of one record."""
    from mlflow.entities import Feedback, TraceInfo, TraceLocation, TraceState

    b = _TraceBuilder(experiment_id)
    gen = rec.get("generation") if isinstance(rec.get("generation"), dict) else {}
    failure = failure_of(rec)
    cached = bool(gen.get("cached"))
    ms = 1_000_000
    t = t0_ns
    latency = gen.get("latency_s")
    gen_ns = int(float(latency) * 1e9) if _is_number(latency) else ms
    total = 3 * ms + gen_ns
    root = b.span(TRACE_NAME, "CHAIN", t, t + total, parent=None,
                  inputs={"query_id": rec.get("query_id"), "query": rec.get("query")},
                  outputs={"response": rec.get("response", "")},
                  attributes={"ragsweep.query_id": rec.get("query_id"), "ragsweep.judge": judge},
                  error=failure["reason"] if failure else None)
    docs = _documents(rec)
    b.span("retrieve", "RETRIEVER", t, t + ms, parent=root, inputs={"query": rec.get("query")}, outputs=docs,
           attributes={"ragsweep.cached": rec.get("retrieval_cached", True), "ragsweep.k": len(docs),
                       "ragsweep.relevant_spans": rec.get("relevant_spans")})
    t += ms
    b.span("prompt", "PARSER", t, t + ms, parent=root,
           inputs={"query": rec.get("query"), "chunk_ids": [d["id"] for d in docs]},
           outputs={"prompt": rec.get("prompt"), "chunks_dropped": rec.get("chunks_dropped", 0)},
           attributes={"ragsweep.cached": True, "ragsweep.chunks_dropped": rec.get("chunks_dropped", 0)})
    t += ms
    gen_error = str(rec["error"]) if rec.get("error") else None
    usage = {}
    if _is_number(gen.get("prompt_tokens")) and _is_number(gen.get("completion_tokens")):
        usage = {"input_tokens": int(gen["prompt_tokens"]), "output_tokens": int(gen["completion_tokens"]),
                 "total_tokens": int(gen["prompt_tokens"]) + int(gen["completion_tokens"])}
    gen_attrs = {"ragsweep.cached": cached, "ragsweep.model": gen.get("model"),
                 "ragsweep.prompt_tokens": gen.get("prompt_tokens"), "ragsweep.completion_tokens": gen.get("completion_tokens"),
                 "ragsweep.latency_s": latency, "ragsweep.finish_reason": gen.get("finish_reason")}
    if usage:
        gen_attrs["mlflow.chat.tokenUsage"] = usage
    if gen.get("model"):
        gen_attrs["mlflow.llm.model"] = gen.get("model")
    b.span("generate", "CHAT_MODEL", t, t + gen_ns, parent=root,
           inputs={"prompt": rec.get("prompt")}, outputs={"response": rec.get("raw_response", rec.get("response", ""))},
           attributes=gen_attrs, error=gen_error)
    t += gen_ns
    judge_error = failure["reason"] if failure and failure["stage"] == "judge" else None
    b.span("evaluate", "EVALUATOR", t, t + ms, parent=root,
           inputs={"response": rec.get("response", ""), "gt_answer": rec.get("gt_answer", "")},
           outputs={**claims_view(rec), "trace": rec.get("trace"), "metrics": rec.get("metrics") or {}},
           attributes={"ragsweep.judge": judge, "ragsweep.cached": rec.get("judge_cached", True),
                       "ragsweep.judge_calls": rec.get("judge_calls"), "ragsweep.failure": failure},
           error=judge_error)

    assessments = []
    for name, value in sorted((rec.get("metrics") or {}).items()):
        if _is_number(value):
            assessments.append(Feedback(name=str(name), value=float(value), source=source_for(str(name), judge)))
    if failure:
        src = source_for("", judge) if failure["stage"] == "judge" else source_for("", CODE_SOURCE)
        assessments.append(Feedback(name="failure", value=f"{failure['stage']}: {failure['reason']}"[:1000], source=src,
                                    rationale=failure["reason"][:4000]))
    meta = {"mlflow.trace_schema.version": "3", "ragsweep.query_id": str(rec.get("query_id"))}
    if run_id:
        meta["mlflow.sourceRun"] = run_id
    info = TraceInfo(
        trace_id=b.trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=t0_ns // ms,
        state=TraceState.ERROR if failure else TraceState.OK,
        request_preview=json.dumps({"query": rec.get("query")}, ensure_ascii=False)[:1000],
        response_preview=json.dumps({"response": rec.get("response", "")}, ensure_ascii=False)[:1000],
        client_request_id=f"{run_id}:{rec.get('query_id')}" if run_id else None,
        execution_duration=total // ms,
        trace_metadata=meta,
        tags={"mlflow.traceName": TRACE_NAME, "ragsweep.query_id": str(rec.get("query_id"))},
        assessments=assessments,
    )
    for a in assessments:
        a.trace_id = b.trace_id
    return info, b.spans


# -- logging ---------------------------------------------------------------------------------------
def _tracing_client(tracker: Any):
    from mlflow.tracing.client import TracingClient

    return TracingClient(tracker.tracking_uri)


def send_traces(tracker: Any, records: Sequence[dict[str, Any]], *, judge: str, run_id: str | None,
                skip_logged: bool = False, spool: bool = True) -> dict[str, Any]:
    """Send one trace per record now, linked to ``run_id``, with its spans and assessments (see
    the module doc); ``skip_logged``: not for questions the run already has a trace of (a
    replayed spool). Never raises: returns ``{"traces", "assessments", "spans", "errors", "spooled",
    "seconds"}``; failures are counted and warned, and records whose trace could not be sent are
    handed to the tracker's spool (when it has one) to be sent on its next start."""
    t0 = time.perf_counter()
    out = {"traces": 0, "assessments": 0, "spans": 0, "errors": 0, "spooled": 0, "seconds": 0.0}
    if not records or tracker is None or not getattr(tracker, "enabled", False) or not run_id:
        return out
    failed: list[dict[str, Any]] = []
    first_error: str | None = None
    try:
        from mlflow.entities import Span

        tc = _tracing_client(tracker)
        exp = str(tracker.experiment_id)
        start_ns = time.time_ns()
        batch: list[tuple[dict[str, Any], Any, list[dict[str, Any]]]] = []
        if skip_logged:
            have = logged_query_ids(tc, exp, run_id)
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
                info, spans = build_trace(rec, experiment_id=exp, run_id=run_id, judge=judge, t0_ns=start_ns + i * 1000)
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
            tracker.spool_traces(run_id, failed, judge)
            out["spooled"] = len(failed)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not spool %d trace(s): %s", len(failed), exc)
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
            tracker.spool_traces(run_id, list(records), judge)
            pid = tracker.send_spool_in_background()
            return {"traces": 0, "assessments": 0, "spans": 0, "errors": 0, "spooled": len(records),
                    "seconds": round(time.perf_counter() - t0, 4), "mode": mode, "sender_pid": pid}
        except Exception as exc:  # noqa: BLE001 - fall back to sending now
            log.warning("could not hand the traces to a background sender (%s); sending them now", exc)
    res = send_traces(tracker, records, judge=judge, run_id=run_id)
    res["mode"] = "sync"
    return res


# -- evaluation table -----------------------------------------------------------------------------
def table_rows(records: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    """Columns of the evaluation table: id, question, ground truth, response, every metric, failure."""
    records = list(records)
    names = sorted({str(k) for r in records for k in (r.get("metrics") or {})})
    cols: dict[str, list[Any]] = {"query_id": [], "question": [], "ground_truth": [], "response": []}
    cols.update({n: [] for n in names})
    cols["failure"] = []
    for r in records:
        cols["query_id"].append(str(r.get("query_id", "")))
        cols["question"].append(r.get("query", ""))
        cols["ground_truth"].append(r.get("gt_answer", ""))
        cols["response"].append(r.get("response", ""))
        m = r.get("metrics") or {}
        for n in names:
            v = m.get(n)
            cols[n].append(float(v) if _is_number(v) else None)
        f = failure_of(r)
        cols["failure"].append(f"{f['stage']}: {f['reason']}" if f else "")
    return cols


def log_eval_table(tracker: Any, records: Sequence[dict[str, Any]], artifact_file: str = TABLE_FILE) -> dict[str, Any]:
    """Log the evaluation table (one row per question) to the tracker's run with ``mlflow.log_table``;
    with ``$RAGSWEEP_MLFLOW_TRACES=background`` (default) through the background sender, like the
    traces. Never raises (returns ``{"rows", "errors", "seconds"}``)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"rows": 0, "errors": 0, "seconds": 0.0}
    if not records or tracker is None or not getattr(tracker, "enabled", False) or not getattr(tracker, "run_id", None):
        return out
    cols = table_rows(records)
    mode = os.environ.get(MODE_ENV, "background").strip().lower()
    try:
        if mode == "background" and hasattr(tracker, "spool"):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "table.json"
                path.write_text(json.dumps(cols, ensure_ascii=False, default=str), encoding="utf-8")
                tracker.spool.put(tracker.run_id, "table", {"artifact_file": artifact_file}, {"data": path})
            out["sender_pid"] = tracker.send_spool_in_background()
        elif hasattr(tracker, "log_table"):
            tracker.log_table(cols, artifact_file)
        else:
            tracker.client.log_table(tracker.run_id, data=cols, artifact_file=artifact_file)
        out["rows"] = len(records)
    except Exception as exc:  # noqa: BLE001 - never fail a run for its table
        out["errors"] += 1
        log.warning("MLflow evaluation table not logged: %s: %s", type(exc).__name__, exc)
    out["seconds"] = round(time.perf_counter() - t0, 4)
    return out
