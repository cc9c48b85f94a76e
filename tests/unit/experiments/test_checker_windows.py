"""checker_windows: every window x k cell scored on the allowed parts only, windows shared between cells."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest

from experiments.meta_eval import checker_windows as CW

REF = ("The mill was built in 1820. It burned down in 1901. A school stands there now. "
       "The school opened in 1925. It has four hundred pupils.")


class FakeChecker:
    """P = 1 for a window that holds the claim's year, else 0; counts what it is asked to score."""

    def __init__(self):
        from ragsweep.judge.trained import _base, base_path

        self.config = SimpleNamespace(whole_words=5)
        self._tok, self._max_length, self.asked = _base(base_path())[0], 128, []

    def score_windows(self, pairs):
        self.asked += list(pairs)
        return np.array([float(claim.split()[-1].rstrip(".") in piece) for piece, claim in pairs])


def _suites():
    claims = ["The school opened in 1925.", "It burned down in 1901.", "The mill was built in 1750.",
              "The school opened in 1930."]
    items = [(c, REF) for c in claims]
    wice = {"pairs": items, "claims": OrderedDict((str(i), [i]) for i in range(4)), "keys": [str(i) for i in range(4)],
            "part": np.array(["select", "select", "select", "test"]), "y": np.array([1, 1, 0, 1])}
    sub = {"pairs": items, "sent_y": np.array([1, 1, 0, 0]), "row": np.array([0, 1, 2, 3]),
           "part": np.array(["dev", "dev", "dev", "test"]), "y": np.array([1, 1, 0, 0]), "token": np.zeros(4)}
    return {"wice": wice, "ragbench": {"s": sub}}


def test_grid_cells_score_the_allowed_parts_and_share_their_windows():
    ck = FakeChecker()
    got = CW.grid_scores(ck, _suites(), [(1, 1), (2, 2), (1, 1)])
    assert [(r["window"], r["k"]) for r in got] == [(1, 1), (2, 2), (1, 1)]
    assert got[0]["wice_select"] == 1.0 and got[0]["ragbench_dev"] == 1.0
    # the reported parts are never scored: "1930" (the test claim) reaches no window
    assert not any("1930" in claim for _, claim in ck.asked)
    # each window once: the repeated cell asks nothing new, its counts are its own
    assert len(ck.asked) == len(set(ck.asked)) and got[2]["windows"] == got[0]["windows"] and got[2]["tokens"] > 0
    assert got[1]["windows"] == 2 * got[0]["windows"]  # two windows a pair instead of one


def test_grid_argument():
    assert CW.parse_grid("3x2, 2x3") == [(3, 2), (2, 3)]
    for bad in ("3", "0x2", "ax2"):
        with pytest.raises(SystemExit, match="WINDOWxK"):
            CW.parse_grid(bad)
