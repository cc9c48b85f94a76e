"""One RAG system, end to end: dataset -> chunks -> index -> retrieve -> prompt -> generate ->
(evaluate) -> MLflow. Every stage goes through the shared content-addressed cache."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragsweep.cache import Cache
from ragsweep.config import flatten, validate
from ragsweep.dataset.doctable import titles_of  # the retrieved chunks' titles, no corpus parse
from ragsweep import ledger, retrieval_only, signals
from ragsweep.errors import FailureRateExceeded
from ragsweep.metrics import registry
from ragsweep.rag import devices
from ragsweep.scoring import score_run
from ragsweep.summary import RunResult, Stages, quiet
from ragsweep.tracking import Tracker, finished_child, short_params, system_key, system_name
from ragsweep.records import response_of, set_response

log = logging.getLogger("ragsweep")


def share_judge_server(cfg: DictConfig, evaluator: Any, server: Any) -> bool:
    """In a sweep, an LLM judge configured with the same server as the sweep's shared model server
    talks to that server instead of starting one per job. Returns whether it was shared."""
    from ragsweep.config import server_spec

    judge = cfg.evaluator.get("judge")
    spec = getattr(server, "spec", None)
    if not spec or judge is None or not OmegaConf.is_dict(judge.get("server")) or server_spec(judge.server) != spec:
        return False
    from ragsweep.evaluator.judge import Judge

    judge_cfg = OmegaConf.to_container(judge, resolve=True)
    judge_cfg["server"] = server
    evaluator.config.judge = Judge(**judge_cfg)
    log.info("the judge uses the sweep's shared model server")
    return True


def _retrieved_context(hits) -> list[dict[str, Any]]:
    return [
        {"doc_id": h.chunk.doc_id, "text": h.chunk.text, "chunk_id": h.chunk.chunk_id, "start": h.chunk.start, "end": h.chunk.end, "score": h.score}
        for h in hits
    ]


def run_system(cfg: DictConfig, parent_run_id: str | None = None, server: Any = None) -> dict[str, Any]:
    """Run one RAG system; returns its metrics. Raises RagsweepError for user-fixable problems.

    ``server``: an already started model server to reuse (a sweep shares one); when None, the
    generator's server is started here and stopped at the end.
    """
    validated = validate(cfg)  # before any work: a bad config starts nothing and logs nothing
    signals.reset()
    top = validated["top"]
    timer = Stages()
    with timer("load"):  # bad input data also fails here, before a run or a server exists
        dataset = instantiate(cfg.dataset).load()
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("hydra", None)

    tracker = Tracker(top.mlflow.tracking_uri, top.mlflow.artifact_location, top.experiment_name, enabled=top.mlflow.enabled)
    retro = retrieval_only.enabled(cfg)  # generator=none: no server, no generation
    run_name = top.run_name or (retrieval_only.run_name(cfg) if retro else system_name(cfg))
    key = system_key(resolved)
    tags = {"ragsweep.system": run_name, "ragsweep.system_key": key, "ragsweep.role": "child" if parent_run_id else "single"}
    tags.update(retrieval_only.tags() if retro else {})
    if parent_run_id and tracker.enabled:
        done = finished_child(tracker, parent_run_id, key)
        if done is not None:  # a resumed sweep: this system already finished, nothing to redo
            log.info("%s already finished in run %s of this sweep; skipping", run_name, done.info.run_id)
            return RunResult(dict(done.data.metrics), name=run_name, run_id=done.info.run_id, skipped=True,
                             experiment_id=tracker.experiment_id, experiment_name=top.experiment_name,
                             tracking_uri=top.mlflow.tracking_uri)
    tracker.start(run_name, tags=tags, parent_run_id=parent_run_id)
    status = "FAILED"
    try:
        with signals.Interrupts():
            tracker.log_params({**flatten(resolved), **short_params(cfg)})
            tracker.log_json(resolved, "config.json")
            card = _judge_card(cfg, tracker)
            metrics, records = _run(cfg, top, dataset, timer, tracker, server)
        status = "FINISHED"
        return RunResult(metrics, name=run_name, run_id=tracker.run_id, experiment_id=tracker.experiment_id,
                         experiment_name=top.experiment_name, tracking_uri=top.mlflow.tracking_uri, records=records,
                         records_uri=tracker.artifact_uri("records.json"), judge=card)
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Exception as exc:  # the reason stays with the FAILED run, visible in the MLflow UI
        tracker.set_tags({"ragsweep.error": f"{type(exc).__name__}: {exc}"[:4000]})
        raise
    finally:
        tracker.end(status)


def _run(cfg: DictConfig, top: Any, dataset: Any, timer: Stages, tracker: Tracker, server: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from ragsweep.generator import build_client
    from ragsweep.tokens import counter_for, estimate

    cache = Cache(top.cache_dir)
    metrics: dict[str, float] = {}
    retro = retrieval_only.enabled(cfg)
    own_server = server is None and not retro
    if own_server:  # a missing model file, executable or API key, a taken port: fail before any work
        server = instantiate(cfg.generator.server)
        if hasattr(server, "check"):
            server.check()

    log.info("dataset %s: %d documents, %d questions", dataset.name, len(dataset.documents), len(dataset.queries))
    metrics.update({f"data/{k}": v for k, v in dataset.stats.items()})

    with timer("chunk"):  # the chunker shows its own per-document bar on a cache miss
        chunker = instantiate(cfg.chunker)
        chunks = chunker.chunk(dataset.documents, cache=cache)
    metrics["data/chunks"] = len(chunks)

    devices.plan(cfg)  # device=auto stays on the CPU beside a vLLM server of this run on the same GPU
    retriever = instantiate(cfg.retriever)
    with timer("index", total=len(chunks), unit="chunks") as bar:
        retriever.index(chunks, cache=cache, progress=bar)  # BM25 / dense encoding advance the bar
        bar.update(len(chunks) - bar.n)
    k = int(cfg.retriever.top_k)
    reranker = instantiate(cfg.reranker) if "reranker" in cfg else None  # retrieve `depth`, rerank to k
    depth = max(k, min(getattr(reranker, "depth", None) or k, len(chunks)))
    with timer("retrieve", total=len(dataset.queries), unit="questions") as bar:
        results = retriever.search(dataset.queries, k=depth, cache=cache)
        if reranker is not None:
            results = reranker.rerank(dataset.queries, results, k, cache=cache)
        bar.update(len(dataset.queries))

    retrieval_per_q = _retrieval_per_question(results, dataset.queries, k, chunks) if dataset.has_relevance else {}

    # -- prompts ---------------------------------------------------------------------------------
    prompt = instantiate(cfg.prompt)
    gen_cfg = cfg.generator
    titles = titles_of(dataset.documents, {h.chunk.doc_id for hits in results.values() for h in hits})
    try:
        if own_server:
            with timer("server_start"):
                server.start()
        budget = None
        window = getattr(server, "context_window", None)
        if window:
            budget = int(window) - int(gen_cfg.max_tokens) - 32  # chat template overhead
        count = counter_for(server) if budget else estimate
        prompts, used_hits, dropped, n_dropped, prompt_s = [], {}, 0, {}, {}
        with timer("prompt"):
            for q in dataset.queries:
                t_fit = time.perf_counter()  # each question's own prompt time (its trace's span)
                text, hits, n_drop = prompt.fit(q.query, results[q.query_id], budget, count, titles)
                prompt_s[q.query_id] = time.perf_counter() - t_fit
                prompts.append(text)
                used_hits[q.query_id] = hits
                n_dropped[q.query_id] = n_drop
                dropped += n_drop
        if dropped:
            log.warning("prompt.fit=drop_lowest dropped %d lowest-ranked chunk(s) to fit the model's context", dropped)
        metrics["prompt/chunks_dropped"] = dropped

        from ragsweep.generator.client import ChatRequest, extract_answer

        if retro:  # nothing to generate: each question keeps its retrieved chunks and an empty response
            client, reqs, outs = retrieval_only.NoClient(), [], retrieval_only.no_outputs(len(prompts))
        else:
            client = build_client(gen_cfg, server, cache, progress=not quiet())
            reqs = [
                ChatRequest(
                    messages=tuple((m["role"], m["content"]) for m in prompt.messages(p)),
                    temperature=float(gen_cfg.temperature),
                    max_tokens=int(gen_cfg.max_tokens),
                    seed=gen_cfg.seed,
                    stop=client.request_defaults.get("stop"),  # generator.stop, validated (a string or a list of them)
                )
                for p in prompts
            ]
            with timer("generate"):
                outs = client.chat_many(reqs, desc=f"{'generate':<9}")
        client.close()
        signals.raise_if_interrupted()  # calls that failed because Ctrl-C stopped the server are no failures
        # a managed server that died under us is named as the cause of the failed calls
        death = server.death() if own_server and hasattr(server, "death") else None
        if death:
            log.error("%s during generation", death)
    finally:
        if own_server:
            server.stop()
            for path in [p for p in getattr(server, "log_paths", ()) if Path(p).is_file()]:
                tracker.log_file(path, "server")  # each server process's own log, beside the records

    model = getattr(server, "model_name", None)
    records = []
    failures = 0
    for q, out, text in zip(dataset.queries, outs, prompts):
        rec: dict[str, Any] = {
            "query_id": q.query_id,
            "query": q.query,
            "gt_answer": q.gt_answer or "",
            "response": "",
            "retrieved_context": _retrieved_context(used_hits[q.query_id]),
            "prompt": text,
            "chunks_dropped": n_dropped[q.query_id],
            "relevant_spans": [{"doc_id": s.doc_id, "start": s.start, "end": s.end} for s in q.relevant],
            "generation": {"model": str(model) if model else None, "prompt_tokens": out.prompt_tokens,
                           "completion_tokens": out.completion_tokens, "latency_s": round(out.seconds, 4),
                           "cached": out.cached, "finish_reason": out.finish_reason,
                           "started_at": out.started_at, "request_s": out.request_s, "server_s": out.server_s},
            "timings": {"prompt_s": round(prompt_s[q.query_id], 6)},
        }
        if out.ok:
            answer = extract_answer(out.text, prompt.config.answer_tag) if prompt.config.answer_tag else out.text.strip()
            set_response(rec, answer)
            if answer != out.text:
                rec["raw_response"] = out.text
        else:  # counted in the ledger and excluded from every answer metric and from the judge
            failures += 1
            rec["error"] = out.error
            rec["failure"] = {"stage": ledger.GENERATION, "reason": str(out.error)}
        records.append(rec)

    gstats = client.stats
    metrics.update(
        {
            "generator/requests": len(reqs),
            "generator/calls": gstats.get("calls", 0),
            "generator/cache_hits": gstats.get("cache_hits", 0),
            "generator/failures": failures,
            "generator/retries": gstats.get("retries", 0),
            "generator/prompt_tokens": gstats.get("prompt_tokens", 0),
            "generator/completion_tokens": gstats.get("completion_tokens", 0),
            "generator/empty_responses": sum(1 for r in records if not response_of(r) and "error" not in r),
        }
    )

    # -- evaluation: only the answers that exist are judged ----------------------------------------
    families = {"baseline"} | ({"retrieval"} if retrieval_per_q else set())
    evaluator, answered = None, []
    if "evaluator" in cfg and cfg.evaluator.get("_target_"):
        evaluator = instantiate(cfg.evaluator)
        share_judge_server(cfg, evaluator, server)
        steps = getattr(evaluator, "STEPS", ())
        answered = [i for i, r in enumerate(records) if ledger.generation_failure(r) is None]
        with timer("evaluate", total=len(steps) or None, unit="steps") as bar:

            def step_done(step: str) -> None:
                bar.set_postfix_str(f"{step} of {len(answered)} answers", refresh=False)
                bar.update(1)

            if answered:
                judged, eval_metrics = evaluator.evaluate([records[i] for i in answered], cache=cache,
                                                          progress=step_done if steps else None)
            else:  # nothing to judge: every answer metric is NaN with n = 0 and the failures counted
                judged, eval_metrics = [], {}
        signals.raise_if_interrupted()
        for i, rec in zip(answered, judged):
            records[i] = rec
        if retro:  # keep what needs no response (the judge's claims and chunk checks stay cached)
            retrieval_only.strip(records)
        # the families the records carry per question: aggregated once, below, by score_run
        declared = getattr(evaluator, "families", None)  # () for evaluator=none; a stand-in may not say
        families |= set(("ragchecker",) if declared is None else declared) | registry.families_in(judged)
        metrics.update(eval_metrics)  # the evaluator's counters
        ledger.mark_judge_failures(records)
    for rec in records:
        rec.setdefault("metrics", {}).update(retrieval_per_q.get(rec["query_id"], {}))

    if retro:
        families = {f for f in families if f in retrieval_only.FAMILIES}
    scores = score_run(records, families)
    if evaluator is not None and answered and int(getattr(evaluator.config, "repeats", 1)) > 1:
        scores = _repeat_judging(evaluator, records, answered, families, cache, scores, metrics, timer)
    not_applicable = retrieval_only.restrict(scores, families) if retro else {}
    metrics.update(scores.metrics)
    for i, rec in enumerate(records):  # each question's value of every metric, as aggregated (NaN -> null)
        qid = str(rec.get("query_id", i))
        rec["scores"] = {name: (v if math.isfinite(v) else None) for name, pq in scores.per_question.items()
                         for v in (pq.get(qid, float("nan")),)}
    for stage, secs in timer.seconds.items():
        metrics[f"time/{stage}_s"] = round(secs, 3)
    for key, n in sorted(cache.stats.items()):
        metrics[f"cache/{key}"] = n
    from ragsweep.cost import run_cost

    metrics.update(run_cost(metrics, cfg))  # tokens, calls, wall seconds (and money where priced)

    tracker.log_json({"results": records}, "records.json")
    tracker.log_json(retrieval_only.ledger_artifact(scores, not_applicable) if retro else scores.artifact(),
                     "ledger.json")
    tracker.log_metrics(metrics)
    from ragsweep.tracking.traces import log_eval_table, log_traces

    judge = str(cfg.evaluator.get("name") or "none") if "evaluator" in cfg else "none"
    log.info("eval table: %s", log_eval_table(tracker, records))  # one row per question (never fails the run)
    log.info("traces: %s", log_traces(tracker, records, judge=judge, run_id=tracker.run_id))  # one per question
    cache.close()

    rate = ledger.failed_share(records)
    if rate > top.max_failure_rate:
        # death(): a summary line (how it ended, its log), then the likely cause and the log's tail
        summary, _, details = (death or "").partition("\n")
        c = scores.counts
        raise FailureRateExceeded(
            (f"{summary} during generation: " if death else "")
            + f"{c['failed_generation']} of {c['attempted']} generations failed"
            + (f" and {c['failed_judge']} answers could not be judged" if c["failed_judge"] else "")
            + f" ({rate:.0%} > max_failure_rate={top.max_failure_rate}); the failed questions were not scored; "
            f"see ledger.json, the server log and the records artifact" + (f"\n{details}" if details else "")
        )
    return metrics, records


def _repeat_judging(evaluator, records, answered, families, cache, first, metrics, timer):
    """``evaluator.repeats=R``: judge the same answers R - 1 more times with the judge's seed moved
    (new cache keys, so new judge calls) and combine (:func:`ragsweep.scoring.combine_repeats`).
    A deterministic judge (no LLM judge, or temperature 0) gives R identical judgings: judged once."""
    import copy

    from ragsweep.cache import Salted
    from ragsweep.scoring import combine_repeats

    import dataclasses

    from omegaconf import OmegaConf as _OC

    from ragsweep.evaluator.judge import Judge

    n = int(evaluator.config.repeats)
    judge = evaluator.config.judge
    if _OC.is_config(judge):
        judge = _OC.to_container(judge, resolve=True)
    if isinstance(judge, Judge):
        temp, base_seed = float(judge.config.temperature or 0), int(judge.config.seed or 0)
    elif isinstance(judge, dict):
        temp, base_seed = float(judge.get("temperature") or 0), int(judge.get("seed") or 0)
    else:
        temp, base_seed = 0.0, 0
    if judge is None or temp <= 0:
        log.warning("evaluator.repeats=%d ignored: the judge is deterministic (%s), every repeat would give the "
                    "same labels", n, "no LLM judge" if judge is None else "temperature 0")
        return first

    def with_seed(seed: int):
        if isinstance(judge, Judge):
            judge.config = dataclasses.replace(judge.config, seed=seed)
            return judge
        return {**judge, "seed": seed}

    runs = [first]
    for r in range(1, n):
        evaluator.config.judge = with_seed(base_seed + r)
        with timer(f"evaluate_repeat{r}"):
            judged, _ = evaluator.evaluate([records[i] for i in answered],
                                           cache=Salted(cache, f"repeat{r}") if cache is not None else None)
        signals.raise_if_interrupted()
        again = copy.copy(records)
        for i, rec in zip(answered, judged):
            rec.setdefault("metrics", {}).update({k: v for k, v in records[i].get("metrics", {}).items() if k.startswith("retrieval/")})
            again[i] = rec
        ledger.mark_judge_failures(again)
        runs.append(score_run(again, families))
    evaluator.config.judge = with_seed(base_seed)
    log.info("judged every answer %d times (evaluator.repeats); <metric>/judge_sd vs <metric>/question_sd", n)
    return combine_repeats(records, runs)


def _judge_card(cfg: DictConfig, tracker: Tracker) -> dict[str, Any] | None:
    """The judge card (which judge, its measured agreement with people) as ``ragsweep.judge.*`` tags
    and ``judge_card.md`` / ``judge_card.json``, logged before any work so every run carries it."""
    from ragsweep import judge_card

    if "evaluator" not in cfg or not cfg.evaluator.get("_target_"):
        return None
    card = judge_card.card(cfg.evaluator)
    tracker.set_tags(judge_card.tags(card))
    tracker.log_text(judge_card.markdown(card), "judge_card.md")
    tracker.log_json(card, "judge_card.json")
    return card


def _retrieval_per_question(results, queries, k: int, chunks) -> dict[str, dict[str, float]]:
    """Per query id: the retrieval metrics at the run's k (``retrieval/<m>_at_k``) and at the fixed
    cutoffs up to k (``retrieval/<m>_at_<c>``); only queries with relevance labels."""
    from ragsweep.metrics.retrieval import retrieval_metrics_per_query
    from ragsweep.metrics.retrieval_registry import cutoffs

    out: dict[str, dict[str, float]] = {}
    for depth, suffix in [(k, "k")] + [(c, str(c)) for c in cutoffs(k)]:
        for qid, vals in retrieval_metrics_per_query(results, queries, depth, chunks=chunks).items():
            row = out.setdefault(qid, {})
            for name, value in vals.items():
                row[f"retrieval/{name.split('@')[0]}_at_{suffix}"] = value
    return out
