"""The judge card: names the judge, quotes its measured agreement with people, says plainly when
there is none, and warns about the offline judge."""

from __future__ import annotations

import json

import pytest
from support import CONF, FIXTURES, ROOT
from hydra import compose, initialize_config_dir

from ragsweep.judge import card as jc

FIXTURE = FIXTURES / "judge_agreement.json"


def _evaluator(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=list(overrides)).evaluator


@pytest.fixture
def empty(tmp_path):
    p = tmp_path / "judge_agreement.json"
    p.write_text(json.dumps({"version": 1, "written": None, "protocol": "p", "judges": {}}))
    return p


def test_offline_card_quotes_out_of_sample_agreement_and_warns():
    c = jc.card(_evaluator(), FIXTURE)
    assert c["judge_id"] == "offline" and c["extractor"]["name"] == "offline" and c["checker"]["name"] == "offline"
    assert c["ragsweep_version"] and c["models"]["checker_features"] == "minilm"
    # the fitted thresholds of the shipped head are resolved when the config leaves them null
    assert c["thresholds"]["fitted"] is True and 0 < c["thresholds"]["threshold"] < 1
    s = c["statement"]
    assert "about as well as word overlap" in s and "evaluator=llm with a strong model" in s
    assert "41.3" in s and "out of sample" in s and "token_f1 50.3" in s
    ag = c["agreement"]
    assert len(ag["out_of_sample"]) == 1 and "0.813" not in s  # in-sample figures are not quoted as agreement
    assert "IN SAMPLE" in ag["in_sample"][0]
    md = jc.markdown(c)
    assert md.startswith("# Judge card") and "41.3" in md and "IN SAMPLE" in md and "Protocol:" in md


def test_no_measurement_is_said_plainly(empty):
    c = jc.card(_evaluator(), empty)
    assert jc.NO_MEASUREMENT in c["statement"] and c["agreement"] is None
    # the offline caveat stands without numbers too
    assert "about as well as word overlap" in c["statement"] and "evaluator=llm" in c["statement"]
    assert jc.NO_MEASUREMENT in jc.markdown(c)
    assert jc.tags(c)["ragsweep.judge.agreement"] == jc.NO_MEASUREMENT
    small = jc.card(_evaluator("evaluator=llm"), FIXTURE)  # the bundled SmolLM2 judge is not measured
    assert small["judge_id"] == "llm:smollm2" and small["model"] == "smollm2"
    assert jc.NO_MEASUREMENT in small["statement"] and "strong model" in small["statement"]
    assert "about as well as word overlap" not in small["statement"]
    assert jc.NO_MEASUREMENT in jc.card(_evaluator("evaluator=nli"), FIXTURE)["statement"]


def test_llm_judge_is_matched_by_model():
    ev = _evaluator("evaluator=llm", "server@evaluator.judge.server=external")
    c = jc.card(ev, FIXTURE)
    assert c["judge_id"] == "llm:gpt-4o-mini" and c["model"] == "gpt-4o-mini"
    assert c["extractor"]["max_tokens"] == 1000 and c["checker"]["batch_size"] == 5
    assert "55" in c["statement"] and jc.NO_MEASUREMENT not in c["statement"]


def test_no_judge():
    c = jc.card(_evaluator("evaluator=none"))
    assert c["judge_id"] is None and "No judge" in c["statement"]
    assert jc.tags(c)["ragsweep.judge.id"] == "none" and "No judge" in jc.markdown(c)


def test_tags_are_strings_within_mlflow_limits(tmp_path):
    data = json.loads(FIXTURE.read_text())
    data["judges"]["offline"]["verdict"] = "x" * 20000
    data["protocol"] = "y" * 20000
    p = tmp_path / "big.json"
    p.write_text(json.dumps(data))
    t = jc.tags(jc.card(_evaluator(), p))
    assert t and all(k.startswith("ragsweep.judge.") for k in t)
    assert all(isinstance(v, str) and len(v) <= 5000 for v in t.values())
    assert t["ragsweep.judge.statement"].endswith("\u2026")
    for key in ("id", "extractor", "checker", "model", "thresholds", "ragsweep_version", "agreement", "statement"):
        assert f"ragsweep.judge.{key}" in t


