"""One question's MLflow trace, built as finished entities: the spans (retrieve, prompt, generate,
evaluate, each with the question's own timings) and the assessments (every per-question metric,
the failure, and the ground truth as expectations: :mod:`ragsweep.tracking.genai`). Sending them is :mod:`ragsweep.tracking.traces`."""

from __future__ import annotations

import json
import math
import random
import uuid
from typing import Any, Sequence
from ragsweep import records
from ragsweep.records import Claim, response_of

TRACE_NAME = "ragsweep.question"
CODE_SOURCE = "ragsweep"
RETRIEVAL_SOURCE = "ragsweep.retrieval"
SYSTEM_TAG = "system"  # the run name of the system a question's trace belongs to: a column of the Traces view
# (the view's Tags column shows a trace's first tag by key and "+N": the system is its only visible tag)

_rng = random.Random()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(float(x))


def claim_text(claim: Any) -> str:
    """A claim as text: RAGChecker's triplets ``[s, p, o]`` joined by spaces."""
    return "" if claim is None else Claim.from_json(claim).text


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
    see :mod:`ragsweep.judge.ragchecker_metrics`): a response claim's ``vs_gt`` is
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
    f = records.failure_of(rec)
    return f.to_json() if f is not None else None


# -- what a trace shows: its assessments and its previews -------------------------------------------
METRIC_KEY = "ragsweep.metric"  # an assessment's metadata: the registry name of the metric it holds
#: how the families read in an assessment's name
FAMILY_LABELS = {"ragchecker": "RAGChecker", "trace": "TRACe", "ragas": "RAGAS", "retrieval": "retrieval",
                 "baseline": "baseline"}
#: MLflow keeps a trace's request and response previews to this many characters (its OSS limit)
PREVIEW_CHARS = 1000


def assessment_name(metric: Any) -> str:
    """The name a per-question metric has on a trace: ``faithfulness (RAGChecker)``, ``faithfulness
    (RAGAS)``, ``adherence rate (TRACe)``, ``recall at 4 (retrieval)``. MLflow's UI shows only what
    follows the slash of a name (``ragas/faithfulness`` -> ``faithfulness``), so the registry's
    names showed RAGChecker's and RAGAS's faithfulness as two ``faithfulness``; these are unique
    (the registry's short names are unique within a family) and have no slash."""
    family = FAMILY_LABELS.get(metric.family, metric.family)
    return f"{metric.short.replace('_', ' ')} ({family})"


def rounded(value: float, metric: Any) -> float:
    """``value`` to the digits its scale carries: one decimal on 0-100 (66.7), three on 0-1 (0.667),
    two for a count or an open range."""
    digits = 1 if metric.scale == 100 else 3 if metric.scale == 1 else 2
    return round(float(value), digits)


def question_values(rec: dict[str, Any]) -> list[tuple[Any, float]]:
    """The registry's per-question metrics of one record, on the registry's scale (RAGChecker's in
    0-100, as the run's metric), where defined: (metric, value), by name. The same values the run's
    aggregates are the means of (:func:`ragsweep.analysis.scoring.score_run`)."""
    from ragsweep.judge.metrics import registry

    metrics = rec.get("metrics") or {}
    if not metrics:
        return []
    families = registry.families_in([rec])
    out = []
    for m in registry.all_metrics():
        if m.family not in families or m.per_question is None or (m.family == "retrieval" and m.name not in metrics):
            continue
        try:
            v = registry.values(m, [rec])[0]
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # the record does not carry what this metric reads
        if _is_number(v):
            out.append((m, float(v)))
    return out


def _clip(text: Any, n: int) -> str:
    t = " ".join(str(text or "").split())
    return t if len(t) <= n else t[: max(0, n - 1)] + "…"


def request_preview(rec: dict[str, Any], system: str | None) -> str:
    """The trace's request as the Traces view, a review queue and its review form show it: the system
    that answered, then the question (JSON, as MLflow writes a request)."""
    body = {**({"system": system} if system else {}), "query": rec.get("query")}
    text = json.dumps(body, ensure_ascii=False)
    if len(text) > PREVIEW_CHARS:
        body["query"] = _clip(rec.get("query"), PREVIEW_CHARS - len(text) + len(str(rec.get("query") or "")) - 8)
        text = json.dumps(body, ensure_ascii=False)
    return text[:PREVIEW_CHARS]


def used_chunks(rec: dict[str, Any]) -> list[int]:
    """Indexes of the retrieved chunks the answer used: those the judge found entailing some claim
    of the response (``retrieved2response``), in rank order."""
    used: set[int] = set()
    for row in rec.get("retrieved2response") or []:
        for j, label in enumerate(row if isinstance(row, list) else []):
            if label == "Entailment":
                used.add(j)
    return sorted(used)


