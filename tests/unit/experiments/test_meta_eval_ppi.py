"""The PPI width ratio of the meta-evaluation (experiments/meta_eval/ja_ppi.py): how much a judge's
predictions narrow a label mean's interval, against the labels alone."""

from __future__ import annotations

import sys

import numpy as np

from support import ROOT
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import ja_ppi  # noqa: E402


def _labels(n: int = 600, seed: int = 3) -> tuple[np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    return (rng.random(n) < 0.7).astype(float), rng


def test_a_judge_that_tracks_the_label_narrows_the_interval_and_noise_does_not():
    y, rng = _labels()
    good = ja_ppi.width_ratio(y, y + rng.normal(0, 0.25, y.size), draws=40)
    noise = ja_ppi.width_ratio(y, rng.random(y.size), draws=40)
    assert set(good) == {50, 100} and good[100]["N"] == y.size
    # corr ~0.88: PPI's variance is about (1 - corr^2) of the labels' -> width ratio near 0.5
    assert 0.35 < good[100]["ratio"] < 0.65 and good[100]["corr"] > 0.8
    assert 0.95 < noise[100]["ratio"] < 1.05  # PPI++'s lambda goes to ~0: the labels' own interval


def test_ratio_is_seeded_and_skips_n_the_population_cannot_hold():
    y, rng = _labels(80)
    yhat = y + rng.normal(0, 0.5, y.size)
    a = ja_ppi.width_ratio(y, yhat, ns=(50, 100), draws=30, seed=1)
    assert a == ja_ppi.width_ratio(y, yhat, ns=(50, 100), draws=30, seed=1)
    assert list(a) == [50]  # 100 labels + 2 judged-only answers do not fit in 80


def test_non_finite_predictions_are_dropped_with_their_labels():
    y, rng = _labels(300)
    yhat = y + rng.normal(0, 0.3, y.size)
    yhat[:20] = np.nan
    r = ja_ppi.width_ratio(y, yhat, ns=(50,), draws=20)
    assert r[50]["N"] == 280 and np.isfinite(r[50]["ratio"])


def test_table_names_each_metric_judge_and_n():
    y, rng = _labels(300)
    md = ja_ppi.table({"adherence": {"offline": ja_ppi.width_ratio(y, rng.random(y.size), ns=(50,), draws=10)}}, ns=(50, 100))
    assert "| adherence | offline | 300 |" in md and md.rstrip().endswith("| - |")


def test_ppi_section_pairs_each_judges_held_out_scores_with_the_test_labels(monkeypatch):
    """judge_agreement's PPI section: the adherence labels of the test halves against each judge's
    protocol scores for the same rows (a judge equal to the label narrows, token overlap here does not)."""
    subsets, n = ("a", "b", "c"), 200
    rng = np.random.default_rng(0)
    rb, res = {}, {"arr": {}}
    for s in subsets:
        part = np.array(["dev" if i % 2 == 0 else "test" for i in range(n)])
        adherent = (rng.random(n) < 0.6).astype(int)
        rows = [{"id": str(i), "response": "w", "response_sentences": [["a", "w"]], "documents_sentences": [[["0a", "w"]]],
                 "utilization_score": 0.1 * (i % 3)}
                for i in range(n)]
        rb[s] = {"rows": rows, "part": part, "adherent": adherent}
        test = part == "test"
        res["arr"][s] = {"protocol": adherent[test] + rng.normal(0, 0.1, test.sum()), "token": rng.random(test.sum())}
    out, md = ja_ppi.ppi_section(rb, {"offline": res}, draws=20)
    adh = out["adherence"]
    assert set(adh) == {"token overlap", "offline judge (protocol)"}
    assert adh["offline judge (protocol)"][100]["N"] == 300 and adh["offline judge (protocol)"][100]["ratio"] < 0.7
    assert adh["token overlap"][100]["ratio"] > 0.9
    assert set(out["utilization"]) == {"TRACe cover attribution (default; no checker)", "token overlap"}
    assert "| adherence | offline judge (protocol) | 300 |" in md and "<= 0.80 at 100 labels" in md
