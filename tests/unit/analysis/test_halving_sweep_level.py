"""Issue 34, item 2: halving's level holds with unequal variances and over the whole sweep."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsweep.analysis.best import drop_p
from ragsweep.analysis.search import Entry, decide_rung


def _noisy_rung(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """k systems with equal means; system 0's noise is ten times the others' (the issue's input)."""
    u = rng.uniform(0, 1, n)
    sd = np.full(k, 0.2)
    sd[0] = 2.0
    return u[None, :] + rng.normal(0, 1, (k, n)) * sd[:, None]


def test_equal_means_with_one_noisy_system_are_not_dropped_above_alpha():
    # before (range permutation test): some tied system dropped 0.09 / 0.15 / 0.22 of rungs (k = 4 / 8 / 16, n = 12)
    rng = np.random.default_rng(34)
    reps, drops = 200, 0
    for r in range(reps):
        x = _noisy_rung(16, 12, rng)
        drops += bool(np.any(drop_p(x, resamples=499, seed=r) < 0.05))
    assert drops / reps <= 0.08, drops  # nominal 0.05; 200 rungs: Monte Carlo se 0.015


def test_a_system_better_on_every_question_is_found_and_the_best_is_never_dropped():
    rng = np.random.default_rng(1)
    u = rng.uniform(0, 1, 30)
    x = np.vstack([u + 0.3 + rng.normal(0, 0.05, 30), u + rng.normal(0, 0.05, 30), u + rng.normal(0, 0.05, 30)])
    p = drop_p(x, resamples=999)
    assert p[0] == 1.0 and p[1] < 0.01 and p[2] < 0.01
    assert drop_p(x[:1]).tolist() == [1.0]


def test_the_sweeper_spends_alpha_across_its_rungs():
    from hydra_plugins.ragsweep_halving.halving_sweeper import HalvingSweeper

    sw = HalvingSweeper(rungs=[20, 60, 180], alpha=0.05)
    assert sum(sw.rung_alphas(16)) == pytest.approx(0.05)
    with pytest.raises(ValueError, match=r"hydra.sweeper.alpha \(1.5\) must be in \(0, 1\)"):
        HalvingSweeper(alpha=1.5)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["noisy", "jumpy"])
def test_a_whole_sweep_drops_a_tied_system_at_most_at_alpha(model):
    """20 -> 60 -> 180 questions, keep 1/3, equal means: one system ten times noisier (before issue 34:
    0.15 at k = 4), or one with rare large jumps (issue 50: about 0.12 at the first rung under issue
    34's rule); the values' range is known (noise clipped at 3 sd), alpha over the rungs that test."""
    from ragsweep.analysis.search import rung_alphas

    rng = np.random.default_rng(7)
    reps, drops = 120, 0
    alphas = rung_alphas(4, 3, 1 / 3, 0.05)
    for r in range(reps):
        if model == "noisy":
            u = rng.uniform(0, 1, 180)
            sd = np.array([2.0, 0.2, 0.2, 0.2])[:, None]
            x, scale = u[None, :] + np.clip(rng.normal(0, 1, (4, 180)), -3, 3) * sd, 13.0
        else:
            x, scale = _jumpy_rung(4, 180, rng), 1.6
        alive = list(range(4))
        for i, n in enumerate((20, 60, 180)):
            entries = [Entry(f"s{j}", {f"q{q}": float(v) for q, v in enumerate(x[j, :n])}) for j in alive]
            ds = decide_rung(entries, keep=max(1, math.ceil(len(alive) / 3)), alpha=alphas[i], final=i == 2,
                             scale=scale)
            if any(d.decision == "dropped:worse" for d in ds):
                drops += 1
                break
            kept = {d.system for d in ds if d.decision in ("best", "promoted")}
            alive = [j for j in alive if f"s{j}" in kept]
    assert drops / reps <= 0.06, drops


def test_the_rung_table_names_the_rungs_share_of_alpha():
    from ragsweep.analysis.search import rungs_markdown

    ds = decide_rung([Entry("a", {"q1": 1.0, "q2": 0.5}), Entry("b", {"q1": 0.9, "q2": 0.4})], keep=1, alpha=0.05 / 3)
    md = rungs_markdown([{"rung": 0, "limit": 2, "keep": 1, "final": False, "alpha": 0.05 / 3, "sweep_alpha": 0.05,
                          "decisions": ds, "objective": "x"}])
    assert "(keep at most 1; worse at p < 0.0167 (the sweep's 0.05 over its rungs that test))" in md
    one = rungs_markdown([{"rung": 2, "limit": 2, "keep": 1, "final": True, "alpha": 0.0, "sweep_alpha": 0.05,
                           "decisions": ds[:1], "objective": "x"}])
    assert "worse: not tested (a rung planned to hold one system has no share of alpha)" in one
    bare = rungs_markdown([{"rung": 0, "limit": 2, "keep": 1, "final": False, "alpha": 0.025, "sweep_alpha": 0.05,
                            "scale": None, "decisions": ds, "objective": "cost/total_usd"}])
    assert "worse: not testable (the objective has no known range), ranked only" in bare