def test_where_the_results_file_is_found(tmp_path, monkeypatch, empty):
    # explicit path, then the environment, then the checkout's experiments file, then the package copy
    assert jc.agreement_file(FIXTURE) == FIXTURE
    monkeypatch.setenv(jc.ENV_VAR, str(empty))
    assert jc.agreement_file(None) == empty and jc.agreement_file(FIXTURE) == FIXTURE
    monkeypatch.delenv(jc.ENV_VAR)
    monkeypatch.setattr(jc, "REPO_FILE", tmp_path / "missing.json")
    assert jc.agreement_file(tmp_path / "nope.json") == jc.PACKAGE_FILE
    monkeypatch.setattr(jc, "PACKAGE_FILE", tmp_path / "also-missing.json")
    assert jc.agreement_file() is None
    c = jc.card(_evaluator())  # never fails a run
    assert c["agreement_file"] is None and jc.NO_MEASUREMENT in c["statement"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert jc.NO_MEASUREMENT in jc.card(_evaluator(), bad)["statement"]


def test_shipped_placeholder_has_the_schema():
    data = json.loads(jc.PACKAGE_FILE.read_text())
    assert data["version"] == 1 and isinstance(data["judges"], dict) and "protocol" in data and "written" in data
    assert jc.REPO_FILE == ROOT / "experiments" / "meta_eval" / "results" / "judge_agreement.json"


def test_card_of_plain_mappings_and_built_components():
    from ragsweep.judge.claims import OfflineExtractor

    c = jc.card({"name": "offline", "extractor": OfflineExtractor(), "checker": "offline", "judge": None}, FIXTURE)
    assert c["judge_id"] == "offline" and c["extractor"]["short_answers"] is True
    c = jc.card({"name": "custom", "extractor": "offline",
                 "checker": {"_target_": "ragsweep.judge.offline.OfflineChecker", "threshold": 0.5,
                             "answer_threshold": 0.4}}, FIXTURE)
    assert c["thresholds"] == {"threshold": 0.5, "answer_threshold": 0.4}


def test_the_summary_line_is_one_sentence_with_one_figure_its_interval_and_the_card():
    import re

    from ragsweep.judge.card import card, headline, sentence

    offline = card({"name": "offline", "extractor": "offline", "checker": "offline"})
    head = headline(offline)
    assert head is not None and head["low"] < head["value"] < head["high"]  # a 95% interval around the figure
    line = sentence(offline, "mlruns/artifacts/1/abc/artifacts/judge_card.md")
    assert line.startswith("judge: offline agrees with people at ")
    assert line.endswith("; full card: mlruns/artifacts/1/abc/artifacts/judge_card.md")
    assert len(re.split(r"(?<=[.!?])\s+(?=[A-Z])", line)) == 1 and "\n" not in line and len(line) < 400
    unmeasured = sentence(card({"name": "llm", "extractor": "llm", "checker": "llm", "judge": {"model": "gpt-4o-mini"}}))
    assert unmeasured.startswith("judge: llm:gpt-4o-mini, with no measured agreement with people")
    assert len(re.split(r"(?<=[.!?])\s+(?=[A-Z])", unmeasured)) == 1


def test_a_pearson_figure_gets_fishers_interval():
    from ragsweep.judge.card import headline

    c = {"agreement": {"suites": [{"suite": "s", "measure": "overall Pearson x100", "value": 50.5, "n": 280,
                                   "out_of_sample": True, "baselines": {"rouge_l": 55.0}}]}}
    head = headline(c)
    # Fisher's z: atanh(0.505) +- 1.96 / sqrt(277), back through tanh, x100
    assert (round(head["low"], 1), round(head["high"], 1)) == (41.2, 58.7)
    assert head["baseline"] == ("rouge_l", 55.0)
    assert headline({"agreement": {"suites": [{**c["agreement"]["suites"][0], "out_of_sample": False}]}}) is None
