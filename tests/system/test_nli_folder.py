"""A user's own NLI model folder through the commands, with the hub off: ``ragsweep-score
--checker nli --model PATH`` judges with it; ``ragsweep evaluator=nli evaluator.checker.model=PATH``
with no model there stops at once, naming the field and the folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from support import FIXTURES
from support.nli_model import tiny_nli_model

INPUTS = FIXTURES / "ragchecker" / "examples_checking_inputs.json"


def _run(tmp_path, module, *args, timeout=120):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_missing_model_folder_fails_fast_naming_field_and_path(tmp_path):
    t0 = time.monotonic()
    proc = _run(tmp_path, "ragsweep.pipeline.cli", "evaluator=nli", "evaluator.checker.model=./no_such_model", timeout=60)
    assert proc.returncode != 0
    assert f"evaluator.checker.model='./no_such_model': no folder {tmp_path}/no_such_model" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "mlruns").exists() or not list((tmp_path / "mlruns").rglob("meta.yaml"))


@pytest.mark.slow
def test_score_command_judges_with_a_relative_model_folder(tmp_path):
    tiny_nli_model(tmp_path / "my-nli", winner=1)  # entailment wins every pair
    proc = _run(tmp_path, "ragsweep.pipeline.score_cli", str(INPUTS), "--checker", "nli", "--model", "my-nli",
                "-o", "out.json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = json.loads((tmp_path / "out.json").read_text())["results"]
    matrices = [row for r in records for row in r["retrieved2response"]]
    assert matrices and {lab for row in matrices for lab in row} == {"Entailment"}
    assert json.loads(proc.stdout)["generator"]["faithfulness"] == 100.0  # every claim entailed
