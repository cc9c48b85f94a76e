"""Evaluation: claims, entailment checks, and the metrics computed from them.

- :mod:`ragsweep.judge.core`: the ``evaluator`` config group's component (``Evaluator``).
- :mod:`ragsweep.judge.components`: the two component contracts (``Checker``, ``Extractor``)
  and how a member of ``conf/evaluator/checker`` / ``conf/evaluator/extractor`` is built.
- :mod:`ragsweep.judge.labels`: the one label vocabulary (``Label``).
- :mod:`ragsweep.judge.pipeline`: ``evaluate_records`` (claims -> checks -> TRACe -> RAGAS ->
  metrics), with :mod:`~ragsweep.judge.checking` (cached checks) and
  :mod:`~ragsweep.judge.trace_steps` (TRACe annotations).
- checkers: :mod:`~ragsweep.judge.offline`, :mod:`~ragsweep.judge.nli`,
  :mod:`~ragsweep.judge.llm_checker`; extractors: :mod:`~ragsweep.judge.claims`,
  :mod:`~ragsweep.judge.llm_extractor`; the judge client: :mod:`~ragsweep.judge.llm_judge`.
- :mod:`ragsweep.judge.ragchecker_metrics`: RAGChecker metrics from the entailment matrices.
- :mod:`ragsweep.judge.trace`: TRACe (RAGBench) relevance, utilization, completeness, adherence.
- :mod:`ragsweep.judge.schema`: RAGChecker input/output files.
- the ``ragsweep-score`` command is :mod:`ragsweep.pipeline.score_cli`.

Every logged metric is described in the registry, :mod:`ragsweep.judge.metrics`.
"""
