"""ragsweep-score and the RAGChecker file schema."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import types

import pytest

from support import ROOT, FIXTURES as SUPPORT_FIXTURES
from ragsweep.errors import RagsweepError
from ragsweep.pipeline import score_cli
from ragsweep.pipeline.score_cli import build_output
from ragsweep.judge.ragchecker_metrics import MATRIX_FIELDS
from ragsweep.judge.schema import (
    SchemaError,
    is_output_file,
    is_output_record,
    read_records,
    validate_output_record,
)

FIXTURES = SUPPORT_FIXTURES / "ragchecker"
OUTPUTS = FIXTURES / "examples_checking_outputs.json"
INPUTS = FIXTURES / "examples_checking_inputs.json"
GOLDEN = json.loads(OUTPUTS.read_text(encoding="utf-8"))
REPO = ROOT


def _assert_overall_matches(metrics):
    for group, values in GOLDEN["metrics"].items():
        for name, expected in values.items():
            assert abs(metrics[group][name] - expected) <= 0.1 + 1e-9, (group, name)


def _write(tmp_path, data, name="in.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_main_recomputes_from_matrices(capsys):
    assert score_cli.main([str(OUTPUTS)]) == 0
    out = capsys.readouterr().out
    _assert_overall_matches(json.loads(out))


def test_module_runs_as_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "ragsweep.pipeline.score_cli", str(OUTPUTS)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    _assert_overall_matches(json.loads(proc.stdout))


def test_output_file_is_valid_ragchecker_output(tmp_path, capsys):
    out_path = tmp_path / "scored.json"
    assert score_cli.main([str(OUTPUTS), "-o", str(out_path)]) == 0
    capsys.readouterr()
    text = out_path.read_text(encoding="utf-8")
    assert "NaN" not in text
    written = json.loads(text)
    # RAGChecker's two keys, plus each aggregate's interval and count (the one aggregation path)
    assert set(written) == {"results", "metrics", "intervals"}
    _assert_overall_matches(written["metrics"])
    iv = written["intervals"]["overall"]["precision"]
    assert iv["n"] == len(GOLDEN["results"]) and iv["ci_low"] <= written["metrics"]["overall"]["precision"] <= iv["ci_high"]
    records = read_records(out_path)
    assert is_output_file(records)
    for ours, theirs in zip(records, GOLDEN["results"]):
        for name, value in theirs["metrics"].items():  # per example: fractions, like RAGChecker
            assert ours["metrics"][name] == pytest.approx(value)
        assert ours["metrics"]["n_response_claims"] == len(theirs["response_claims"])
        for field in ("query_id", "query", "gt_answer", "response", "retrieved_context",
                      "response_claims", "gt_answer_claims", *MATRIX_FIELDS):
            assert ours[field] == theirs[field]
    # the written file scores to the same numbers again
    assert build_output(records)["metrics"] == written["metrics"]


def test_question_without_ground_truth_writes_nulls(tmp_path, capsys):
    data = copy.deepcopy(GOLDEN)
    rec = data["results"][1]
    rec["gt_answer"] = None
    for field in ("gt_answer_claims", "answer2response", "response2answer", "retrieved2answer"):
        rec.pop(field)
    assert is_output_record(rec)
    out_path = tmp_path / "out.json"
    assert score_cli.main([str(_write(tmp_path, data)), "-o", str(out_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(out_path.read_text(encoding="utf-8"))
    assert written["results"][1]["metrics"]["precision"] is None
    assert written["results"][1]["metrics"]["faithfulness"] == pytest.approx(1.0)
    first = GOLDEN["results"][0]["metrics"]
    assert printed["overall"]["precision"] == pytest.approx(round(100 * first["precision"], 1))
    assert printed["generator"]["faithfulness"] == pytest.approx(
        round(100 * (first["faithfulness"] + 1.0) / 2, 1)
    )


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["results"][1].pop("response"), "results[1]: missing field 'response'"),
        (lambda d: d["results"][0].pop("query_id"), "results[0]: missing field 'query_id'"),
        (lambda d: d["results"][0]["retrieved_context"][2].pop("text"),
         "results[0].retrieved_context[2]: missing field 'text'"),
        (lambda d: d["results"][0].__setitem__("query", 3), "field 'query' must be str, got int"),
        (lambda d: d.pop("results"), "missing field 'results'"),
        (lambda d: d["results"][1]["answer2response"].pop(),
         "results[1].answer2response: expected a list of 5 labels, got 4"),
        (lambda d: d["results"][0]["retrieved2answer"][3].append("Neutral"),
         "results[0].retrieved2answer[3]: expected a list of 4 labels, got 5"),
        (lambda d: d["results"][0]["response2answer"].__setitem__(0, "yes"),
         "results[0].response2answer[0]: label 'yes'"),
    ],
)
def test_malformed_input_gives_one_line_error(tmp_path, capsys, mutate, expected):
    data = copy.deepcopy(GOLDEN)
    mutate(data)
    path = _write(tmp_path, data)
    assert score_cli.main([str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err
    assert err.startswith(f"ragsweep-score: error: {path}")
    assert expected in err


def test_malformed_input_subprocess_and_bad_json(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"results": [', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "ragsweep.pipeline.score_cli", str(path)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and str(path) in proc.stderr
    assert "not valid JSON" in proc.stderr
    assert score_cli.main([str(tmp_path / "absent.json")]) == 2


def test_input_without_claims_needs_the_pipeline(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ragsweep.judge.core", None)  # not importable
    assert score_cli.main([str(INPUTS)]) == 1
    err = capsys.readouterr().err
    assert "ragsweep.judge.core.Evaluator" in err and str(INPUTS) in err


def test_input_without_claims_goes_through_evaluate_records(monkeypatch, capsys):
    calls = []
    golden = {r["query_id"]: r for r in GOLDEN["results"]}

    class FakeEvaluator:
        def __init__(self, **options):
            calls.append(options)

        def evaluate(self, records):
            scored = [{**r, **{f: golden[r["query_id"]][f] for f in
                               ("response_claims", "gt_answer_claims", *MATRIX_FIELDS)}} for r in records]
            return scored, {}

    fake = types.ModuleType("ragsweep.judge.core")
    fake.Evaluator = FakeEvaluator
    monkeypatch.setitem(sys.modules, "ragsweep.judge.core", fake)
    args = [str(INPUTS), "--checker", "nli", "--extractor", "llm", "--model", "m",
            "--base-url", "http://127.0.0.1:1/v1"]
    assert score_cli.main(args) == 0
    (options,) = calls
    assert options["extractor"]["_target_"] == "ragsweep.judge.llm_extractor.LLMExtractor"
    assert options["checker"]["_target_"] == "ragsweep.judge.nli.NLIChecker"
    assert options["checker"]["model"] == "m"  # the NLI model
    assert options["judge"] == {"base_url": "http://127.0.0.1:1/v1", "model": "m"}
    _assert_overall_matches(json.loads(capsys.readouterr().out))


def test_schema_detection_and_validation():
    inputs = read_records(INPUTS)
    assert not is_output_file(inputs) and not is_output_record(inputs[0])
    outputs = read_records(OUTPUTS)
    assert is_output_file(outputs)
    assert not is_output_file([])
    bad = copy.deepcopy(outputs[0])
    bad["retrieved2response"] = bad["retrieved2response"][:-1]
    with pytest.raises(SchemaError, match=r"f\.json: results\[7\]\.retrieved2response: expected 11 rows"):
        validate_output_record(bad, 7, "f.json")
    assert issubclass(SchemaError, RagsweepError)  # the CLI's one-line error path
