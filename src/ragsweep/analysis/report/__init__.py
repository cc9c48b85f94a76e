"""``ragsweep-report``: the paper-style table, figures and direction checks of one sweep, from MLflow.

    ragsweep-report --experiment ragchecker_topk [--run PARENT_RUN_ID] [--out DIR] [--tracking-uri URI]

Reads (through :mod:`ragsweep.tracking`) the latest parent run of the experiment (tag ``ragsweep.role=parent``; or the one given with
``--run``) and its FINISHED child runs (tag ``mlflow.parentRunId``), then writes to ``--out``
(default ``reports/NAME/``) and logs to the parent run under ``report/``:

- ``table.md`` / ``table.csv``: one row per system, in the layout of the paper the sweep
  reproduces: RAGChecker Table 3 (``layout: ragchecker``) or RAGBench Table 6 (``layout: ragbench``);
  RAGChecker's ↑/↓ marks come from each metric's direction in the metric registry;
- ``fig_<param>.png``: one figure per swept parameter, each relevant metric against it (means over
  the other swept parameters, one bar series per value of the next swept parameter), like
  RAGChecker Fig. 6/7/8/10 and RAGBench Fig. 4;
- ``directions.md`` / ``directions.json``: each direction the paper reports (the ``sweep.directions``
  of the experiment config) as a verdict from paired tests over questions (REPRODUCED, SAME
  DIRECTION NOT SIGNIFICANT, OPPOSITE DIRECTION NOT SIGNIFICANT, NO DIFFERENCE NOT SIGNIFICANT,
  CONTRADICTED, NOT TESTABLE, NO DATA) with p, n
  and the questions needed for 80% power; ``comparisons.md``: every system against the baseline.
  Table cells are ``mean ± half-width (n)``, figures carry error bars. The formulas are in
  docs/statistics.md.

What the sweep was comes from the parent run's ``sweep.json`` artifact (the resolved ``sweep`` node
of ``conf/experiment/NAME.yaml``); without it, from the packaged ``conf/experiment/NAME.yaml``;
without that, inferred from the runs (layout from the metrics, params = short params that vary).

Child runs: only FINISHED ones count. Two runs of the same system (same ``ragsweep.system_key``
tag, see :mod:`ragsweep.tracking.identity`; for runs without it, the same logged params, volatile
ones such as ``run_name``, ``mlflow.*``, ``cache_dir`` aside), e.g. after a resumed sweep: the one
that started last is kept.

Modules: ``frame`` (runs -> one row per system; value order, labels, metric scale and direction),
``table``, ``directions``, ``figures``, ``cli`` (the command).

Direction rules: :mod:`ragsweep.analysis.report.directions` (``expect``: increasing, decreasing, flat,
``{higher_for: V}``, ``{lower_for: V}`` with optional ``than``; ``tol`` for flat, default 2% of the
metric's scale) and docs/statistics.md.
"""

from __future__ import annotations

from ragsweep.analysis.report.cli import ARTIFACT_DIR, PROG, Report, build_report, load_sweep_spec, main, parse_args
from ragsweep.analysis.report.directions import (CONTRADICTED, NO_DATA, NO_DIFF_NS, NOT_REPRODUCED, NOT_TESTABLE, OPPOSITE_NS,
                                        REPRODUCED, SAME_NS, Verdict, check_direction, decide, parse_expect)
from ragsweep.analysis.report.frame import ReportError, metric_info, metric_scale, runs_frame, sort_values
from ragsweep.analysis.report.table import LAYOUTS, RAGBENCH_COLUMNS, RAGCHECKER_COLUMNS, build_table
from ragsweep.tracking import SHORT_PARAMS

__all__ = [
    "ARTIFACT_DIR", "CONTRADICTED", "LAYOUTS", "NO_DATA", "NO_DIFF_NS", "NOT_REPRODUCED", "NOT_TESTABLE", "OPPOSITE_NS", "PROG", "SAME_NS", "decide", "RAGBENCH_COLUMNS", "RAGCHECKER_COLUMNS",
    "REPRODUCED", "Report", "ReportError", "SHORT_PARAMS", "Verdict", "build_report", "build_table", "check_direction",
    "load_sweep_spec", "main", "metric_info", "metric_scale", "parse_args", "parse_expect", "runs_frame", "sort_values",
]
