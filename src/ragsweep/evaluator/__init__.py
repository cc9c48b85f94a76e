"""Evaluation: claims, entailment checks, and the metrics computed from them.

- :mod:`ragsweep.evaluator.ragchecker_metrics`: RAGChecker metrics from the entailment matrices.
- :mod:`ragsweep.evaluator.trace`: TRACe (RAGBench) relevance, utilization, completeness, adherence.
- :mod:`ragsweep.evaluator.schema`: RAGChecker input/output files.
- :mod:`ragsweep.evaluator.score_cli`: the ``ragsweep-score`` command.
"""
