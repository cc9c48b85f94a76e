"""The stages of one job, in the order they run, each a function with typed inputs and outputs:

    chunk -> index -> retrieve -> prompts -> generate -> records -> judge (judging.py) -> log (system.py)

:class:`Job` carries what every stage reads (the config, the shared cache, the stage timer, the
tracker and the model server) and the metrics they add. A full run, a retrieval-only run
(``generator=none``: :meth:`Generation.nothing` instead of a server) and a sweep's jobs (one shared
server) are the same stages composed differently (:func:`ragsweep.pipeline.system.run_job`).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from hydra.utils import instantiate
from omegaconf import DictConfig

from ragsweep import signals
from ragsweep.corpus.place import placer  # a parsed file's chunk as "file p. N, § Heading"
from ragsweep.corpus.dataset.doctable import titles_of  # the retrieved chunks' titles, no corpus parse
from ragsweep.judge import ledger
from ragsweep.pipeline import retrieval_only
from ragsweep.pipeline.summary import Stages, quiet
from ragsweep.records import response_of, set_response
from ragsweep.store.cache import Cache
from ragsweep.tracking import Tracker
from ragsweep.types import Chunk, Dataset, Hit

log = logging.getLogger("ragsweep")


@dataclass
class Job:
    """One RAG system's run in progress: what every stage reads, and the metrics they add."""

    cfg: DictConfig
    top: Any  # the validated top-level config (cache_dir, mlflow, max_failure_rate ...)
    timer: Stages
    tracker: Tracker
    cache: Cache
    server: Any = None  # the model server: a sweep's shared one, or this job's own (own_server)
    own_server: bool = False
    retro: bool = False  # retrieval-only: no server, nothing generated
    metrics: dict[str, float] = field(default_factory=dict)
    budget: Any = None  # what this job's model calls may spend (budget_usd, sweep.budget_usd: pipeline.spend)
    dry_run: bool = False  # --dry-run: the estimate, and no model call
    in_sweep: bool = False  # a job of a multirun (the sweep printed its estimate)

    @classmethod
    def open(cls, cfg: DictConfig, top: Any, timer: Stages, tracker: Tracker, server: Any = None) -> "Job":
        """A job with its cache open; its own model server built and checked (a missing model file,
        executable or API key, a taken port fail here, before any work) unless a sweep shares one."""
        from ragsweep.rag import devices

        devices.plan(cfg)  # device=auto stays on the CPU beside a vLLM server of this run on the same GPU
        retro = retrieval_only.enabled(cfg)
        own = server is None and not retro
        dry = bool((top.sweep or {}).get("dry_run"))
        if own:
            server = instantiate(cfg.generator.server)
            if hasattr(server, "check") and not dry:  # a dry run calls nothing: no key needed
                server.check()
        return cls(cfg, top, timer, tracker, Cache(top.cache_dir), server, own, retro, dry_run=dry)


@dataclass
class Retrieval:
    """Each question's hits at ``depth`` (reranked to ``k`` when a reranker is set), and its
    retrieval metrics where the dataset labels relevance."""

    hits: dict[str, list[Hit]]
    k: int
    per_question: dict[str, dict[str, float]]


@dataclass
class Prompts:
    """One prompt per question (dataset order), the chunks each kept, and what fitting dropped."""

    template: Any  # the PromptTemplate
    texts: list[str]
    hits: dict[str, list[Hit]]
    dropped: dict[str, int]
    seconds: dict[str, float]


@dataclass
class Generation:
    """The generator's result per prompt, its client's counters, and how a managed server ended."""

    outputs: list[Any]  # ChatResult per prompt
    requests: int
    stats: dict[str, int]
    model: str | None = None
    death: str | None = None
    restarts: int = 0  # server processes restarted after they died during the calls (own server)

    @classmethod
    def nothing(cls, n: int) -> "Generation":
        """A retrieval-only run's generation: an empty, successful answer per question, no call."""
        return cls(retrieval_only.no_outputs(n), 0, {})


def chunk(job: Job, dataset: Dataset) -> Sequence[Chunk]:
    with job.timer("chunk"):  # the chunker shows its own per-document bar on a cache miss
        chunks = instantiate(job.cfg.chunker).chunk(dataset.documents, cache=job.cache)
    job.metrics["data/chunks"] = len(chunks)
    return chunks


def index(job: Job, chunks: Sequence[Chunk]) -> Any:
    retriever = instantiate(job.cfg.retriever)
    with job.timer("index", total=len(chunks), unit="chunks") as bar:
        retriever.index(chunks, cache=job.cache, progress=bar)  # BM25 / dense encoding advance the bar
        bar.update(len(chunks) - bar.n)
    return retriever


