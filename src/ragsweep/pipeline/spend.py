"""Money in one job (docs/hosted.md): the API keys checked before any question, the estimate before
any priced call (and ``--dry-run``), the budget its calls draw on, and how a run that the budget
stopped ends.

    spend.check_keys(job)                        # a refused key stops here, naming its variable
    attempt = spend.estimate(job, dataset, prompts)   # printed, logged; --dry-run stops here
    generation = stages.generate(job, prompts, attempt)
    ...
    status, why = spend.outcome(job, records)    # KILLED + "budget reached" where it stopped the run

A budget stops a run cleanly: the questions its estimate covers are attempted in dataset order
(the rest are *not attempted*, never scored, counted in the ledger), and every call first reserves
what it could cost at most, so the budget is never passed
(:mod:`ragsweep.rag.generator.budget`). What was answered is cached: a run with a higher budget
pays only for the rest.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Sequence

from hydra.utils import instantiate

from ragsweep.analysis.cost import prices
from ragsweep.judge import ledger
from ragsweep.pipeline.stages import Job, Prompts, requests, retrieved_context
from ragsweep.pipeline.summary import quiet
# MLflow has no status for a run stopped on purpose before it was complete: KILLED is the one that is
# neither FAILED nor FINISHED (a resumed sweep runs it again), and the tag ragsweep.status says why
from ragsweep.tracking.runs import BUDGET_REACHED, STATUS_TAG
from ragsweep.types import Dataset

log = logging.getLogger("ragsweep")

DRY_RUN_ENV = "RAGSWEEP_DRY_RUN"


class DryRun(Exception):
    """``--dry-run``: the estimate is printed; nothing is called."""

    def __init__(self, estimate: Any):
        super().__init__("dry run")
        self.estimate = estimate


def dry_run(cfg: Any) -> bool:
    sweep = cfg.get("sweep") if hasattr(cfg, "get") else None
    return bool((sweep or {}).get("dry_run")) or os.environ.get(DRY_RUN_ENV) == "1"


def priced(cfg: Any) -> bool:
    return any(p is not None for p in prices(cfg).values())


def has_judge(cfg: Any) -> bool:
    return "evaluator" in cfg and bool(cfg.evaluator.get("_target_")) and cfg.evaluator.get("judge") is not None


def budget(job: Job, sweep_info: dict[str, Any] | None) -> Any:
    """The budget the job's calls draw on: its ``budget_usd`` and its sweep's ``sweep.budget_usd``."""
    from ragsweep.rag.generator.budget import Budget, SharedBudget, combine

    run = Budget(job.top.budget_usd, "budget_usd") if job.top.budget_usd is not None else None
    shared = (sweep_info or {}).get("budget")
    sweep = SharedBudget(shared["path"], shared["limit"]) if shared else None
    if (run or sweep) and not priced(job.cfg):
        log.warning("a budget is set but no model has a price (generator.price_per_1k_tokens, "
                    "evaluator.judge.price_per_1k_tokens): nothing counts against it")
    return combine(run, sweep)


def check_keys(job: Job) -> None:
    """The readiness probe of every external endpoint the job will call, before any question: a
    refused key (401/403) stops the run with one line naming the server, its URL and the variable."""
    if not job.dry_run:
        probe_endpoints(job.cfg, job.server)


def probe_endpoints(cfg: Any, server: Any) -> None:
    """:func:`check_keys` for a config and its generator's (built, maybe not started) server."""
    from ragsweep.rag.generator.servers.probe import needs_probe, probe

    if server is not None and needs_probe(server):
        probe(server, "generator", "generator.server", model=getattr(server, "model_name", None))
    if has_judge(cfg):
        from ragsweep.judge.llm_judge import Judge

        judge = Judge.from_spec(cfg.evaluator.judge)
        given = judge.config.server is None  # a judge given by base_url: its key's variable is in evaluator.judge
        if needs_probe(judge.server):
            probe(judge.server, "judge", "evaluator.judge" if given else "evaluator.judge.server",
                  model=judge.model_name, key_env=judge.config.api_key_env)


