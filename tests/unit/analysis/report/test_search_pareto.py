"""The report's quality-vs-cost section: Pareto front, intervals, tie set with the best (comparison with the best)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ragsweep.analysis.report.pareto import pareto_section, points


def _run(rid, top_k, calls, limit="20", f1=None):
    metrics = {"generator/calls": calls, "judge/calls": 0}
    if f1 is not None:
        metrics["ragchecker/overall/f1"] = f1
    return SimpleNamespace(info=SimpleNamespace(run_id=rid, run_name=f"bm25-k{top_k}"),
                           data=SimpleNamespace(metrics=metrics, params={"top_k": str(top_k), "retriever": "bm25", "dataset.limit": limit}))


def _records(values):
    return [{"query_id": f"q{i}", "metrics": {"ragchecker/overall/f1": float(v)}} for i, v in enumerate(values)]


def test_front_intervals_and_tie_set(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.uniform(20, 80, 40)
    alt = np.where(np.arange(40) % 2, 10.0, -10.0)
    runs = [_run("a", 1, 10), _run("b", 2, 20), _run("c", 3, 30), _run("d", 4, 25)]
    recs = {
        "a": _records(base - 30),  # cheapest, clearly worse: on the front, not tied
        "b": _records(base),  # the best
        "c": _records(base + alt - 1),  # dearer and not significantly worse: tied, not on the front
        "d": _records(base - 20),  # worse and dearer than b: dominated, not tied
    }
    pts = {p.run_id: p for p in points(runs, recs, "ragchecker/overall/f1", "cost/calls")[0]}
    assert pts["b"].best and pts["b"].on_front and pts["a"].on_front
    assert not pts["c"].on_front and pts["c"].tied and pts["c"].p_adj >= 0.05
    assert not pts["a"].tied and not pts["d"].tied and not pts["d"].on_front
    assert pts["b"].low < pts["b"].mean < pts["b"].high and pts["b"].n == 40
    assert pts["a"].cost == 10.0  # cost/calls computed from generator/judge calls when not logged
    md, fig = pareto_section(runs, recs, "ragchecker/overall/f1", "cost/calls", tmp_path)
    assert "Best: **top_k=2**" in md and "1 system(s): top_k=3" in md
    assert fig == tmp_path / "fig_pareto.png" and fig.stat().st_size > 1000


def test_only_the_final_rung_is_compared_and_missing_records_fall_back_to_the_aggregate(tmp_path):
    runs = [_run("r0a", 1, 5, limit="2", f1=10.0), _run("r0b", 2, 5, limit="2", f1=90.0),
            _run("r1a", 1, 5, limit="4", f1=40.0), _run("r1b", 2, 5, limit="4", f1=30.0)]
    pts, note = points(runs, {}, "ragchecker/overall/f1", "cost/calls")
    assert {p.run_id for p in pts} == {"r1a", "r1b"} and "dataset.limit=4" in note
    best = next(p for p in pts if p.best)
    assert best.run_id == "r1a" and best.n == 0  # no records: the logged aggregate, no interval, no test
    assert not next(p for p in pts if not p.best).tied
    md, _ = pareto_section(runs, {}, "ragchecker/overall/f1", "cost/calls", tmp_path)
    assert "compared: the 2 at dataset.limit=4" in md


def test_the_best_is_chosen_over_the_questions_every_system_scored():
    # A scores 60 on q0-q19 and failed q20-q39 (null), B scores 100 on q0-q19 and 0 on q20-q39:
    # over its own questions A's mean (60) beats B's (50), but B is better on every shared question
    runs = [_run("a", 1, 10), _run("b", 2, 10)]
    a = [{"query_id": f"q{i}", "metrics": {"ragchecker/overall/f1": 60.0 if i < 20 else None}} for i in range(40)]
    b = [{"query_id": f"q{i}", "metrics": {"ragchecker/overall/f1": 100.0 if i < 20 else 0.0}} for i in range(40)]
    pts = {p.run_id: p for p in points(runs, {"a": a, "b": b}, "ragchecker/overall/f1", "cost/calls")[0]}
    assert pts["b"].best and not pts["a"].best
    assert not pts["a"].tied and pts["a"].p_adj < 0.05


def test_identical_systems_are_all_tied_with_the_best():
    # eight systems with exactly the same per-question values: none may be called worse
    rng = np.random.default_rng(1)
    vals = rng.uniform(0, 100, 12)
    runs = [_run(f"s{i}", i + 1, 10 + i) for i in range(8)]
    recs = {f"s{i}": _records(vals) for i in range(8)}
    pts = points(runs, recs, "ragchecker/overall/f1", "cost/calls")[0]
    assert sum(p.best for p in pts) == 1 and all(p.tied for p in pts)


def test_runs_the_short_params_cannot_tell_apart_are_labelled_by_what_differs():
    """Two weight formats of the same system (a knob without a short name): labelled
    ``model_format=...`` as in the report's tables, not twice ``top_k=... `` or by run name."""
    runs = [_run("a", 5, 10, f1=20.0), _run("b", 5, 10, f1=30.0), _run("c", 10, 10, f1=25.0)]
    for r, fmt in zip(runs, ("q8_0", "f16", "q8_0")):
        r.data.params["generator.server.model_format"] = fmt
    labels = {p.run_id: p.label for p in points(runs, {}, "ragchecker/overall/f1", "cost/calls")[0]}
    assert labels == {"a": "top_k=5 model_format=q8_0", "b": "top_k=5 model_format=f16",
                      "c": "top_k=10 model_format=q8_0"}


def test_an_objective_without_a_known_range_has_no_tie_set(tmp_path):
    # issue 50: the tie set's test needs the objective's range; without one it says so, and calls none worse
    runs = [_run("a", 1, 10), _run("b", 2, 20)]
    recs = {r: [{"query_id": f"q{i}", "metrics": {"time/latency_s": v}} for i in range(30)] for r, v in (("a", 1.0), ("b", 9.0))}
    pts = {p.run_id: p for p in points(runs, recs, "time/latency_s", "cost/calls", higher_is_better=False)[0]}
    assert pts["a"].best and pts["b"].p_adj is None
    md, _ = pareto_section(runs, recs, "time/latency_s", "cost/calls", tmp_path, higher_is_better=False)
    assert "Tied with it: not testable (`time/latency_s` has no known range in the metric registry)" in md
