"""Evaluation: claims, entailment checks, and the metrics computed from them.

- :mod:`ragsweep.evaluator.core`: the ``evaluator`` config group's component (``Evaluator``).
- :mod:`ragsweep.evaluator.components`: the two component contracts (``Checker``, ``Extractor``)
  and how a member of ``conf/evaluator/checker`` / ``conf/evaluator/extractor`` is built.
- :mod:`ragsweep.evaluator.labels`: the one label vocabulary (``Label``).
- :mod:`ragsweep.evaluator.pipeline`: ``evaluate_records`` (claims -> checks -> TRACe -> RAGAS ->
  metrics), with :mod:`~ragsweep.evaluator.checking` (cached checks) and
  :mod:`~ragsweep.evaluator.trace_steps` (TRACe annotations).
- checkers: :mod:`~ragsweep.evaluator.offline`, :mod:`~ragsweep.evaluator.nli`,
  :mod:`~ragsweep.evaluator.llm_checker`; extractors: :mod:`~ragsweep.evaluator.claims`,
  :mod:`~ragsweep.evaluator.llm_extractor`; the judge client: :mod:`~ragsweep.evaluator.judge`.
- :mod:`ragsweep.evaluator.ragchecker_metrics`: RAGChecker metrics from the entailment matrices.
- :mod:`ragsweep.evaluator.trace`: TRACe (RAGBench) relevance, utilization, completeness, adherence.
- :mod:`ragsweep.evaluator.schema`: RAGChecker input/output files.
- :mod:`ragsweep.evaluator.score_cli`: the ``ragsweep-score`` command.

Every logged metric is described in the registry, :mod:`ragsweep.metrics`.
"""
