"""The end-of-run summary: headline metrics with n and a seeded bootstrap interval, counts, where to look."""

import math

import numpy as np

from ragsweep.judge.metrics import registry
from ragsweep.pipeline.summary import RunResult, format_line, format_summary, format_table


def test_summary_shows_counts_intervals_and_where_the_run_is():
    name = "test/summary_metric"
    registry.register(registry.Metric(name, 1, True, False, lambda r: r["v"], "test"))
    records = [{"v": v} for v in (0.0, 1.0, 1.0, float("nan"))]
    result = RunResult(
        {name: 2 / 3, "generator/requests": 5, "generator/failures": 1, "generator/calls": 4, "time/generate_s": 12.5},
        name="bm25-k4", run_id="abc123", experiment_id="7", experiment_name="default",
        tracking_uri="sqlite:///mlruns/mlflow.db", records=records, records_uri="/x/records.json",
    )
    text = format_summary(result, [name, "not/logged"], total_s=20.0)
    assert text.splitlines()[0] == "ragsweep: bm25-k4  FINISHED in 20.0s"
    assert "questions: 5 attempted, 4 answered, 1 failed generation" in text
    row = next(line for line in text.splitlines() if line.strip().startswith(name))
    assert row.split()[1:] == ["0.667", "[0.000,", "1.000]", "3"]  # NaN is undefined, not counted
    assert "not/logged" not in text
    assert "time: generate 12.5s" in text
    assert "mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db" in text
    assert "http://127.0.0.1:5000/#/experiments/7/runs/abc123" in text
    assert "records: /x/records.json" in text
    assert format_line(result, [name]) == "ragsweep: bm25-k4  FINISHED  summary_metric=0.667  failed=1  run abc123"


def test_sweep_table_has_a_row_per_system_and_says_na_for_missing_values():
    rows = [("bm25-k2", "FINISHED", {"a/f1": 0.5, "b/x": 1.0}), ("bm25-k4", "FAILED", {"a/f1": float("nan")})]
    lines = format_table(rows, ["a/f1", "b/x", "c/never"]).splitlines()
    assert lines[0].split() == ["system", "status", "f1", "x"]
    assert lines[1].split() == ["bm25-k2", "FINISHED", "0.5", "1"]
    assert lines[2].split() == ["bm25-k4", "FAILED", "n/a", "n/a"]
    assert format_table([], ["a/f1"]) == ""


def test_the_terminal_drops_an_interrupts_echo_but_keeps_real_errors():
    import logging
    import sys

    from ragsweep.signals import DropInterrupts

    def record(exc):
        try:
            raise exc
        except BaseException:
            return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task exception was never retrieved", (), sys.exc_info())

    assert DropInterrupts().filter(record(KeyboardInterrupt("signal 15"))) is False
    assert DropInterrupts().filter(record(ValueError("real"))) is True
    assert DropInterrupts().filter(logging.LogRecord("x", logging.ERROR, __file__, 1, "no exc", (), None)) is True


def test_headline_metrics_lead_with_their_interval_and_n():
    from ragsweep.pipeline.summary import headline_first

    m = {"data/queries": 4, "a/x": float("nan"), "a/x/n": 0, "b/y": 0.5, "b/y/ci_low": 0.2, "b/y/ci_high": 0.8,
         "b/y/n": 4, "b/y/failed": 0, "c/z": 1.0}
    out = headline_first(m, ["a/x", "b/y", "not/there"])
    assert list(out)[:4] == ["b/y", "b/y/ci_low", "b/y/ci_high", "b/y/n"]  # a/x undefined (NaN): not a headline
    assert out == m and len(out) == len(m)
