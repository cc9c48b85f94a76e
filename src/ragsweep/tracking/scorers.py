"""ragsweep's claim-level judge as MLflow GenAI scorers: score any app's traces (with a RETRIEVER
span) in ``mlflow.genai.evaluate`` with RAGChecker's, TRACe's and the RAGAS-style metrics,
without a sweep::

    import mlflow, ragsweep
    mlflow.genai.evaluate(data=mlflow.search_traces(...), scorers=ragsweep.mlflow_scorers())

Each scorer is one metric of ragsweep's registry (its name, e.g. ``ragchecker/retriever/claim_recall``,
on the registry's scale: RAGChecker's in 0-100, the others in 0-1). A trace is read as a
RAGChecker record: the question from the inputs, the response from the outputs, the retrieved
chunks from every RETRIEVER span's documents, the ground truth from the ``expected_response``
(else ``expected_facts``) expectation. All scorers of one :func:`mlflow_scorers` call share one
judge: a trace is judged once (claims, entailment checks, TRACe, RAGAS) whatever the number of
metrics, through ragsweep's cache, so scoring the same traces again makes no new check.
"""

from __future__ import annotations

import json
import math
import os
import threading
from typing import Any, Iterable, Mapping

from ragsweep.tracking.genai import EXPECTED_FACTS, EXPECTED_RESPONSE

#: the metric families a scorer set covers by default (retrieval/* needs span labels, baseline/* is lexical)
FAMILIES = ("ragchecker", "trace", "ragas")
#: per-question metrics that are no judgment of the answer (a count) or need another mode
SKIPPED = ("ragchecker/overall/n_response_claims", "trace/overall_supported")
SOURCE = "ragsweep"


class ScorerError(ValueError):
    """A bad metric name or evaluator setting for :func:`mlflow_scorers`."""


def metric_names(metrics: Iterable[str] | None = None, families: Iterable[str] = FAMILIES) -> list[str]:
    """The registry's per-question metrics of ``families`` (or exactly ``metrics``, checked)."""
    from ragsweep.judge.metrics import registry

    registry.load_all()
    known = {m.name: m for m in registry.all_metrics() if m.per_question is not None}
    if metrics is not None:
        names = list(metrics)
        bad = [n for n in names if n not in known]
        if bad:
            raise ScorerError(f"metrics: {bad[0]!r} is not a per-question metric of ragsweep's registry "
                              f"(e.g. {', '.join(sorted(n for n in known if n.startswith('ragchecker/'))[:4])}; docs/metrics.md)")
        return names
    fams = set(families)
    return sorted(n for n, m in known.items() if m.family in fams and n not in SKIPPED)


def build_evaluator(evaluator: Any = None) -> Any:
    """The judge: ``None`` (the offline default: no network, no GPU), an ``Evaluator``, a mapping of
    its config (``{"name": "llm", "extractor": "llm", "checker": "llm", "judge": {...}}``), or
    command-line overrides of the ``evaluator`` group (``"evaluator=llm evaluator.judge.model=..."``)."""
    from hydra.utils import instantiate

    from ragsweep.judge.core import Evaluator

    if evaluator is None:
        return Evaluator()
    if isinstance(evaluator, Evaluator):
        return evaluator
    if isinstance(evaluator, str):
        from ragsweep.conf import compose

        ovs = evaluator.split()
        bad = [o for o in ovs if not o.lstrip("+~").startswith("evaluator")]
        if bad:
            raise ScorerError(f"evaluator: {bad[0]!r} is not an override of the evaluator group (evaluator=llm, evaluator.judge...)")
        return instantiate(compose(ovs).evaluator)
    if isinstance(evaluator, Mapping):
        kwargs = {k: v for k, v in evaluator.items() if k != "_target_"}
        return Evaluator(**kwargs)
    raise ScorerError(f"evaluator: expected None, an Evaluator, a mapping or overrides, got {type(evaluator).__name__}")


