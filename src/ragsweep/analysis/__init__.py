"""What the numbers mean: statistics, verdicts, reports, human labels, search over a space.

- :mod:`ragsweep.analysis.scoring`: a run's aggregates, each with its count and interval.
- :mod:`ragsweep.analysis.stats`: bootstrap intervals, paired tests, Holm, equivalence, halving decisions.
- :mod:`ragsweep.analysis.ppi`: prediction-powered estimates from a few human labels.
- :mod:`ragsweep.analysis.report`: ``ragsweep-report``: the paper-style table, verdicts, figures, compare pages.
- :mod:`ragsweep.analysis.labels`: ``ragsweep-label``: sample, collect and use human labels.
- :mod:`ragsweep.analysis.search`: objectives and rung decisions of a search over a space.
- :mod:`ragsweep.analysis.degenerate`: what each point of a sweep really changes, before any work.
- :mod:`ragsweep.analysis.cost`: what a run cost (tokens, calls, seconds, money).
"""
