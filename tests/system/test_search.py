"""Search: objectives and directions, what a job returns to its sweeper, successive-halving rung
decisions with paired statistics, the optuna callback, and both sweepers end to end."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pytest
from omegaconf import OmegaConf

from ragsweep.analysis import search
from ragsweep.analysis.search import Entry, decide_rung, job_return


def _vals(mean, n=30, spread=0.05, seed=0):
    rng = np.random.default_rng(seed)
    return {f"q{i}": float(v) for i, v in enumerate(mean + spread * rng.standard_normal(n))}


def test_objectives_and_directions():
    assert search.objectives(OmegaConf.create({})) == ["ragchecker/overall/f1"]
    assert search.objectives(OmegaConf.create({"sweep": {"objectives": "retrieval/ndcg_at_k"}})) == ["retrieval/ndcg_at_k"]
    two = OmegaConf.create({"sweep": {"objectives": ["ragchecker/overall/f1", "cost/calls"]}})
    assert search.objectives(two) == ["ragchecker/overall/f1", "cost/calls"]
    assert search.direction("ragchecker/overall/f1") == "maximize"
    assert search.direction("ragchecker/generator/hallucination") == "minimize"
    assert search.direction("cost/calls") == "minimize"


class _Result(dict):
    run_id = "r1"
    records = [
        {"query_id": "a", "metrics": {"ragchecker/overall/f1": 50.0}},
        {"query_id": "b", "metrics": {"ragchecker/overall/f1": 100.0}},
        {"query_id": "c", "error": "timeout", "metrics": {"ragchecker/overall/f1": 0.0}},  # failed: left out
    ]


def test_job_return_is_the_objective_for_optuna_and_a_record_for_halving():
    metrics = _Result({"ragchecker/overall/f1": 75.0, "generator/calls": 3, "generator/prompt_tokens": 10})
    one = OmegaConf.create({"sweep": {"objectives": ["ragchecker/overall/f1"]}})
    assert job_return(metrics, one) == 75.0
    two = OmegaConf.create({"sweep": {"objectives": ["ragchecker/overall/f1", "cost/calls"]}})
    assert job_return(metrics, two) == [75.0, 3.0]  # cost/* computed from the logged metrics
    rec = job_return(metrics, one, {search.RETURN_KEY: search.RETURN_RECORDS})
    assert rec["run_id"] == "r1" and rec["objectives"] == {"ragchecker/overall/f1": 75.0}
    assert rec["per_question"] == {"a": 50.0, "b": 100.0}
    assert rec["cost"]["cost/generation_calls"] == 3.0


def test_rung_drops_significantly_worse_and_ranked_out_systems_only():
    best = _vals(0.80, seed=1)
    alt = [0.2 if i % 2 else -0.2 for i in range(len(best))]  # noisy differences with an exact mean

    def shifted(by, sign=1.0):
        return {q: v + sign * a - by for (q, v), a in zip(best.items(), alt)}

    entries = [
        Entry("best", best),
        Entry("tied_high", shifted(0.01)),  # not significantly worse, ranked 2nd: promoted
        # not significantly worse than any system (its noise is the opposite of tied_high's, so the two
        # differ by +-0.4, not by exactly 0.01 on every question: that would show tied_high better), ranked out
        Entry("tied_low", shifted(0.02, sign=-1.0)),
        Entry("much_worse", _vals(0.40, seed=4)),  # significantly worse than the best
        Entry("failed", None, error="boom"),
    ]
    ds = {d.system: d for d in decide_rung(entries, keep=2, scale=1.0)}
    assert ds["best"].decision == "best" and ds["best"].rank == 1
    assert ds["tied_high"].decision == "promoted"
    assert ds["tied_low"].decision == "dropped:ranked_out"
    assert ds["much_worse"].decision == "dropped:worse" and ds["much_worse"].p_adj < 0.05
    assert ds["failed"].decision == "dropped:failed"
    assert search.promoted(list(ds.values())) == ["best", "tied_high"]
    # comparison with the best: the tied systems are far from significance, the best is never tested
    assert ds["tied_high"].p_adj > 0.5 and ds["best"].p_adj is None


def test_systems_tied_at_the_cut_off_share_a_rank_and_are_all_kept():
    same = {"q0": 0.0, "q1": 0.0}
    entries = [Entry(name, dict(same)) for name in ("c", "a", "b")] + [Entry("z", {"q0": -1.0, "q1": -1.0})]
    ds = {d.system: (d.rank, d.decision) for d in decide_rung(entries, keep=1)}
    assert ds == {"a": (1, "best"), "b": (1, "promoted"), "c": (1, "promoted"), "z": (4, "dropped:ranked_out")}


def test_significantly_worse_is_dropped_even_when_ranked_in():
    entries = [Entry("a", _vals(0.9, seed=1)), Entry("b", _vals(0.3, seed=2))]
    ds = {d.system: d.decision for d in decide_rung(entries, keep=2, scale=1.0)}
    assert ds == {"a": "best", "b": "dropped:worse"}


def test_lower_is_better_objective_and_final_rung_tie_set():
    entries = [Entry("cheap", _vals(1.0, seed=1)), Entry("close", _vals(1.01, seed=2)), Entry("dear", _vals(5.0, seed=3))]
    ds = {d.system: d.decision for d in decide_rung(entries, keep=1, higher_is_better=False, final=True, scale=10.0)}
    assert ds == {"cheap": "best", "close": "tied", "dear": "dropped:worse"}


def test_rungs_markdown_and_json():
    rung = {"rung": 0, "limit": 20, "fidelity": "dataset.limit", "objective": "ragchecker/overall/f1", "keep": 1,
            "final": False, "decisions": decide_rung([Entry("a", _vals(0.9)), Entry("b", _vals(0.2, seed=5))], keep=1, scale=1.0)}
    md = search.rungs_markdown([rung])
    assert "Rung 0: 20 questions, 2 systems, 1 kept" in md and "dropped:worse" in md
    back = json.loads(search.rungs_json([rung]))
    assert back[0]["decisions"][0]["system"] == "a" and back[0]["decisions"][0]["p"] is None
    assert search.rungs_markdown(back) == md  # the report renders the logged JSON the same way


def test_halving_sweeper_is_a_hydra_plugin_that_expands_the_space(compose_cfg):
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    names = [p.__name__ for p in Plugins.instance().discover(Sweeper)]
    assert "HalvingSweeper" in names and "OptunaSweeper" in names
    from hydra_plugins.ragsweep_halving.halving_sweeper import HalvingSweeper

    sw = HalvingSweeper(params={"retriever": "bm25,dense", "retriever.top_k": "2,4"}, rungs=[2, 4])
    systems = sw.systems(["dataset.limit=7", "reranker=none,embedding", "prompt=short"])
    assert len(systems) == 8 and all(not any(o.startswith("dataset.limit") for o in s) for s in systems)
    assert sorted(sw.labels.values())[0] == "retriever=bm25 retriever.top_k=2 reranker=embedding"
    with pytest.raises(ValueError, match="keep"):
        HalvingSweeper(keep=0)
    cfg = compose_cfg("+experiment=search_clapnq", "hydra/sweeper=ragsweep_halving")
    assert cfg.sweep.objectives == ["ragchecker/overall/f1"]


def test_search_callback_sets_optuna_directions_and_nsga2():
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from conftest import CONF_DIR

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=["+experiment=search_clapnq", "hydra/sweeper=optuna",
                                               "sweep.objectives=[ragchecker/overall/f1,cost/calls]"], return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    assert "TPESampler" in cfg.hydra.sweeper.sampler._target_
    search.SearchCallback().on_multirun_start(cfg)
    assert list(cfg.hydra.sweeper.direction) == ["maximize", "minimize"]
    assert "NSGAIISampler" in cfg.hydra.sweeper.sampler._target_


# -- end to end ------------------------------------------------------------------------------------
def _sweep(tmp_path, *args, timeout=500):
    from test_launchers import sweep_cmd, sweep_env, tiny_dataset

    cmd = sweep_cmd(*tiny_dataset(tmp_path, 4), "generator.max_tokens=8", f"hydra.sweep.dir={tmp_path / 'multirun'}", *args)
    proc = subprocess.run(cmd, cwd=tmp_path, env=sweep_env(tmp_path), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


@pytest.mark.slow
def test_halving_sweep_end_to_end_logs_rungs_and_promoted_systems_reuse_the_cache(tmp_path):
    from ragsweep import tracking
    from test_launchers import mlflow_runs, parents_and_children

    _sweep(tmp_path, "retriever.top_k=1,2,3", "hydra/sweeper=ragsweep_halving", "hydra.sweeper.rungs=[2,4]", "hydra.sweeper.keep=0.5")
    parents, children = parents_and_children(mlflow_runs(tmp_path))
    (parent,) = parents
    assert parent.info.status == "FINISHED" and parent.data.tags["ragsweep.search"] == "halving"
    assert parent.data.tags["ragsweep.rungs"].startswith("3@2 -> ") and "@4; best: retriever.top_k=" in parent.data.tags["ragsweep.rungs"]
    cl = tracking.client(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    found, rungs = tracking.read_json_artifact(cl, parent.info.run_id, "rungs.json")
    assert found and [r["limit"] for r in rungs] == [2, 4] and rungs[1]["final"]
    promoted = [d for d in rungs[0]["decisions"] if d["decision"] in ("best", "promoted")]
    assert len(rungs[0]["decisions"]) == 3 and 2 <= len(promoted) == len(rungs[1]["decisions"])  # keep 0.5: 2, or more on a tie
    assert {d["decision"] for d in rungs[1]["decisions"]} <= {"best", "tied", "dropped:worse"}
    assert len(children) == 3 + len(promoted) and all(c.info.status == "FINISHED" for c in children)
    for c in children:
        if c.data.params["dataset.limit"] == "4":  # promoted: the 2 questions of rung 0 came from the cache
            assert c.data.metrics["cache/generation/hits"] == 2 and c.data.metrics["generator/calls"] == 2
        else:
            assert c.data.metrics["cache/generation/hits"] == 0
    # the report shows the rungs, the Pareto front and the tie set
    from ragsweep.analysis.report.cli import build_report

    rep = build_report(f"sqlite:///{tmp_path}/mlruns/mlflow.db", "default", None, str(tmp_path / "report"))
    md = (rep.out / "search.md").read_text()
    assert "### Rung 0: 2 questions, 3 systems" in md and f"### Rung 1: 4 questions, {len(promoted)} systems" in md
    assert "Quality against cost" in md and "Statistically tied with it" in md
    assert (rep.out / "fig_pareto.png").is_file()


@pytest.mark.slow
def test_optuna_sweep_end_to_end_maximises_the_declared_objective(tmp_path):
    from test_launchers import mlflow_runs, parents_and_children

    # conf/config.yaml registers ragsweep.analysis.search.SearchCallback: the direction comes from the registry
    proc = _sweep(tmp_path, "retriever.top_k=1,2", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=1")
    assert "Directions: ['maximize']" in proc.stdout + proc.stderr
    parents, children = parents_and_children(mlflow_runs(tmp_path))
    assert len(parents) == 1 and parents[0].info.status == "FINISHED" and 1 <= len(children) <= 2
    res = (tmp_path / "multirun" / "optimization_results.yaml").read_text()
    best = max(c.data.metrics["ragchecker/overall/f1"] for c in children)
    assert math.isclose(float(res.split("best_value:")[1].split()[0]), best)