# -- a trace as a record ------------------------------------------------------------------------------
def _text(x: Any) -> str | None:
    if x is None:
        return None
    if isinstance(x, str):
        return x
    if isinstance(x, Mapping):
        for key in ("question", "query", "response", "answer", "output", "content", "text", "request"):
            if isinstance(x.get(key), str):
                return x[key]
        choices = x.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):  # a chat completion
            msg = choices[0].get("message") or {}
            if isinstance(msg.get("content"), str):
                return msg["content"]
        msgs = x.get("messages")
        if isinstance(msgs, list) and msgs and isinstance(msgs[-1], Mapping) and isinstance(msgs[-1].get("content"), str):
            return msgs[-1]["content"]
        texts = [v for v in x.values() if isinstance(v, str)]
        if len(texts) == 1:
            return texts[0]
    return json.dumps(x, ensure_ascii=False, default=str)


def _documents(trace: Any) -> list[dict[str, Any]]:
    """The chunks of every RETRIEVER span, in order: ``{doc_id, text}`` (MLflow's Document shape:
    ``page_content``, ``metadata.doc_uri``; also ``text`` / ``content`` / plain strings)."""
    from mlflow.entities import SpanType

    out: list[dict[str, Any]] = []
    if trace is None:
        return out
    for span in trace.search_spans(span_type=SpanType.RETRIEVER):
        docs = span.outputs
        if isinstance(docs, Mapping):
            docs = docs.get("documents") or docs.get("chunks") or [docs]
        for i, d in enumerate(docs if isinstance(docs, list) else []):
            if isinstance(d, str):
                out.append({"doc_id": f"{span.name}:{i}", "text": d})
                continue
            if not isinstance(d, Mapping):
                continue
            meta = d.get("metadata") or {}
            text = d.get("page_content") or d.get("text") or d.get("content") or ""
            doc_id = meta.get("doc_uri") or meta.get("doc_id") or d.get("id") or d.get("doc_id") or f"{span.name}:{i}"
            out.append({"doc_id": str(doc_id), "text": str(text)})
    return out


def _trace_expectations(trace: Any) -> dict[str, Any]:
    if trace is None:
        return {}
    return {a.name: a.value for a in (trace.info.assessments or [])
            if getattr(a, "expectation", None) is not None and getattr(a, "valid", True) is not False}


def record_of(inputs: Any = None, outputs: Any = None, expectations: Mapping[str, Any] | None = None,
              trace: Any = None) -> dict[str, Any]:
    """A RAGChecker record from what ``mlflow.genai.evaluate`` hands a scorer."""
    root = trace.data.spans[0] if trace is not None and trace.data.spans else None
    root = next((s for s in trace.data.spans if s.parent_id is None), root) if trace is not None else None
    if inputs is None and root is not None:
        inputs = root.inputs
    if outputs is None and root is not None:
        outputs = root.outputs
    exp = dict(expectations or {}) or _trace_expectations(trace)
    gt = exp.get(EXPECTED_RESPONSE)
    if gt is None and isinstance(exp.get(EXPECTED_FACTS), list):
        gt = " ".join(str(f) for f in exp[EXPECTED_FACTS])
    qid = trace.info.trace_id if trace is not None else str(hash(json.dumps([inputs, outputs], default=str)))
    return {"query_id": qid, "query": _text(inputs) or "", "gt_answer": gt or "", "response": _text(outputs) or "",
            "retrieved_context": _documents(trace)}


# -- the scorers ---------------------------------------------------------------------------------------
class SharedJudge:
    """One evaluator and cache for a set of scorers; a record is judged once (by its content)."""

    def __init__(self, evaluator: Any, cache_dir: str | os.PathLike | None):
        from ragsweep.store.cache import Cache

        self.evaluator = evaluator
        self.cache = Cache(cache_dir or os.environ.get("RAGSWEEP_CACHE_DIR", ".ragsweep_cache"))
        self.judge_id = str(getattr(getattr(evaluator, "config", None), "name", None) or "offline")
        self._lock = threading.Lock()
        self._done: dict[str, dict[str, Any]] = {}

    def judged(self, rec: dict[str, Any]) -> dict[str, Any]:
        key = json.dumps(rec, sort_keys=True, default=str)
        with self._lock:  # mlflow.genai.evaluate runs scorers in threads: one judging per record
            if key not in self._done:
                out, _ = self.evaluator.evaluate([rec], cache=self.cache)
                self._done[key] = out[0]
            return self._done[key]