def response_preview(rec: dict[str, Any]) -> str:
    """The trace's response as the Traces view and a review queue's form show it (Markdown, at most
    :data:`PREVIEW_CHARS`): the answer, then what a person labelling it needs beside it: the
    ground-truth answer and the retrieved chunks the answer used (the judge's reading; every chunk
    when it found none, or on a retrieval-only run), each clipped to fit; the whole chunks and
    claims are in the trace's ``retrieve`` and ``evaluate`` spans."""
    answer = response_of(rec)
    gt = rec.get("gt_answer") or ""
    chunks = [c for c in rec.get("retrieved_context") or [] if isinstance(c, dict)]
    used = used_chunks(rec) if answer else []
    shown = [j for j in used if j < len(chunks)] or list(range(len(chunks)))
    head = _clip(answer, 300) if answer else "*(no answer: retrieval only)*"
    parts = [head, "", f"**Ground truth:** {_clip(gt, 200) if gt else '*(none)*'}", ""]
    what = (f"**Retrieved chunks the answer used** ({len(shown)} of {len(chunks)}):" if used and answer
            else f"**Retrieved chunks** ({len(chunks)}; the judge found none the answer used):" if answer
            else f"**Retrieved chunks** ({len(chunks)}):")
    parts.append(what)
    text = "\n".join(parts)
    heads = [f"{j + 1}. `{_clip(chunks[j].get('doc_id'), 40)}` " for j in shown]
    room = PREVIEW_CHARS - len(text) - sum(len(h) + 1 for h in heads)
    lines = []
    for i, (j, h) in enumerate(zip(shown, heads)):
        per = room // (len(shown) - i)  # what is left, shared by the chunks still to show
        if per < 20:
            break
        line = h + _clip(chunks[j].get("text"), per)
        room -= len(line) - len(h)
        lines.append(line)
    return (text + ("\n" + "\n".join(lines) if lines else ""))[:PREVIEW_CHARS]


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
                         "score": c.get("score"), "start": c.get("start"), "end": c.get("end"),
                         **({"where": c["where"]} if c.get("where") else {})},
        })
    return docs


def own_timings(rec: dict[str, Any], t0_ns: int) -> dict[str, tuple[int, int]]:
    """``{stage: (start_ns, end_ns)}`` of one question's spans, from its own measurements only.

    ``generate`` is the request's own: sent at ``generation.started_at`` (after waiting for a free
    client slot), lasting the server's reported processing time (``server_s``: llama.cpp's
    ``timings``, which leaves out the time the request queued inside the server) or else its round
    trip (``request_s``); ``prompt`` is the question's own prompt fitting (``timings.prompt_s``),
    laid just before it. Retrieval and judging run over the whole batch at once, so a question has
    no time of its own there: those spans have no length (attribute ``ragsweep.timing``). The
    spans lie end to end, so the trace's duration is the question's own time, not the time it
    waited for the other questions. A cached generation took no time in this run (its original
    time is the attribute ``ragsweep.original_s``). Records without these fields (older runs)
    start at ``t0_ns`` with ``latency_s`` as the generation time.
    """
    gen = rec.get("generation") if isinstance(rec.get("generation"), dict) else {}
    timings = rec.get("timings") if isinstance(rec.get("timings"), dict) else {}
    us = 1_000
    prompt_ns = int(float(timings["prompt_s"]) * 1e9) if _is_number(timings.get("prompt_s")) else 0
    if gen.get("cached"):
        gen_ns = 0
    else:
        own = next((gen[k] for k in ("server_s", "request_s", "latency_s") if _is_number(gen.get(k))), None)
        gen_ns = int(float(own) * 1e9) if own is not None else 0
    start = t0_ns
    if _is_number(gen.get("started_at")) and not gen.get("cached"):
        sent_ns = int(float(gen["started_at"]) * 1e9)
        queued_ns = 0  # time inside the server's own queue: the round trip less the server's time
        if _is_number(gen.get("server_s")) and _is_number(gen.get("request_s")):
            queued_ns = max(0, int((float(gen["request_s"]) - float(gen["server_s"])) * 1e9))
        start = sent_ns + queued_ns - prompt_ns
    out = {"retrieve": (start, start), "prompt": (start, start + prompt_ns)}
    g0 = start + prompt_ns
    out["generate"] = (g0, g0 + max(gen_ns, us))
    e0 = out["generate"][1]
    out["evaluate"] = (e0, e0)
    out["question"] = (start, e0)
    return out


