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
  of the experiment config) marked REPRODUCED, NOT REPRODUCED or NOT TESTABLE, with the numbers.

What the sweep was comes from the parent run's ``sweep.json`` artifact (the resolved ``sweep`` node
of ``conf/experiment/NAME.yaml``); without it, from the packaged ``conf/experiment/NAME.yaml``;
without that, inferred from the runs (layout from the metrics, params = short params that vary).

Child runs: only FINISHED ones count. Two runs of the same system (same ``ragsweep.system_key``
tag, see :mod:`ragsweep.tracking.identity`; for runs without it, the same logged params, volatile
ones such as ``run_name``, ``mlflow.*``, ``cache_dir`` aside), e.g. after a resumed sweep: the one
that started last is kept.

Modules: ``frame`` (runs -> one row per system; value order, labels, metric scale and direction),
``table``, ``directions``, ``figures``, ``cli`` (the command).

Direction rules (``expect`` in ``sweep.directions``). A metric's value at a parameter value is the
mean over the kept runs with that value (so over the other swept parameters); parameter values are
sorted numerically, categorical ones in the order the sweep gives them (the parent run's logged
sweeper params and overrides, else the experiment config's ``hydra.sweeper.params``), others after,
alphabetically.

- ``increasing``: every step between consecutive values rises by >= -tol and the last value
  exceeds the first by more than tol (tol default 0: monotone non-decreasing, net rise > 0);
- ``decreasing``: the mirror image;
- ``flat`` ("barely moves"): max - min <= tol; tol default 2% of the metric's scale in the metric
  registry (2.0 points for ``ragchecker/*`` metrics on 0-100, 0.02 for 0-1 metrics);
- ``{higher_for: V}`` / ``{lower_for: V}``: the mean at V exceeds (is below) the mean at every
  other value by more than tol (default 0); ``than: [U, ...]`` restricts the comparison to those.
- NOT TESTABLE: the parameter has fewer than two values, a named value is not in the sweep, or the
  metric is missing/NaN for some value.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os

from ragsweep.report.cli import ARTIFACT_DIR, PROG, Report, build_report, load_sweep_spec, main, parse_args
from ragsweep.report.directions import NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, Verdict, check_direction, parse_expect
from ragsweep.report.frame import ReportError, metric_info, metric_scale, runs_frame, sort_values
from ragsweep.report.table import LAYOUTS, RAGBENCH_COLUMNS, RAGCHECKER_COLUMNS, build_table
from ragsweep.tracking import SHORT_PARAMS

__all__ = [
    "ARTIFACT_DIR", "LAYOUTS", "NOT_REPRODUCED", "NOT_TESTABLE", "PROG", "RAGBENCH_COLUMNS", "RAGCHECKER_COLUMNS",
    "REPRODUCED", "Report", "ReportError", "SHORT_PARAMS", "Verdict", "build_report", "build_table", "check_direction",
    "load_sweep_spec", "main", "metric_info", "metric_scale", "parse_args", "parse_expect", "runs_frame", "sort_values",
]