def test_two_questions_that_agree_never_make_a_drop():
    # every question better by the same amount: the sign flips (not a centred bootstrap, which would
    # call any constant difference certain) give 2 questions a p of at least 1/2
    x = np.array([[0.0, 0.0], [0.0, 0.0], [-1.0, -1.0]])
    assert drop_p(x, resamples=999)[2] >= 0.25
    six = np.array([[1.0] * 6, [0.0] * 6])  # better on all 6: the exact sign-flip p of the max is 2 / 64
    assert drop_p(six, resamples=9999, seed=3)[1] == pytest.approx(2 / 64, abs=0.01)


# -- issue 50: skewed differences at the first rung, and the last rung's share of alpha ------------
def _jumpy_rung(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """k systems with equal true means; system 0 is 0.05 worse on most questions and 0.45 better on a
    tenth of them (rare large jumps), the others carry small symmetric noise. Values in [-0.15, 1.45]."""
    u = rng.uniform(0, 1, n)
    x = u[None, :] + np.clip(rng.normal(0, 0.05, (k, n)), -0.15, 0.15)
    x[0] = u - 0.05 + 0.5 * (rng.random(n) < 0.1)
    return x


def test_a_system_with_rare_large_jumps_is_not_dropped_at_a_first_rung_of_20():
    rng = np.random.default_rng(50)
    reps, old, new = 150, 0, 0
    for r in range(reps):
        x = _jumpy_rung(4, 20, rng)
        old += bool(drop_p(x, resamples=499, seed=r)[0] < 0.05 / 3)  # issue 34's rule: sign flips of the max-t
        entries = [Entry(f"s{j}", {f"q{q}": float(v) for q, v in enumerate(x[j])}) for j in range(4)]
        ds = {d.system: d for d in decide_rung(entries, keep=2, alpha=0.05 / 2, scale=1.6)}
        new += ds["s0"].decision == "dropped:worse"
    assert old / reps >= 0.08, old  # the failure the issue found (about 0.12 here)
    assert new / reps <= 0.02, new  # the betting test holds alpha / 2 at every n (0 here)


def test_no_system_is_dropped_as_worse_without_a_known_range():
    a = {f"q{i}": 0.9 for i in range(30)}
    b = {f"q{i}": 0.1 for i in range(30)}
    ranked = {d.system: d.decision for d in decide_rung([Entry("a", a), Entry("b", b)], keep=1, final=True)}
    assert ranked == {"a": "best", "b": "tied"}  # no range: no valid test at small n, so not "worse"
    tested = {d.system: d.decision for d in decide_rung([Entry("a", a), Entry("b", b)], keep=1, final=True, scale=1.0)}
    assert tested == {"a": "best", "b": "dropped:worse"}
    outside = [Entry("a", {q: 5 * v for q, v in a.items()}), Entry("b", b)]  # values beyond the stated range
    assert {d.decision for d in decide_rung(outside, keep=1, final=True, scale=1.0)} == {"best", "tied"}


def test_the_last_rung_of_one_system_gets_no_alpha_and_the_testing_rungs_share_it():
    from hydra_plugins.ragsweep_halving.halving_sweeper import HalvingSweeper
    from ragsweep.analysis.search import objective_range, rung_alphas

    sw = HalvingSweeper(rungs=[20, 60, 180], alpha=0.05)
    assert sw.rung_alphas(4) == pytest.approx([0.025, 0.025, 0.0])  # 4 / 2 / 1 systems
    assert sw.rung_alphas(16) == pytest.approx([0.05 / 3] * 3)  # 16 / 6 / 2
    assert rung_alphas(1, 3, 1 / 3, 0.05) == [0.0, 0.0, 0.0]
    assert sum(rung_alphas(9, 4, 0.5, 0.05)) == pytest.approx(0.05)
    assert objective_range("ragchecker/overall/f1") == 100.0 and objective_range("cost/total_usd") is None