def build_trace(rec: dict[str, Any], *, experiment_id: str, run_id: str | None, judge: str, t0_ns: int,
                system: str | None = None):
    """(TraceInfo with its assessments, span dicts) of one record; ``system``: the run's name (a
    tag, so the Traces view tells the systems of a sweep apart)."""
    from mlflow.entities import Feedback, TraceInfo, TraceLocation, TraceState

    b = _TraceBuilder(experiment_id)
    gen = rec.get("generation") if isinstance(rec.get("generation"), dict) else {}
    failure = failure_of(rec)
    cached = bool(gen.get("cached"))
    ms = 1_000_000
    latency = gen.get("latency_s")
    when = own_timings(rec, t0_ns)
    batched = "batched: the whole run's stage, no time of its own per question"
    root = b.span(TRACE_NAME, "CHAIN", *when["question"], parent=None,
                  inputs={"query_id": rec.get("query_id"), "query": rec.get("query")},
                  outputs={"response": response_of(rec)},
                  attributes={"ragsweep.query_id": str(rec.get("query_id")), "ragsweep.judge": judge,
                              "ragsweep.system": system},
                  error=failure["reason"] if failure else None)
    docs = _documents(rec)
    b.span("retrieve", "RETRIEVER", *when["retrieve"], parent=root, inputs={"query": rec.get("query")}, outputs=docs,
           attributes={"ragsweep.cached": rec.get("retrieval_cached", True), "ragsweep.k": len(docs),
                       "ragsweep.relevant_spans": rec.get("relevant_spans"), "ragsweep.timing": batched})
    b.span("prompt", "PARSER", *when["prompt"], parent=root,
           inputs={"query": rec.get("query"), "chunk_ids": [d["id"] for d in docs]},
           outputs={"prompt": rec.get("prompt"), "chunks_dropped": rec.get("chunks_dropped", 0)},
           attributes={"ragsweep.cached": True, "ragsweep.chunks_dropped": rec.get("chunks_dropped", 0)})
    gen_error = str(rec["error"]) if rec.get("error") else None
    usage = {}
    if _is_number(gen.get("prompt_tokens")) and _is_number(gen.get("completion_tokens")):
        usage = {"input_tokens": int(gen["prompt_tokens"]), "output_tokens": int(gen["completion_tokens"]),
                 "total_tokens": int(gen["prompt_tokens"]) + int(gen["completion_tokens"])}
    gen_attrs = {"ragsweep.cached": cached, "ragsweep.model": gen.get("model"),
                 "ragsweep.prompt_tokens": gen.get("prompt_tokens"), "ragsweep.completion_tokens": gen.get("completion_tokens"),
                 "ragsweep.latency_s": latency, "ragsweep.finish_reason": gen.get("finish_reason"),
                 "ragsweep.request_s": gen.get("request_s"), "ragsweep.server_s": gen.get("server_s")}
    if cached:
        gen_attrs["ragsweep.original_s"] = next((gen[k] for k in ("server_s", "request_s", "latency_s") if _is_number(gen.get(k))), None)
    if usage:
        gen_attrs["mlflow.chat.tokenUsage"] = usage
    if gen.get("model"):
        gen_attrs["mlflow.llm.model"] = gen.get("model")
    b.span("generate", "CHAT_MODEL", *when["generate"], parent=root,
           inputs={"prompt": rec.get("prompt")}, outputs={"response": rec.get("raw_response", response_of(rec))},
           attributes=gen_attrs, error=gen_error)
    judge_error = failure["reason"] if failure and failure["stage"] == "judge" else None
    b.span("evaluate", "EVALUATOR", *when["evaluate"], parent=root,
           inputs={"response": response_of(rec), "gt_answer": rec.get("gt_answer", "")},
           outputs={**claims_view(rec), "trace": rec.get("trace"), "metrics": rec.get("metrics") or {}},
           attributes={"ragsweep.judge": judge, "ragsweep.cached": rec.get("judge_cached", True),
                       "ragsweep.judge_calls": rec.get("judge_calls"), "ragsweep.failure": failure,
                       "ragsweep.timing": batched},
           error=judge_error)

    assessments = []
    for metric, value in question_values(rec):
        assessments.append(Feedback(name=assessment_name(metric), value=rounded(value, metric),
                                    source=source_for(metric.name, judge), metadata={METRIC_KEY: metric.name}))
    if failure:
        src = source_for("", judge) if failure["stage"] == "judge" else source_for("", CODE_SOURCE)
        assessments.append(Feedback(name="failure", value=f"{failure['stage']}: {failure['reason']}"[:1000], source=src,
                                    rationale=failure["reason"][:4000]))
    from ragsweep.tracking.genai import expectation_entities

    assessments += expectation_entities(rec)  # the ground truth, where MLflow's own judges read it
    meta = {"mlflow.trace_schema.version": "3", "ragsweep.query_id": str(rec.get("query_id"))}
    if run_id:
        meta["mlflow.sourceRun"] = run_id
    info = TraceInfo(
        trace_id=b.trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=when["question"][0] // ms,
        state=TraceState.ERROR if failure else TraceState.OK,
        request_preview=request_preview(rec, system),
        response_preview=response_preview(rec),
        client_request_id=f"{run_id}:{rec.get('query_id')}" if run_id else None,
        execution_duration=max(1, (when["question"][1] - when["question"][0]) // ms),
        trace_metadata=meta,
        # the question id lives in the metadata (where ragsweep reads it), not in the tags: the view's
        # Tags column shows one pill per trace, the first by key, and it must be the system's
        tags={**({SYSTEM_TAG: system} if system else {}), "mlflow.traceName": TRACE_NAME},
        assessments=assessments,
    )
    for a in assessments:
        a.trace_id = b.trace_id
    return info, b.spans
