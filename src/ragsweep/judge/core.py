"""The ``evaluator`` config group's component: ``instantiate(cfg.evaluator).evaluate(records, cache)``.

    evaluator: offline   # default: offline claims + offline checker + MiniLM RAGAS substitutes;
                         # no network call, no server
    evaluator: llm       # a judge model (own server: managed llama.cpp SmolLM2 by default, or
                         # any OpenAI-compatible endpoint) extracts claims and checks them
    evaluator: nli       # offline claims + an NLI cross-encoder checker
    evaluator: none      # no evaluation: records unchanged, no metrics

``Evaluator.Config`` is the YAML schema (validated before any work starts):

- ``name``: offline | llm | nli | none (``none`` turns evaluation off), or any label.
- ``extractor``, ``checker``: members of the config groups ``evaluator/extractor`` and
  ``evaluator/checker`` (one YAML file each, a ``_target_`` to a class with one contract:
  :mod:`ragsweep.judge.components`), chosen in the evaluator's defaults list. In Python: a
  built object, a mapping with ``_target_``, or the name of a YAML file of the group.
- ``judge``: null, or the judge's own server and sampling
  (:class:`ragsweep.judge.llm_judge.Judge.Config`): ``server: {_target_: ...LlamaCppServer |
  ...ExternalServer | ...VLLMServer, ...}``, ``model``, ``temperature``, ``max_tokens``, ``seed``,
  ``concurrency``, ``timeout_s``, ``max_retries``, ``parse_retries``, ... A managed judge server
  is started only when a judge request is not answered by the cache, and always stopped when
  ``evaluate`` returns or raises.
- ``trace_mode``: entailment | annotator | none; ``trace_attribution``: cover (default: the
  context sentences a claim draws its words from) | entailment (the sentences that entail it on
  their own); ``prune``: with entailment attribution, test sentences only inside chunks that
  entail the claim.
- ``ragas``: compute RAGAS (LLM variants with a judge, embedding substitutes without one);
  ``embedding_model``, ``context_threshold``, ``n_questions``.

Metric names: the registry, :mod:`ragsweep.judge.metrics` (counters: :mod:`ragsweep.judge.pipeline`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ragsweep.judge import components
from ragsweep.judge.components import plain
from ragsweep.judge.llm_judge import Judge
from ragsweep.judge.pipeline import evaluate_records
from ragsweep.judge.trace_steps import TRACE_ATTRIBUTIONS, TRACE_MODES, AnnotatorTrace, EntailmentTrace

log = logging.getLogger(__name__)


class Evaluator:
    """Claim-level evaluation of generated records (RAGChecker + TRACe + RAGAS)."""

    @dataclass
    class Config:
        name: str = "offline"
        extractor: Any = "offline"  # evaluator/extractor/<name>.yaml, a {_target_: ...} mapping or an object
        checker: Any = "offline"  # evaluator/checker/<name>.yaml, a {_target_: ...} mapping or an object
        judge: Any = None
        trace_mode: str = "entailment"
        trace_attribution: str = "cover"
        prune: bool = True
        ragas: bool = True
        embedding_model: str = "minilm"
        context_threshold: float = 0.5
        n_questions: int = 3
        repeats: int = 1  # judge every answer R times (a stochastic LLM judge): judge vs question variance

        def __post_init__(self) -> None:
            if not isinstance(self.name, str) or not self.name:
                raise ValueError(f"evaluator.name must be a non-empty string, got {self.name!r}")
            if self.name == "none":
                return
            if self.trace_mode not in TRACE_MODES:
                raise ValueError(
                    f"evaluator.trace_mode must be one of {', '.join(TRACE_MODES)}, got {self.trace_mode!r}"
                )
            if self.trace_attribution not in TRACE_ATTRIBUTIONS:
                raise ValueError(
                    f"evaluator.trace_attribution must be one of {', '.join(TRACE_ATTRIBUTIONS)}, "
                    f"got {self.trace_attribution!r}"
                )
            for name in ("prune", "ragas"):
                if not isinstance(getattr(self, name), bool):
                    raise ValueError(f"evaluator.{name} must be true or false, got {getattr(self, name)!r}")
            if not isinstance(self.embedding_model, str) or not self.embedding_model:
                raise ValueError(
                    f"evaluator.embedding_model must be 'minilm' or a sentence-transformers name/path, "
                    f"got {self.embedding_model!r}"
                )
            t = self.context_threshold
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not -1.0 <= t <= 1.0:
                raise ValueError(f"evaluator.context_threshold must be a cosine in [-1, 1], got {t!r}")
            r = self.repeats
            if isinstance(r, bool) or not isinstance(r, int) or r < 1:
                raise ValueError(f"evaluator.repeats must be an integer >= 1, got {r!r}")
            n = self.n_questions
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"evaluator.n_questions must be an integer >= 1, got {n!r}")
            for group in ("extractor", "checker"):
                components.validate(group, getattr(self, group))
            judge = plain(self.judge)
            if judge is not None and not isinstance(judge, Judge):
                if not isinstance(judge, Mapping):
                    raise ValueError(f"evaluator.judge must be a mapping or null, got {judge!r}")
                from ragsweep.errors import build_config

                build_config(Judge.Config, dict(judge), "evaluator.judge")
            needs = [
                what for what, yes in (
                    ("the extractor", components.needs_judge("extractor", self.extractor)),
                    ("the checker", components.needs_judge("checker", self.checker)),
                    ("trace_mode annotator", self.trace_mode == "annotator"),
                ) if yes
            ]
            if needs and judge is None:
                raise ValueError(f"evaluator.judge must be set for {', '.join(needs)} (a server and model for the judge)")

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.errors import build_config

        self.config = build_config(self.Config, kwargs, "evaluator")

    def __repr__(self) -> str:
        return f"Evaluator(name={self.config.name!r})"

    @property
    def enabled(self) -> bool:
        return self.config.name != "none"

    #: what ``progress`` is called with, in order
    STEPS = ("claims", "entailment", "trace", "ragas")

    @property
    def families(self) -> tuple[str, ...]:
        """The metric families this evaluator's records carry per question (the registry
        aggregates them: :func:`ragsweep.analysis.scoring.score_run`)."""
        if not self.enabled:
            return ()
        cfg = self.config
        return ("ragchecker",) + ("trace",) * (cfg.trace_mode in ("annotator", "entailment")) + ("ragas",) * bool(cfg.ragas)

    def evaluate(
        self, records: Sequence[Mapping[str, Any]], cache: Any = None, progress: Any = None, budget: Any = None
    ) -> tuple[list[dict], dict[str, float]]:
        """Scored copies of ``records`` (each with its per-question ``metrics``) and the run's
        counters (``judge/*``, ``evaluator/*``; no aggregates: :func:`ragsweep.analysis.scoring.score_run`
        aggregates, once); ``progress(step)`` is called as each of ``STEPS``
        ends. The judge server, if this evaluator starts one, is stopped before this returns,
        also on error. ``budget``: what the judge's calls may spend (with its price); the questions
        of the calls it kept from being sent are left in ``self.cut``."""
        self.cut: set[Any] = set()
        if not self.enabled:
            return [dict(r) for r in records], {}
        judge = Judge.from_spec(self.config.judge)
        if judge is not None:
            judge.budget = budget
        try:
            return evaluate_records(records, cache=cache, progress=progress, **self.parts(judge, cache))
        finally:
            if judge is not None:
                self.cut = set(judge.cut)
                judge.close()

    def parts(self, judge: Any = None, cache: Any = None) -> dict[str, Any]:
        """The built steps of one evaluation: ``extractor``, ``checker``, ``trace``, ``ragas``."""
        from ragsweep.judge.annotator import TraceAnnotator
        from ragsweep.judge.ragas import Embedder, Ragas

        cfg = self.config
        if cfg.trace_mode == "annotator":
            if judge is None:
                raise components.EvaluatorConfigError("evaluator.trace_mode annotator needs a judge: set evaluator.judge")
            trace: Any = AnnotatorTrace(TraceAnnotator(judge))
        elif cfg.trace_mode == "entailment":
            trace = EntailmentTrace(attribution=cfg.trace_attribution, prune=cfg.prune)
        else:
            trace = None
        ragas = None
        if cfg.ragas:
            ragas = Ragas(judge=judge, embedder=Embedder(model=cfg.embedding_model, cache=cache),
                          n_questions=cfg.n_questions, context_threshold=cfg.context_threshold)
        return {
            "extractor": components.build("extractor", cfg.extractor, judge),
            "checker": components.build("checker", cfg.checker, judge),
            "trace": trace,
            "ragas": ragas,
        }


__all__ = ["Evaluator"]
