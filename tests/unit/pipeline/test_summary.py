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


def test_a_priced_run_shows_what_it_spent_beside_its_estimate_and_its_retries():
    m = {"ledger/attempted": 3, "ledger/answered": 3, "ledger/failed_generation": 0, "ledger/not_attempted": 1,
         "generator/calls": 5, "generator/cache_hits": 1, "generator/prompt_tokens": 900, "generator/completion_tokens": 80,
         "judge/calls": 20, "generator/retries": 3, "generator/rate_limited": 2, "judge/retries": 1,
         "cost/usd": 0.0123, "cost/usd_generation": 0.0023, "cost/usd_judge": 0.01,
         "estimate/usd": 0.0150, "estimate/usd_low": 0.009, "estimate/usd_high": 0.04}
    result = RunResult(m, name="bm25-k4", status="BUDGET REACHED",
                       budget="budget_usd=0.02 set ($0.0123 spent): 1 question(s) not attempted, their work could pass it")
    lines = format_summary(result, []).splitlines()
    assert lines[0] == "ragsweep: bm25-k4  BUDGET REACHED"
    assert lines[1] == ("questions: 3 attempted, 3 answered, 0 failed generation, 0 failed in the judge, "
                        "1 not attempted (budget)")
    assert ("model calls: 5 generation (1 from cache), 900 prompt + 80 completion tokens; 20 judge; "
            "4 retried (2 rate-limited, HTTP 429)") in lines
    assert "cost: $0.0123 spent (generation $0.0023, judge $0.0100); estimated $0.0150, range $0.0090 .. $0.0400" in lines
    assert any(line.startswith("budget: budget_usd=0.02 set ($0.0123 spent)") for line in lines)


def test_a_dry_run_summary_is_the_estimate():
    result = RunResult({}, name="x", status="DRY RUN", estimate=["estimate before any model call: 1 system", "  total $1"])
    assert format_summary(result, []).splitlines() == [
        "ragsweep: x  DRY RUN", "estimate before any model call: 1 system", "  total $1",
        "nothing was called and nothing logged (--dry-run)"]


def test_the_judge_line_is_one_sentence_ending_with_the_card():
    from ragsweep.judge.card import card

    result = RunResult({}, name="x", judge=card({"name": "offline", "extractor": "offline", "checker": "offline"}),
                       judge_card_uri="/runs/1/artifacts/judge_card.md")
    (line,) = [ln for ln in format_summary(result, []).splitlines() if ln.startswith("judge:")]
    assert line.endswith("; full card: /runs/1/artifacts/judge_card.md") and ". " not in line.replace("e.g. ", "")