def _scorer_class():
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.genai.scorers import Scorer
    from pydantic import PrivateAttr

    from ragsweep.judge.metrics import registry

    class RagsweepScorer(Scorer):
        """One metric of ragsweep's registry, judged by the shared :class:`SharedJudge`."""

        _shared: Any = PrivateAttr(default=None)

        def __call__(self, *, inputs: Any = None, outputs: Any = None, expectations: Any = None, trace: Any = None):
            rec = record_of(inputs, outputs, expectations, trace)
            judged = self._shared.judged(rec)
            metric = registry.find(self.name)
            kind = AssessmentSourceType.LLM_JUDGE if "llm" in self._shared.judge_id.lower() else AssessmentSourceType.CODE
            src = AssessmentSource(source_type=kind, source_id=f"{SOURCE}:{self._shared.judge_id}")
            value = registry.values(metric, [judged])[0]
            if value is None or not math.isfinite(float(value)):
                why = ("needs a ground truth: add an expected_response or expected_facts expectation" if metric.needs_gt
                       and not rec["gt_answer"] else "undefined for this trace (no claims, no retrieved chunk, or the judge failed)")
                return Feedback(name=self.name, source=src,
                                error=AssessmentError(error_code="UNDEFINED", error_message=f"{self.name}: {why}"))
            from ragsweep.tracking.trace_build import rounded

            return Feedback(name=self.name, value=rounded(value, metric), source=src, rationale=rationale(judged, rec))

    return RagsweepScorer


def rationale(judged: Mapping[str, Any], rec: Mapping[str, Any]) -> str:
    """The claims behind a value, one line each, as the judge labelled them."""
    from ragsweep.tracking.trace_build import claims_view

    view = claims_view(dict(judged))
    lines = [f"{len(rec['retrieved_context'])} retrieved chunk(s)"]
    for c in view["response_claims"][:12]:
        lines.append(f"response claim: {c['claim']!r} vs ground truth {c['vs_gt']}, "
                     f"entailed by chunk(s) {[i for i, v in enumerate(c['vs_chunks']) if v == 'Entailment']}")
    for c in view["gt_answer_claims"][:12]:
        lines.append(f"ground-truth claim: {c['claim']!r} vs response {c['vs_response']}, "
                     f"entailed by chunk(s) {[i for i, v in enumerate(c['vs_chunks']) if v == 'Entailment']}")
    return "\n".join(lines)[:4000]


def mlflow_scorers(metrics: Iterable[str] | None = None, *, evaluator: Any = None, families: Iterable[str] = FAMILIES,
                   cache_dir: str | os.PathLike | None = None) -> list[Any]:
    """ragsweep's metrics as MLflow ``Scorer`` objects for ``mlflow.genai.evaluate``.

    ``metrics``: registry names (default: every per-question metric of ``families``: RAGChecker's
    overall precision / recall / F1, claim recall, context precision, faithfulness, hallucination,
    noise sensitivity, self-knowledge, context utilization; TRACe's adherence, utilization,
    relevance, completeness; the RAGAS-style faithfulness, answer and context relevance).
    ``evaluator``: the judge (:func:`build_evaluator`; default offline, or an LLM endpoint through
    ``evaluator=llm`` overrides or an ``Evaluator``). ``cache_dir``: ragsweep's cache (default
    ``$RAGSWEEP_CACHE_DIR`` or ``.ragsweep_cache``). A metric a trace cannot have (no ground truth,
    no claims) is an assessment with an error that says why, never a guessed 0.
    """
    names = metric_names(metrics, families)
    shared = SharedJudge(build_evaluator(evaluator), cache_dir)
    cls = _scorer_class()
    out = []
    for n in names:
        s = cls(name=n)
        s._shared = shared
        out.append(s)
    return out
