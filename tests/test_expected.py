"""The smallest reproduction with expected results (conf/experiment/ci_check.yaml), run for real:
a change that silently moves its numbers fails here. Also the issue's case: a sweep on too few
questions gets NOT SIGNIFICANT, never REPRODUCED."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_ci_check_sweep_reproduces_its_expected_results(ci_check_sweep, tmp_path):
    env, uri = ci_check_sweep.env, ci_check_sweep.uri
    report = [sys.executable, "-c", "import sys; from ragsweep.report.cli import main; sys.exit(main(sys.argv[1:]))",
              "--experiment", "ci_check", "--tracking-uri", uri, "--out", str(tmp_path / "report")]
    check = subprocess.run([*report, "--check"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "MOVED" not in check.stdout and check.stdout.count("  ok ") >= 10
    verdicts = json.loads((tmp_path / "report" / "directions.json").read_text())
    assert [v["verdict"] for v in verdicts] == ["SAME DIRECTION, NOT SIGNIFICANT"]  # 4 questions cannot show it
    assert verdicts[0]["n"] == 4 and verdicts[0]["p"] > 0.05
