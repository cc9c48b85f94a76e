"""The ``evaluator`` config group's component: ``instantiate(cfg.evaluator).evaluate(records, cache)``.

    evaluator: offline   # default: offline claims + offline checker + MiniLM RAGAS substitutes;
                         # no network call, no server
    evaluator: llm       # a judge model (own server: managed llama.cpp SmolLM2 by default, or
                         # any OpenAI-compatible endpoint) extracts claims and checks them
    evaluator: nli       # offline claims + an NLI cross-encoder checker
    evaluator: none      # no evaluation: records unchanged, no metrics

``Evaluator.Config`` is the YAML schema (validated before any work starts):

- ``name``: offline | llm | nli | none (``none`` turns evaluation off), or any label.
- ``extractor``: ``offline`` / ``llm``, or a mapping ``{mode: offline|llm, ...options}`` (LLM:
  ``claim_format: triplet|sentence``, ``max_tokens``, ``use_question``; offline:
  ``split_clauses``, ``min_words``) or ``{_target_: ..., ...}``.
- ``checker``: ``offline`` / ``llm`` / ``nli``, or ``{mode: ..., ...options}`` or
  ``{_target_: ragsweep.evaluator.offline.OfflineChecker, ...}`` (Hydra may hand the object
  already built).
- ``judge``: null, or the judge's own server and sampling
  (:class:`ragsweep.evaluator.judge.Judge.Config`): ``server: {_target_: ...LlamaCppServer |
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

Metric names: see :mod:`ragsweep.evaluator.pipeline`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ragsweep.evaluator.claims import LLMExtractor, OfflineExtractor
from ragsweep.evaluator.judge import Judge, LLMChecker, _plain
from ragsweep.evaluator.pipeline import TRACE_ATTRIBUTIONS, TRACE_MODES, build_checker, build_extractor, evaluate_records

log = logging.getLogger(__name__)

CHECKER_MODES = ("offline", "llm", "nli")
EXTRACTOR_MODES = ("offline", "llm")


def _validate_target(spec: Mapping[str, Any], prefix: str) -> None:
    from hydra.utils import get_class

    from ragsweep.retriever.base import build_config

    target = spec["_target_"]
    try:
        cls = get_class(target)
    except Exception as exc:  # noqa: BLE001 - hydra raises several kinds
        raise ValueError(f"{prefix}._target_: cannot import {target!r} ({exc})") from None
    schema = getattr(cls, "Config", None)
    if schema is not None:
        build_config(schema, {k: v for k, v in spec.items() if not str(k).startswith("_")}, prefix)


def _check_component(spec: Any, prefix: str, modes: Sequence[str]) -> str | None:
    """Validate an extractor/checker spec; return its mode (None for a _target_ or an object)."""
    from ragsweep.retriever.base import build_config

    spec = _plain(spec)
    if isinstance(spec, str):
        spec = {"mode": spec}
    if isinstance(spec, Mapping):
        if "_target_" in spec:
            _validate_target(spec, prefix)
            target = str(spec["_target_"])
            return "llm" if target.endswith((".LLMChecker", ".LLMExtractor")) else None
        opts = dict(spec)
        mode = opts.pop("mode", "offline")
        if mode not in modes:
            raise ValueError(f"{prefix}.mode must be one of {', '.join(modes)}, got {mode!r}")
        schema = {
            ("evaluator.extractor", "offline"): OfflineExtractor.Config,
            ("evaluator.extractor", "llm"): LLMExtractor.Config,
            ("evaluator.checker", "llm"): LLMChecker.Config,
        }.get((prefix, mode))
        if schema is None and prefix == "evaluator.checker":
            if mode == "nli":
                from ragsweep.evaluator.nli import NLIChecker

                schema = NLIChecker.Config
            else:
                from ragsweep.evaluator.offline import OfflineChecker

                schema = OfflineChecker.Config
        build_config(schema, opts, prefix)
        return mode
    if spec is None:
        return "offline"
    return "llm" if getattr(spec, "judge", False) is None else None  # an object built by Hydra


class Evaluator:
    """Claim-level evaluation of generated records (RAGChecker + TRACe + RAGAS)."""

    @dataclass
    class Config:
        name: str = "offline"
        extractor: Any = field(default_factory=lambda: {"mode": "offline"})
        checker: Any = "offline"
        judge: Any = None
        trace_mode: str = "entailment"
        trace_attribution: str = "cover"
        prune: bool = True
        ragas: bool = True
        embedding_model: str = "minilm"
        context_threshold: float = 0.5
        n_questions: int = 3

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
            n = self.n_questions
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"evaluator.n_questions must be an integer >= 1, got {n!r}")
            ex_mode = _check_component(self.extractor, "evaluator.extractor", EXTRACTOR_MODES)
            ck_mode = _check_component(self.checker, "evaluator.checker", CHECKER_MODES)
            judge = _plain(self.judge)
            if judge is not None and not isinstance(judge, Judge):
                if not isinstance(judge, Mapping):
                    raise ValueError(f"evaluator.judge must be a mapping or null, got {judge!r}")
                from ragsweep.retriever.base import build_config

                build_config(Judge.Config, dict(judge), "evaluator.judge")
            needs = [
                what for what, yes in (
                    ("extractor mode llm", ex_mode == "llm"),
                    ("checker mode llm", ck_mode == "llm"),
                    ("trace_mode annotator", self.trace_mode == "annotator"),
                ) if yes
            ]
            if needs and judge is None:
                raise ValueError(f"evaluator.judge must be set for {', '.join(needs)} (a server and model for the judge)")

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.retriever.base import build_config

        self.config = build_config(self.Config, kwargs, "evaluator")

    def __repr__(self) -> str:
        return f"Evaluator(name={self.config.name!r})"

    @property
    def enabled(self) -> bool:
        return self.config.name != "none"

    def evaluate(self, records: Sequence[Mapping[str, Any]], cache: Any = None) -> tuple[list[dict], dict[str, float]]:
        """Scored copies of ``records`` and the aggregate metrics (names in
        :mod:`ragsweep.evaluator.pipeline`). The judge server, if this evaluator starts one, is
        stopped before this returns, also on error."""
        if not self.enabled:
            return [dict(r) for r in records], {}
        cfg = self.config
        judge = Judge.from_spec(cfg.judge)
        try:
            return evaluate_records(
                records,
                extractor=build_extractor(cfg.extractor, judge),
                checker=build_checker(cfg.checker, judge),
                cache=cache,
                trace_mode=cfg.trace_mode,
                trace_attribution=cfg.trace_attribution,
                ragas=cfg.ragas,
                judge=judge,
                prune=cfg.prune,
                context_threshold=cfg.context_threshold,
                n_questions=cfg.n_questions,
                embedding_model=cfg.embedding_model,
            )
        finally:
            if judge is not None:
                judge.close()


__all__ = ["Evaluator"]
