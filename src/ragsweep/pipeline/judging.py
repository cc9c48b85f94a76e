"""The judge and score stages of one job (after :mod:`ragsweep.pipeline.stages`): only the answers
that exist are judged, and every metric is aggregated once, with its count and interval."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragsweep import signals
from ragsweep.analysis.scoring import RunScores, score_run
from ragsweep.judge import ledger
from ragsweep.judge.metrics import registry
from ragsweep.pipeline import retrieval_only
from ragsweep.pipeline.stages import Job, Retrieval

log = logging.getLogger("ragsweep")


@dataclass
class Judging:
    """What the judge stage leaves for scoring: the metric families the records carry, and the
    evaluator with the indices of the answers it judged (for ``evaluator.repeats``)."""

    families: set[str]
    evaluator: Any = None
    answered: list[int] = field(default_factory=list)


def judge(job: Job, records: list[dict[str, Any]], retrieval: Retrieval) -> Judging:
    """The evaluator (when one is configured) on every answered record, in place; a generation
    failure is never judged, a judge failure is marked for the ledger. Each record then carries
    its retrieval metrics too."""
    cfg = job.cfg
    out = Judging({"baseline"} | ({"retrieval"} if retrieval.per_question else set()))
    if "evaluator" in cfg and cfg.evaluator.get("_target_"):
        out.evaluator = evaluator = instantiate(cfg.evaluator)
        share_judge_server(cfg, evaluator, job.server)
        steps = getattr(evaluator, "STEPS", ())
        out.answered = [i for i, r in enumerate(records)
                        if ledger.generation_failure(r) is None and ledger.not_attempted(r) is None]
        with job.timer("evaluate", total=len(steps) or None, unit="steps") as bar:

            def step_done(step: str) -> None:
                bar.set_postfix_str(f"{step} of {len(out.answered)} answers", refresh=False)
                bar.update(1)

            if out.answered:
                judged, counters = evaluator.evaluate([records[i] for i in out.answered], cache=job.cache,
                                                      progress=step_done if steps else None, budget=job.budget)
            else:  # nothing to judge: every answer metric is NaN with n = 0 and the failures counted
                judged, counters = [], {}
        signals.raise_if_interrupted()
        for i, rec in zip(out.answered, judged):
            records[i] = rec
        if job.retro:  # keep what needs no response (the judge's claims and chunk checks stay cached)
            retrieval_only.strip(records)
        # the families the records carry per question: aggregated once, by score()
        declared = getattr(evaluator, "families", None)  # () for evaluator=none; a stand-in may not say
        out.families |= set(("ragchecker",) if declared is None else declared) | registry.families_in(judged)
        job.metrics.update(counters)  # the evaluator's counters
        if getattr(evaluator, "cut", None):  # the budget stopped the judge: those answers are not attempted
            from ragsweep.pipeline.spend import mark_cut

            mark_cut(records, evaluator.cut)
        ledger.mark_judge_failures(records)
    for rec in records:
        rec.setdefault("metrics", {}).update(retrieval.per_question.get(rec["query_id"], {}))
    if job.retro:
        out.families = {f for f in out.families if f in retrieval_only.FAMILIES}
    return out


def score(job: Job, records: list[dict[str, Any]], judging: Judging) -> tuple[RunScores, dict[str, str]]:
    """Every metric of the judged families aggregated over questions (count, interval, ledger),
    each record's own values beside it (``scores``); returns the scores and, for a retrieval-only
    run, the metrics it cannot compute and why."""
    scores = score_run(records, judging.families)
    ev = judging.evaluator
    if ev is not None and judging.answered and int(getattr(ev.config, "repeats", 1)) > 1:
        scores = repeat_judging(job, records, judging, scores)
    not_applicable = retrieval_only.restrict(scores, judging.families) if job.retro else {}
    job.metrics.update(scores.metrics)
    for i, rec in enumerate(records):  # each question's value of every metric, as aggregated (NaN -> null)
        qid = str(rec.get("query_id", i))
        rec["scores"] = {name: (v if math.isfinite(v) else None) for name, pq in scores.per_question.items()
                         for v in (pq.get(qid, float("nan")),)}
    return scores, not_applicable


def share_judge_server(cfg: DictConfig, evaluator: Any, server: Any) -> bool:
    """In a sweep, an LLM judge configured with the same server as the sweep's shared model server
    talks to that server instead of starting one per job. Returns whether it was shared."""
    from ragsweep.pipeline.config import server_spec

    judge_cfg = cfg.evaluator.get("judge")
    spec = getattr(server, "spec", None)
    if not spec or judge_cfg is None or not OmegaConf.is_dict(judge_cfg.get("server")):
        return False
    if server_spec(judge_cfg.server) != spec:
        return False
    from ragsweep.judge.llm_judge import Judge

    plain = OmegaConf.to_container(judge_cfg, resolve=True)
    plain["server"] = server
    evaluator.config.judge = Judge(**plain)
    log.info("the judge uses the sweep's shared model server")
    return True


def repeat_judging(job: Job, records: list[dict[str, Any]], judging: Judging, first: RunScores) -> RunScores:
    """``evaluator.repeats=R``: judge the same answers R - 1 more times with the judge's seed moved
    (new cache keys, so new judge calls) and combine (:func:`ragsweep.analysis.scoring.combine_repeats`).
    A deterministic judge (no LLM judge, or temperature 0) gives R identical judgings: judged once."""
    import copy

    from ragsweep.analysis.scoring import combine_repeats
    from ragsweep.store.cache import Salted

    evaluator, answered = judging.evaluator, judging.answered
    n = int(evaluator.config.repeats)
    seeded = _SeededJudge(evaluator.config.judge)
    if seeded.judge is None or seeded.temperature <= 0:
        log.warning("evaluator.repeats=%d ignored: the judge is deterministic (%s), every repeat would give the "
                    "same labels", n, "no LLM judge" if seeded.judge is None else "temperature 0")
        return first
    runs = [first]
    for r in range(1, n):
        evaluator.config.judge = seeded.with_seed(seeded.seed + r)
        with job.timer(f"evaluate_repeat{r}"):
            judged, _ = evaluator.evaluate([records[i] for i in answered], cache=Salted(job.cache, f"repeat{r}"))
        signals.raise_if_interrupted()
        again = copy.copy(records)
        for i, rec in zip(answered, judged):
            rec.setdefault("metrics", {}).update(
                {k: v for k, v in records[i].get("metrics", {}).items() if k.startswith("retrieval/")})
            again[i] = rec
        ledger.mark_judge_failures(again)
        runs.append(score_run(again, judging.families))
    evaluator.config.judge = seeded.with_seed(seeded.seed)
    log.info("judged every answer %d times (evaluator.repeats); <metric>/judge_sd vs <metric>/question_sd", n)
    return combine_repeats(records, runs)


class _SeededJudge:
    """The evaluator's judge (a built Judge, its config dict, or none) and a copy at another seed."""

    def __init__(self, judge: Any) -> None:
        import dataclasses

        from ragsweep.judge.llm_judge import Judge

        self._replace, self._Judge = dataclasses.replace, Judge
        self.judge = OmegaConf.to_container(judge, resolve=True) if OmegaConf.is_config(judge) else judge
        if isinstance(self.judge, Judge):
            self.temperature, self.seed = float(self.judge.config.temperature or 0), int(self.judge.config.seed or 0)
        elif isinstance(self.judge, dict):
            self.temperature, self.seed = float(self.judge.get("temperature") or 0), int(self.judge.get("seed") or 0)
        else:
            self.temperature, self.seed = 0.0, 0

    def with_seed(self, seed: int) -> Any:
        if isinstance(self.judge, self._Judge):
            self.judge.config = self._replace(self.judge.config, seed=seed)
            return self.judge
        return {**self.judge, "seed": seed}
