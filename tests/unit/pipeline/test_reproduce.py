"""ragsweep-reproduce: planning from the experiment configs, the state that makes it resumable, the
time left, and the page (the sweeps themselves are stubbed here; tests/system/test_reproduce.py runs them)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ragsweep.pipeline import reproduce as rp
from ragsweep.pipeline import reproduce_estimate as est
from ragsweep.pipeline import reproduce_page as page


@pytest.fixture(autouse=True)
def no_dataset_loading(monkeypatch):
    monkeypatch.setattr(rp, "_dataset_size", lambda name: 300)


def test_split_values_counts_the_choices_of_a_sweeper_value():
    assert rp.split_values("5,10,20") == ["5", "10", "20"]
    assert rp.split_values("bm25") == ["bm25"]
    assert rp.split_values("[1,2],[3,4]") == ["[1,2]", "[3,4]"]
    assert rp.split_values("'a,b',c") == ["'a,b'", "c"]
    assert rp.split_values(0.2) == ["0.2"]


def test_systems_and_sides_come_from_the_experiment_configs():
    sweeps = {s.name: s for s in rp.plan()}
    assert list(sweeps) == [*rp.RETRIEVAL, *rp.GENERATION]  # the retriever side first
    assert {n: s.systems for n, s in sweeps.items()} == {
        "ragchecker_topk_retrieval": 6, "ragchecker_chunk_size_retrieval": 6, "ragchecker_overlap_retrieval": 6,
        "ragchecker_topk": 6, "ragchecker_chunk_size": 6, "ragchecker_overlap": 6, "ragchecker_prompt": 3,
        "ragbench_case_study": 16}
    assert [n for n, s in sweeps.items() if s.retrieval_only] == list(rp.RETRIEVAL)
    assert sweeps["ragbench_case_study"].questions == 100  # its own dataset.limit
    assert sweeps["ragchecker_topk"].questions == 300


def test_options_select_and_limit_the_sweeps():
    got = rp.plan(retrieval_only=True, limit=20, overrides=["seed=1"], hidden=["cache_dir=/c"])
    assert [s.name for s in got] == list(rp.RETRIEVAL) and all(s.questions == 20 for s in got)
    s = got[0]
    assert s.command() == "ragsweep -m +experiment=ragchecker_topk_retrieval dataset.limit=20 seed=1"
    assert s.argv()[-4:] == ["+experiment=ragchecker_topk_retrieval", "dataset.limit=20", "seed=1", "cache_dir=/c"]
    assert s.key == "ragchecker_topk_retrieval dataset.limit=20 seed=1"  # the stores are not part of what ran
    assert [s.name for s in rp.plan(only=["ragchecker_prompt", "ragchecker_topk_paperqa_retrieval"])] == [
        "ragchecker_prompt", "ragchecker_topk_paperqa_retrieval"]
    with pytest.raises(SystemExit, match="no experiment config 'ragchecker_topkk'; known: .*ragchecker_topk,"):
        rp.plan(only=["ragchecker_topkk"])
    with pytest.raises(SystemExit, match="nothing to run"):
        rp.plan(only=["ragchecker_prompt"], retrieval_only=True)
    with pytest.raises(SystemExit):
        rp.parse_args(["--limit", "0"])
    with pytest.raises(SystemExit):
        rp.parse_args(["--generation-limit", "0"])


def test_generation_limit_sizes_only_the_sweeps_that_generate():
    got = {s.name: s for s in rp.plan(only=["ragchecker_topk_retrieval", "ragchecker_prompt", "ragbench_case_study"],
                                      generation_limit=20)}
    assert got["ragchecker_topk_retrieval"].questions == 300 and got["ragchecker_topk_retrieval"].overrides == []
    assert got["ragchecker_prompt"].command() == "ragsweep -m +experiment=ragchecker_prompt dataset.limit=20"
    assert got["ragbench_case_study"].questions == 20  # in place of its own 100
    both = {s.name: s.questions for s in rp.plan(only=["ragchecker_topk_retrieval", "ragchecker_prompt"],
                                                 limit=50, generation_limit=20)}
    assert both == {"ragchecker_topk_retrieval": 50, "ragchecker_prompt": 20}


def test_time_left_uses_measured_seconds_per_system_and_question(tmp_path):
    sweeps = rp.plan(only=["ragchecker_topk_retrieval", "ragchecker_overlap_retrieval", "ragchecker_prompt"], limit=10)
    state = rp.State(tmp_path / "state.json")
    assert est.rates(state) == est.PRIOR_S
    prior = est.time_left(sweeps, state)
    # ragchecker_prompt: two systems reading 20 chunks of 300 tokens, and the closed-book floor
    gen = 10 * (3 * est.GEN_A_S + 2 * 6.0 * est.GEN_B_S)
    assert prior == pytest.approx(6 * 10 * est.PRIOR_S["retrieval"] * 2 + gen)
    state.update(sweeps[0], status="finished", wall_s=30.0, directions=[])  # 6 systems x 10 questions in 30 s
    assert est.rates(state)["retrieval"] == pytest.approx(0.5)
    assert est.time_left(sweeps, state) == pytest.approx(6 * 10 * 0.5 + gen)
    # the sweep under way: what its estimate has left
    assert est.time_left(sweeps, state, running=sweeps[1], elapsed=10.0) == pytest.approx(20.0 + gen)
    assert est.time_left(sweeps, state, running=sweeps[2], elapsed=60.0) == pytest.approx(30.0 + gen - 60.0)
    assert rp.State(tmp_path / "state.json").done(sweeps[0])  # written through, read back
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(SystemExit, match="not a state file"):
        rp.State(tmp_path / "bad.json")


ROW = {"metric": "ragchecker/retriever/claim_recall", "param": "top_k", "expected": "increasing", "verdict": "REPRODUCED",
       "n": 20, "p": 0.004, "n_for_80pct_power": None, "paper": "RAGChecker App. F Fig. 6", "detail": "",
       "step": "k=5 -> k=10", "diff": 1.5, "ci": [0.5, 2.5]}


class Fake:
    """Stands in for the sweep and the report: records the calls, fails where told."""

    def __init__(self, monkeypatch, fail: set[str] = frozenset(), report_fails: set[str] = frozenset()):
        self.ran: list[str] = []
        self.reported: list[str] = []
        self.fail, self.report_fails = set(fail), set(report_fails)
        monkeypatch.setattr(rp, "run_sweep", self.run_sweep)
        monkeypatch.setattr(rp, "report", self.report)

    def run_sweep(self, sweep, log_path, result_path):
        self.ran.append(sweep.name)
        if sweep.name in self.fail:
            return 2, {}
        return 0, {"parent_run_id": f"parent-{sweep.name}", "tracking_uri": "sqlite:///x.db"}

    def report(self, sweep, info, out):
        self.reported.append(sweep.name)
        if sweep.name in self.report_fails:
            raise RuntimeError("no store")
        assert info["parent_run_id"] == f"parent-{sweep.name}"
        return [dict(ROW)]


ARGS = ["--retrieval-only", "--limit", "5"]


def test_a_failed_sweep_is_run_again_and_finished_ones_are_skipped(tmp_path, monkeypatch, capsys):
    out = ["--out", str(tmp_path)]
    fake = Fake(monkeypatch, fail={"ragchecker_chunk_size_retrieval"})
    assert rp.main(ARGS + out) == 1
    assert fake.ran == list(rp.RETRIEVAL) and fake.reported == ["ragchecker_topk_retrieval", "ragchecker_overlap_retrieval"]
    text = capsys.readouterr().out
    assert "[2/3] ragchecker_chunk_size_retrieval: 6 systems x 5 questions ... FAILED (exit 2)" in text
    assert "2 of 3 sweeps reported" in text
    state = json.loads((tmp_path / "state.json").read_text())["sweeps"]
    assert state["ragchecker_chunk_size_retrieval dataset.limit=5"]["status"] == "failed"

    fake = Fake(monkeypatch)  # the same command again: only the failed sweep runs
    assert rp.main(ARGS + out) == 0
    assert fake.ran == fake.reported == ["ragchecker_chunk_size_retrieval"]
    text = capsys.readouterr().out
    assert "[1/3] ragchecker_topk_retrieval: 6 systems x 5 questions: finished before (parent run parent-ragchecker_topk_retrieval), skipped" in text
    md = (tmp_path / "reproduce.md").read_text()
    assert md.count("**REPRODUCED**") == 3 and "3 reproduced" in md

    fake = Fake(monkeypatch)  # another limit is another set of sweeps: nothing is skipped
    assert rp.main(["--retrieval-only", "--limit", "6", *out]) == 0 and fake.ran == list(rp.RETRIEVAL)


def test_a_sweep_whose_report_failed_is_only_reported_again(tmp_path, monkeypatch, capsys):
    out = ["--out", str(tmp_path), "--only", "ragchecker_topk_retrieval"]
    fake = Fake(monkeypatch, report_fails={"ragchecker_topk_retrieval"})
    assert rp.main(ARGS + out) == 1 and fake.ran == ["ragchecker_topk_retrieval"]
    assert "finished, but its report failed: no store" in capsys.readouterr().out
    fake = Fake(monkeypatch)
    assert rp.main(ARGS + out) == 0 and fake.ran == [] and fake.reported == ["ragchecker_topk_retrieval"]


def test_an_interrupted_sweep_is_resumed_by_the_same_command(tmp_path, monkeypatch, capsys):
    out = ["--out", str(tmp_path), "--only", "ragchecker_topk_retrieval,ragchecker_overlap_retrieval"]
    fake = Fake(monkeypatch)

    def killed(sweep, log_path, result_path):
        fake.ran.append(sweep.name)
        if sweep.name == "ragchecker_overlap_retrieval":
            raise KeyboardInterrupt
        return Fake.run_sweep(fake, sweep, log_path, result_path)

    monkeypatch.setattr(rp, "run_sweep", killed)
    assert rp.main(ARGS + out) == 130
    assert "interrupted; run the same command again to resume" in capsys.readouterr().err
    state = rp.State(tmp_path / "state.json")
    assert [e["status"] for e in state.sweeps.values()] == ["finished", "interrupted"]
    spent = state.sweeps["ragchecker_overlap_retrieval dataset.limit=5"]["spent_s"]
    fake = Fake(monkeypatch)
    assert rp.main(ARGS + out) == 0 and fake.ran == ["ragchecker_overlap_retrieval"]
    entry = rp.State(tmp_path / "state.json").sweeps["ragchecker_overlap_retrieval dataset.limit=5"]
    assert entry["status"] == "finished" and entry["wall_s"] >= spent  # the interrupted attempt's time counts


def test_dry_run_lists_sweeps_systems_and_commands_and_runs_nothing(tmp_path, monkeypatch, capsys):
    fake = Fake(monkeypatch)
    asked = []

    def cached(name, choices, overrides):  # the prompt sweep's answers partly cached, the rest none
        asked.append((name, f"cache_dir={(tmp_path / 'c').resolve()}" in overrides))
        return [2, 2, 20] if name == "ragchecker_prompt" else None

    monkeypatch.setattr(rp, "cached_answers", cached)
    assert rp.main(["--dry-run", "--limit", "20", "--out", str(tmp_path), "--cache-dir", str(tmp_path / "c")]) == 0
    text = capsys.readouterr().out
    assert fake.ran == [] and not (tmp_path / "state.json").exists()
    assert asked == [(name, True) for name in rp.GENERATION]  # the generating sweeps, in the shared cache
    assert "about" in text and "(24 answers already in the cache)" in text
    assert "ragchecker_prompt (generation): 3 systems x 20 questions, about" in text
    assert "; 24 of 60 answers already in the cache" in text
    assert "8 sweep(s), 55 systems" in text
    assert "[8/8] ragbench_case_study (generation): 16 systems x 20 questions" in text
    assert "ragsweep -m +experiment=ragchecker_prompt dataset.limit=20" in text
    assert "ragsweep-report --experiment ragchecker_prompt" in text


def test_direction_rows_take_the_deciding_step():
    steps = [{"comparison": "k=5 -> k=10", "diff": 2.0, "ci_low": 1.0, "ci_high": 3.0, "p_holm": 0.01},
             {"comparison": "k=10 -> k=20", "diff": 0.5, "ci_low": -0.5, "ci_high": 1.5, "p_holm": 0.3}]
    v = SimpleNamespace(metric="m", param="top_k", expected="increasing", verdict="SAME DIRECTION, NOT SIGNIFICANT",
                        n=20, p=0.3, n_needed=180, paper="Fig. 6", detail="", steps=steps)
    nodata = SimpleNamespace(metric="m2", param="top_k", expected="flat", verdict="NO DATA", n=None, p=None,
                             n_needed=None, paper="", detail="the metric is missing", steps=[])
    rows = page.direction_rows([v, nodata])
    assert rows[0]["step"] == "k=10 -> k=20" and rows[0]["ci"] == [-0.5, 1.5] and rows[0]["n_for_80pct_power"] == 180
    assert page.interval_text(rows[0]) == "k=10 -> k=20: +0.5 [-0.5, +1.5]"
    assert page.interval_text(rows[1]) == "the metric is missing"
    s = rp.plan(only=["ragchecker_topk"], limit=20)[0]
    md = page.markdown([s], [{"status": "finished", "wall_s": 780, "parent_run_id": "abc", "directions": rows}], "ragsweep-reproduce", 800)
    line = next(x for x in md.splitlines() if x.startswith("| ragchecker_topk | m |"))
    assert "**SAME DIRECTION, NOT SIGNIFICANT** | 20 | k=10 -> k=20: +0.5 [-0.5, +1.5] | 0.3 | 180 |" in line
    assert "`ragsweep -m +experiment=ragchecker_topk dataset.limit=20`, then `ragsweep-report --experiment ragchecker_topk`" in line
    assert "| ragchecker_topk | generation | 6 | 20 | 13m00s | 130 s | finished | abc |" in md
