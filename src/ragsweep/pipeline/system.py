"""One RAG system, end to end: :func:`run_system` opens its MLflow run and :func:`run_job` runs
its stages (:mod:`ragsweep.pipeline.stages`, :mod:`ragsweep.pipeline.judging`):

    load -> chunk -> index -> retrieve -> prompts -> generate -> records -> judge -> score -> log

Every stage goes through the shared content-addressed cache."""

from __future__ import annotations

import logging
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragsweep import signals
from ragsweep.errors import FailureRateExceeded
from ragsweep.judge import ledger
from ragsweep.pipeline import judging, retrieval_only, spend, stages
from ragsweep.pipeline.config import flatten, validate
from ragsweep.pipeline.summary import RunResult, Stages, headline_first, quiet
from ragsweep.tracking import Tracker, finished_child, short_params, system_key, system_name
from ragsweep.tracking.genai import log_question_set
from ragsweep.types import Dataset

log = logging.getLogger("ragsweep")


def run_system(cfg: DictConfig, parent_run_id: str | None = None, server: Any = None,
               sweep_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one RAG system; returns its metrics. Raises RagsweepError for user-fixable problems.

    ``server``: an already started model server to reuse (a sweep shares one); when None, the
    generator's server is started here and stopped at the end. ``sweep_info``: the running sweep's
    shared state (its budget), for a job of a multirun.
    """
    validated = validate(cfg)  # before any work: a bad config starts nothing and logs nothing
    signals.reset()
    top = validated["top"]
    timer = Stages()
    dataset = _load(cfg, timer)  # bad input data fails here, before a run or a server exists
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.pop("hydra", None)

    dry = spend.dry_run(cfg)  # --dry-run: the estimate only, no MLflow run
    tracker = Tracker(top.mlflow.tracking_uri, top.mlflow.artifact_location, top.experiment_name,
                      enabled=top.mlflow.enabled and not dry)
    retro = retrieval_only.enabled(cfg)  # generator=none: no server, no generation
    run_name = top.run_name or (retrieval_only.run_name(cfg) if retro else system_name(cfg))
    key = system_key(resolved)
    tags = {"ragsweep.system": run_name, "ragsweep.system_key": key, "ragsweep.role": "child" if parent_run_id else "single"}
    tags.update(retrieval_only.tags() if retro else {})
    tags.update(synthetic_tags(dataset))
    done = _finished(tracker, parent_run_id, key, run_name, top)
    if done is not None:  # a resumed sweep: this system already finished, nothing to redo
        return done
    tracker.start(run_name, tags=tags, parent_run_id=parent_run_id)
    status = "FAILED"
    try:
        with signals.Interrupts():
            tracker.log_params({**flatten(resolved), **short_params(cfg)})
            tracker.log_json(resolved, "config.json")
            for name, artifact in dataset.artifacts.items():  # dataset=files: its parse ledger
                tracker.log_json(artifact, name)
            log.info("question set: %s", log_question_set(tracker, dataset))  # an MLflow evaluation dataset, the run's input
            card = _judge_card(cfg, tracker)
            job = stages.Job.open(cfg, top, timer, tracker, server)
            job.budget, job.in_sweep = spend.budget(job, sweep_info), sweep_info is not None
            metrics, records = run_job(job, dataset)
        status, ended = spend.outcome(job, records)  # KILLED + "budget reached" where the budget stopped it
        tracker.set_tags(ended)
        return RunResult(metrics, name=run_name, run_id=tracker.run_id, experiment_id=tracker.experiment_id,
                         experiment_name=top.experiment_name, tracking_uri=top.mlflow.tracking_uri, records=records,
                         records_uri=tracker.artifact_uri("records.json"), judge=card, synthetic=dataset.synthetic,
                         judge_card_uri=tracker.artifact_uri("judge_card.md"),
                         status="BUDGET REACHED" if ended else "FINISHED", budget=ended.get("ragsweep.budget"))
    except spend.DryRun as stop:  # nothing was called and nothing logged: the estimate is the result
        return RunResult(stop.estimate.metrics(), name=run_name, status="DRY RUN", estimate=stop.estimate.lines())
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Exception as exc:  # the reason stays with the FAILED run, visible in the MLflow UI
        tracker.set_tags({"ragsweep.error": f"{type(exc).__name__}: {exc}"[:4000]})
        raise
    finally:
        tracker.end(status)


def _load(cfg: DictConfig, timer: Stages) -> Any:
    """The run's dataset, timed as the "load" stage."""
    with timer("load"):
        loader = instantiate(cfg.dataset)
        if quiet() and hasattr(loader.config, "progress"):  # ragsweep -q: the summary only
            loader.config.progress = False
        return loader.load()


def _finished(tracker: Tracker, parent_run_id: str | None, key: str, run_name: str, top: Any) -> RunResult | None:
    """A resumed sweep's system that already finished: its run, not run again."""
    if not (parent_run_id and tracker.enabled):
        return None
    done = finished_child(tracker, parent_run_id, key)
    if done is None:
        return None
    log.info("%s already finished in run %s of this sweep; skipping", run_name, done.info.run_id)
    return RunResult(dict(done.data.metrics), name=run_name, run_id=done.info.run_id, skipped=True,
                     experiment_id=tracker.experiment_id, experiment_name=top.experiment_name,
                     tracking_uri=top.mlflow.tracking_uri)


def synthetic_tags(dataset: Dataset) -> dict[str, str]:
    """A run over a generated question set (``ragsweep-questions``) is tagged so
    (``ragsweep.questions = synthetic``, with the set's file, model and corpus fingerprint); a set made
    from another version of the corpus is named in a warning (its quotes were located again)."""
    syn = dataset.synthetic
    if not syn:
        return {}
    from ragsweep.corpus.dataset.fingerprint import corpus_fingerprint

    made_from = syn.get("corpus_fingerprint")
    if made_from and made_from != corpus_fingerprint(dataset.documents):
        log.warning("%s was generated from another version of this corpus (fingerprint %s...): its evidence was "
                    "checked against the text of now; generate it again for questions about what changed",
                    syn.get("file"), str(made_from)[:12])
    tags = {"ragsweep.questions": "synthetic", "ragsweep.questions.count": str(syn.get("questions", ""))}
    for key in ("file", "model", "prompt", "seed", "corpus_fingerprint"):
        if syn.get(key) is not None:
            tags[f"ragsweep.questions.{key}"] = str(syn[key])[:500]
    return tags


def run_job(job: stages.Job, dataset: Dataset) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stages of one job; returns its metrics and records. A retrieval-only job generates
    nothing and starts no server; a sweep's job talks to the sweep's server. Before any question,
    the API keys are checked; before a priced model is called, the estimate (and its budget plan)."""
    log.info("dataset %s: %d documents, %d questions", dataset.name, len(dataset.documents), len(dataset.queries))
    job.metrics.update({f"data/{k}": v for k, v in dataset.stats.items()})
    spend.check_keys(job)  # a refused API key stops the run here, naming the variable it was read from
    chunks = stages.chunk(job, dataset)
    retriever = stages.index(job, chunks)
    retrieval = stages.retrieve(job, retriever, dataset, chunks)
    if job.retro:
        prompts = stages.prompts(job, dataset, retrieval)
        generation = stages.Generation.nothing(len(prompts.texts))
    else:
        with stages.serving(job):
            prompts = stages.prompts(job, dataset, retrieval)
            attempt = spend.estimate(job, dataset, prompts)  # printed and logged; --dry-run stops here
            generation = stages.generate(job, prompts, attempt)
    records = stages.records(job, dataset, prompts, generation)
    judged = judging.judge(job, records, retrieval)
    scores, not_applicable = judging.score(job, records, judged)
    log_run(job, records, scores, not_applicable)
    check_failure_rate(job, records, scores, generation.death)
    return job.metrics, records


def log_run(job: stages.Job, records: list[dict[str, Any]], scores: Any, not_applicable: dict[str, str]) -> None:
    """The log stage: seconds per stage, cache and cost counters, the records, the ledger, the
    metrics, one evaluation-table row and one trace per question."""
    from ragsweep.analysis.cost import run_cost
    from ragsweep.tracking.traces import log_eval_table, log_traces

    cfg, tracker, metrics = job.cfg, job.tracker, job.metrics
    for stage, secs in job.timer.seconds.items():
        metrics[f"time/{stage}_s"] = round(secs, 3)
    for key, n in sorted(job.cache.stats.items()):
        metrics[f"cache/{key}"] = n
    metrics.update(run_cost(metrics, cfg))  # tokens, calls, wall seconds (and money where priced)
    tracker.log_json({"results": records}, "records.json")
    led = retrieval_only.ledger_artifact(scores, not_applicable) if job.retro else scores.artifact()
    tracker.log_json({**led, "calls": calls_ledger(metrics)}, "ledger.json")
    tracker.log_metrics(headline_first(metrics, list(cfg.get("summary", {}).get("metrics", []))))  # the UI's first columns
    judge = str(cfg.evaluator.get("name") or "none") if "evaluator" in cfg else "none"
    log.info("eval table: %s", log_eval_table(tracker, records))  # one row per question (never fails the run)
    log.info("traces: %s", log_traces(tracker, records, judge=judge, run_id=tracker.run_id))  # one per question
    job.cache.close()


def calls_ledger(metrics: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The model calls of the run beside its questions: sent, retried (rate-limited among them),
    failed, not sent because of the budget, and the server processes restarted after they died,
    for the generator and the judge."""
    names = ("calls", "retries", "rate_limited", "failures", "budget_skipped", "server_restarts")
    return {part: {k: int(metrics.get(f"{prefix}/{k}", 0) or 0) for k in names}
            for part, prefix in (("generation", "generator"), ("judge", "judge"))}


def check_failure_rate(job: stages.Job, records: list[dict[str, Any]], scores: Any, death: str | None) -> None:
    """More failed questions than ``max_failure_rate`` allows fail the run, naming the cause."""
    rate = ledger.failed_share(records)
    limit = job.top.max_failure_rate
    if rate <= limit:
        return
    # death(): a summary line (how it ended, its log), then the likely cause and the log's tail
    summary, _, details = (death or "").partition("\n")
    c = scores.counts
    raise FailureRateExceeded(
        (f"{summary} during generation: " if death else "")
        + f"{c['failed_generation']} of {c['attempted']} generations failed"
        + (f" and {c['failed_judge']} answers could not be judged" if c["failed_judge"] else "")
        + f" ({rate:.0%} > max_failure_rate={limit}); the failed questions were not scored; "
        f"see ledger.json, the server log and the records artifact" + (f"\n{details}" if details else "")
    )


def _judge_card(cfg: DictConfig, tracker: Tracker) -> dict[str, Any] | None:
    """The judge card (which judge, its measured agreement with people) as ``ragsweep.judge.*`` tags
    and ``judge_card.md`` / ``judge_card.json``, logged before any work so every run carries it."""
    from ragsweep.judge import card as judge_card

    if "evaluator" not in cfg or not cfg.evaluator.get("_target_"):
        return None
    card = judge_card.card(cfg.evaluator)
    tracker.set_tags(judge_card.tags(card))
    tracker.log_text(judge_card.markdown(card), "judge_card.md")
    tracker.log_json(card, "judge_card.json")
    return card
