"""The side-by-side of one sweep's verdicts under two judges (experiments/meta_eval/verdicts_by_judge.py)."""

from __future__ import annotations

import json
import sys

import pytest

from support import ROOT
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from experiments.meta_eval import verdicts_by_judge as V  # noqa: E402


def _direction(metric, verdict, diff, n=20, power=None):
    return {"metric": metric, "param": "top_k", "expected": "increasing", "verdict": verdict, "n": n,
            "step": "k=5 -> k=10", "diff": diff, "ci": [diff - 2.0, diff + 2.0], "n_for_80pct_power": power}


def _folder(tmp_path, name, directions, key="ragchecker_topk dataset.limit=20", status="finished"):
    d = tmp_path / name
    d.mkdir()
    (d / "state.json").write_text(json.dumps({"sweeps": {key: {"status": status, "directions": directions}}}))
    return d


def test_marks_the_verdicts_the_second_judge_changes(tmp_path, capsys):
    a = _folder(tmp_path, "a", [_direction("ragchecker/retriever/context_precision", "REPRODUCED", -12.5, power=6),
                                _direction("ragchecker/generator/faithfulness", "SAME DIRECTION, NOT SIGNIFICANT", 3.0, power=710)])
    b = _folder(tmp_path, "b", [_direction("ragchecker/retriever/context_precision", "REPRODUCED", -13.0, power=6),
                                _direction("ragchecker/generator/faithfulness", "OPPOSITE DIRECTION, NOT SIGNIFICANT", -1.0)],
                key="ragchecker_topk dataset.limit=20 evaluator/checker=trained")
    out = tmp_path / "page.md"
    assert V.main(["--pair", str(a), str(b), "--names", "offline", "trained", "--out", str(out)]) == 0
    page = out.read_text()
    assert "2 directions, 1 verdict(s) changed" in page
    lines = [x for x in page.splitlines() if x.startswith("| ragchecker_topk")]
    assert [x.split(" | ")[1] for x in lines] == ["context precision (increasing)", "faithfulness (increasing)"]  # the sweep's order
    assert lines[0].endswith("|  |") and "80% power at 6" in lines[0]
    assert lines[1].endswith("| **yes** |") and "80% power at 710" in lines[1] and "-1 [-3, +1]" in lines[1]


def test_a_pipe_in_a_direction_stays_inside_its_cell(tmp_path):
    d = _direction("ragchecker/retriever/claim_recall", "NOT SIGNIFICANT", 0.0) | {"expected": "barely moves (|step| <= 2)"}
    a, b = _folder(tmp_path, "a", [d]), _folder(tmp_path, "b", [d])
    row = [x for x in V.render([(a, b)], ("A", "B"), "cmd").splitlines() if x.startswith("| ragchecker_topk")][0]
    assert row.replace("\\|", "").count("|") == 7 and "(\\|step\\| <= 2)" in row


def test_refuses_pairs_over_other_questions_and_unfinished_folders(tmp_path):
    a = _folder(tmp_path, "a", [_direction("ragchecker/overall/f1", "REPRODUCED", 1.0, n=20)])
    b = _folder(tmp_path, "b", [_direction("ragchecker/overall/f1", "REPRODUCED", 1.0, n=30)])
    with pytest.raises(SystemExit, match="n = 20 .* 30 .*not the same questions"):
        V.main(["--pair", str(a), str(b)])
    with pytest.raises(SystemExit, match="state.json: not found"):
        V.main(["--pair", str(a), str(tmp_path / "missing")])
    c = _folder(tmp_path, "c", [_direction("ragchecker/overall/f1", "REPRODUCED", 1.0)], status="running")
    assert V.rows(a, c) == []  # a sweep still running has no verdicts to compare