def work(job: Job, dataset: Dataset, prompts: Prompts, name: str = "") -> Any:
    """One system's work as the estimate sees it (:class:`ragsweep.analysis.estimate.Work`)."""
    from ragsweep.analysis.estimate import Work
    from ragsweep.rag.generator.client import extract_answer
    from ragsweep.rag.tokens import counter_for, estimate as rough

    from ragsweep.rag.generator import generation_keys

    reqs = requests(job, prompts)
    tag = prompts.template.config.answer_tag
    count = counter_for(job.server)
    cfg = job.cfg
    price = prices(cfg)
    evaluator = instantiate(cfg.evaluator) if has_judge(cfg) and price["judge"] is not None else None
    records = [{"query_id": q.query_id, "query": q.query, "gt_answer": q.gt_answer or "",
                "retrieved_context": retrieved_context(prompts.hits[q.query_id])} for q in dataset.queries]
    return Work(name=name, model=str(job.server.model_name), requests=reqs, keys=generation_keys(job.server, reqs),
                records=records, answer_of=lambda t: extract_answer(t, tag) if tag else t.strip(), count=count,
                exact=count is not rough, max_tokens=int(cfg.generator.max_tokens), generator_price=price["generation"],
                evaluator=evaluator, judge_price=price["judge"])


def stated(top: Any) -> dict[str, Any]:
    e = top.estimate
    return {"answer_tokens": e.answer_tokens, "claims_per_answer": e.claims_per_answer, "claims_range": e.claims_range}


def estimate(job: Job, dataset: Dataset, prompts: Prompts) -> list[bool] | None:
    """The estimate stage: before a priced model is called, the calls, tokens and USD this job
    expects, printed and logged (``estimate.json``, ``estimate/*``); ``--dry-run`` stops here
    (:class:`DryRun`). Returns which questions to attempt within the budget (None: all)."""
    from ragsweep.analysis.estimate import estimate as make
    from ragsweep.store.cache import Cache

    if not (priced(job.cfg) or job.dry_run):
        return None
    with job.timer("estimate"):
        est = make([work(job, dataset, prompts, name=job.tracker.run_name or "")], Cache(job.top.cache_dir),
                   stated(job.top))
    job.metrics.update(est.metrics())
    job.tracker.log_json(est.to_json(), "estimate.json")
    if job.dry_run:
        raise DryRun(est)
    for line in est.lines():
        log.info("%s", line)
    if not quiet() and not job.in_sweep:  # a sweep's job: the sweep printed the whole sweep's
        print("\n".join(est.lines()), flush=True)
    return plan(job, dataset, est.per_question(), est.largest_call())


def plan(job: Job, dataset: Dataset, cost: dict[str, float], reserve: float = 0.0) -> list[bool] | None:
    """The questions the budget is expected to cover, in dataset order (free ones always). ``reserve``:
    the worst case of the largest call, kept free so that the last planned call can still be sent."""
    b = job.budget
    if b is None:
        return None
    left = min(x.limit - x.spent for x in b.budgets) - reserve
    out, total, stopped = [], 0.0, b.reached
    for q in dataset.queries:
        usd = cost.get(q.query, 0.0)
        ok = usd <= 0 or (not stopped and total + usd <= left)
        stopped = stopped or not ok
        total += usd if ok else 0.0
        out.append(ok)
    skipped = sum(1 for x in out if not x)
    if skipped:
        log.warning("the budget ($%.4f left) is expected to cover %d of the %d questions: %d not attempted "
                    "(a run with a higher budget does them, paying only for them)", left, len(out) - skipped,
                    len(out), skipped)
    return out


def mark_cut(records: Sequence[dict[str, Any]], cut: set[Any]) -> int:
    """Answers whose judging the budget stopped (``cut``: the questions of the judge calls not sent;
    None among them: calls of no known question, then every answer the judge left incomplete)."""
    n = 0
    for rec in records:
        if rec.get("failure") and rec["failure"].get("stage") != ledger.JUDGE:
            continue
        if str(rec.get("query") or "") in cut or (None in cut and ledger.judge_failure(rec)):
            rec["failure"] = {"stage": ledger.BUDGET, "reason": "budget reached before its judging (its answer is cached)"}
            n += 1
    return n


def outcome(job: Job, records: Sequence[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The MLflow status and tags of a job that ran to its end: KILLED + ``ragsweep.status=budget
    reached`` when the budget kept questions from being done, else FINISHED."""
    skipped = sum(1 for r in records if ledger.not_attempted(r))
    if not skipped:
        return "FINISHED", {}
    why = job.budget.why() if job.budget is not None else "budget reached"
    return "KILLED", {STATUS_TAG: BUDGET_REACHED,
                      "ragsweep.budget": f"{why}: {skipped} question(s) not attempted, their work could pass it"}


__all__ = ["BUDGET_REACHED", "DryRun", "STATUS_TAG", "budget", "check_keys", "dry_run", "estimate", "mark_cut",
           "outcome", "plan", "priced", "probe_endpoints", "work"]