def retrieve(job: Job, retriever: Any, dataset: Dataset, chunks: Sequence[Chunk]) -> Retrieval:
    """Top ``depth`` hits per question, reranked to ``k`` (the reranker's ``depth`` when set)."""
    cfg = job.cfg
    k = int(cfg.retriever.top_k)
    reranker = instantiate(cfg.reranker) if "reranker" in cfg else None  # retrieve `depth`, rerank to k
    depth = max(k, min(getattr(reranker, "depth", None) or k, len(chunks)))
    with job.timer("retrieve", total=len(dataset.queries), unit="questions") as bar:
        hits = retriever.search(dataset.queries, k=depth, cache=job.cache)
        if reranker is not None:
            hits = reranker.rerank(dataset.queries, hits, k, cache=job.cache)
        bar.update(len(dataset.queries))
    per_q = retrieval_per_question(hits, dataset.queries, k, chunks) if dataset.has_relevance else {}
    return Retrieval(hits, k, per_q)


def retrieval_per_question(results: Any, queries: Any, k: int, chunks: Any) -> dict[str, dict[str, float]]:
    """Per query id: the retrieval metrics at the run's k (``retrieval/<m>_at_k``) and at the fixed
    cutoffs up to k (``retrieval/<m>_at_<c>``); only queries with relevance labels."""
    from ragsweep.judge.metrics.retrieval import retrieval_metrics_per_query
    from ragsweep.judge.metrics.retrieval_registry import cutoffs

    out: dict[str, dict[str, float]] = {}
    for depth, suffix in [(k, "k")] + [(c, str(c)) for c in cutoffs(k)]:
        for qid, vals in retrieval_metrics_per_query(results, queries, depth, chunks=chunks).items():
            row = out.setdefault(qid, {})
            for name, value in vals.items():
                row[f"retrieval/{name.split('@')[0]}_at_{suffix}"] = value
    return out


@contextmanager
def serving(job: Job) -> Iterator[None]:
    """The job's own model server runs inside; stopped after, its logs kept with the run's
    artifacts (``server/``). A sweep's shared server is the sweep's to start and stop; a dry run
    starts none (its prompts need the model's context window and tokenizer, not the server)."""
    if not job.own_server or job.dry_run:
        if not job.own_server and not job.dry_run:
            _log_served(job)  # the sweep's shared server: what answered is this run's too
        yield
        return
    try:
        with job.timer("server_start"):
            job.server.start()
        _log_served(job)
        yield
    finally:
        job.server.stop()
        for path in [p for p in getattr(job.server, "log_paths", ()) if Path(p).is_file()]:
            job.tracker.log_file(path, "server")  # each server process's own log, beside the records


def _log_served(job: Job) -> None:
    """What answers, as the run's ``served/*`` params (llama.cpp: the weight format, the CPU
    variant, the engine, processes and slots): answers differ between them."""
    served = getattr(job.server, "served", None) or {}
    job.tracker.log_params({f"served/{k}": v for k, v in served.items()})


def prompts(job: Job, dataset: Dataset, retrieval: Retrieval) -> Prompts:
    """Each question's prompt, fitted into the model's context (``prompt.fit``: the lowest-ranked
    chunks dropped, counted and logged, never cut silently)."""
    from ragsweep.rag.tokens import counter_for, estimate

    template = instantiate(job.cfg.prompt)
    titles = titles_of(dataset.documents, {h.chunk.doc_id for hits in retrieval.hits.values() for h in hits})
    window = getattr(job.server, "context_window", None)
    budget = int(window) - int(job.cfg.generator.max_tokens) - 32 if window else None  # chat template overhead
    count = counter_for(job.server) if budget else estimate
    out = Prompts(template, [], {}, {}, {})
    with job.timer("prompt"):
        for q in dataset.queries:
            t_fit = time.perf_counter()  # each question's own prompt time (its trace's span)
            text, hits, n_drop = template.fit(q.query, retrieval.hits[q.query_id], budget, count, titles)
            out.seconds[q.query_id] = time.perf_counter() - t_fit
            out.texts.append(text)
            out.hits[q.query_id] = hits
            out.dropped[q.query_id] = n_drop
    dropped = sum(out.dropped.values())
    if dropped:
        log.warning("prompt.fit=drop_lowest dropped %d lowest-ranked chunk(s) to fit the model's context", dropped)
    job.metrics["prompt/chunks_dropped"] = dropped
    return out


def requests(job: Job, prompts: Prompts) -> list[Any]:
    """One chat request per prompt, with the generator's sampling settings."""
    from ragsweep.rag.generator import GeneratorConfig
    from ragsweep.rag.generator.client import ChatRequest

    gen_cfg = job.cfg.generator
    stop = GeneratorConfig.from_config(gen_cfg).request_defaults()["stop"]  # a string or a list of them
    return [
        ChatRequest(
            messages=tuple((m["role"], m["content"]) for m in prompts.template.messages(p)),
            temperature=float(gen_cfg.temperature),
            max_tokens=int(gen_cfg.max_tokens),
            seed=gen_cfg.seed,
            stop=stop,
        )
        for p in prompts.texts
    ]


def generate(job: Job, prompts: Prompts, attempt: Sequence[bool] | None = None) -> Generation:
    """Every prompt through the generator's client (cached, concurrent, retried); an interrupt wins
    over the calls it failed, and a managed server that died under the calls is named. ``attempt``:
    the prompts the budget is expected to cover (:func:`ragsweep.pipeline.spend.estimate`); the
    others are not sent (``ChatResult.skipped``)."""
    from ragsweep.rag.generator import build_client
    from ragsweep.rag.generator.client import ChatResult

    client = build_client(job.cfg.generator, job.server, job.cache, progress=not quiet(), budget=job.budget)
    reqs = requests(job, prompts)
    attempt = list(attempt) if attempt is not None else [True] * len(reqs)
    with job.timer("generate"):
        sent = client.chat_many([r for r, a in zip(reqs, attempt) if a], desc=f"{'generate':<9}")
    client.close()
    answers = iter(sent)
    skipped = "not attempted: the budget is expected to be spent before it (see the estimate)"
    outs = [next(answers) if a else ChatResult(text=None, error=skipped, skipped=True) for a in attempt]
    signals.raise_if_interrupted()  # calls that failed because Ctrl-C stopped the server are no failures
    death = job.server.death() if job.own_server and hasattr(job.server, "death") else None
    if death:
        log.error("%s during generation", death)
    restarts = job.server.restart_count() if job.own_server and hasattr(job.server, "restart_count") else 0
    if restarts:
        log.warning("%d model server process(es) restarted during generation after they died; every request they "
                    "had was sent again (generator/server_restarts)", restarts)
    model = getattr(job.server, "model_name", None)
    return Generation(outs, len(reqs), dict(client.stats), str(model) if model else None, death, restarts)


def records(job: Job, dataset: Dataset, prompts: Prompts, generation: Generation) -> list[dict[str, Any]]:
    """One RAGChecker-schema record per question; a failed generation is marked for the ledger
    (excluded from every answer metric and from the judge), never scored as an empty answer."""
    from ragsweep.rag.generator.client import extract_answer

    tag = prompts.template.config.answer_tag
    where = placer(dataset.documents, {h.chunk.doc_id for hits in prompts.hits.values() for h in hits})
    out = []
    for q, res, text in zip(dataset.queries, generation.outputs, prompts.texts):
        rec: dict[str, Any] = {
            "query_id": q.query_id,
            "query": q.query,
            "gt_answer": q.gt_answer or "",
            "response": "",
            "retrieved_context": retrieved_context(prompts.hits[q.query_id], where),
            "prompt": text,
            "chunks_dropped": prompts.dropped[q.query_id],
            "relevant_spans": [{"doc_id": s.doc_id, "start": s.start, "end": s.end} for s in q.relevant],
            "generation": {"model": generation.model, "prompt_tokens": res.prompt_tokens,
                           "completion_tokens": res.completion_tokens, "latency_s": round(res.seconds, 4),
                           "cached": res.cached, "finish_reason": res.finish_reason,
                           "started_at": res.started_at, "request_s": res.request_s, "server_s": res.server_s},
            "timings": {"prompt_s": round(prompts.seconds[q.query_id], 6)},
        }
        if res.skipped:  # the budget: not a failure, never scored, resumed by a run with a higher budget
            rec["failure"] = {"stage": ledger.BUDGET, "reason": f"budget reached before its generation ({res.error})"}
        elif res.ok:
            answer = extract_answer(res.text, tag) if tag else res.text.strip()
            set_response(rec, answer)
            if answer != res.text:
                rec["raw_response"] = res.text
        else:
            rec["error"] = res.error
            rec["failure"] = {"stage": ledger.GENERATION, "reason": str(res.error)}
        out.append(rec)
    s = generation.stats
    job.metrics.update({
        "generator/requests": generation.requests,
        "generator/calls": s.get("calls", 0),
        "generator/cache_hits": s.get("cache_hits", 0),
        "generator/failures": sum(1 for r in out if "error" in r),
        "generator/retries": s.get("retries", 0),
        "generator/rate_limited": s.get("rate_limited", 0),
        "generator/endpoint_outages": s.get("endpoint_outages", 0),
        "generator/server_restarts": generation.restarts,
        "generator/budget_skipped": sum(1 for r in generation.outputs if r.skipped),
        "generator/prompt_tokens": s.get("prompt_tokens", 0),
        "generator/completion_tokens": s.get("completion_tokens", 0),
        "generator/empty_responses": sum(1 for r in out if not response_of(r) and "failure" not in r),
    })
    return out


def retrieved_context(hits: Sequence[Hit], where: Any = lambda doc_id, start: None) -> list[dict[str, Any]]:
    """The chunks as records carry them; ``where``: a parsed file's "file p. N, § Heading" (corpus.place)."""
    return [
        {"doc_id": h.chunk.doc_id, "text": h.chunk.text, "chunk_id": h.chunk.chunk_id, "start": h.chunk.start,
         "end": h.chunk.end, "score": h.score, **({"where": w} if (w := where(h.chunk.doc_id, h.chunk.start)) else {})}
        for h in hits
    ]
