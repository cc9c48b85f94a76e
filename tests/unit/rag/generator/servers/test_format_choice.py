"""``model_format: auto`` chooses by measuring: the format with the least CPU time for a typical
question wins, the measurement runs once per machine (and build, forced CPU variant, model file),
concurrent jobs measure once and agree, and the table and choice are logged. The real timing of
the packaged model is run in tests/system/test_cpu_dispatch.py."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from ragsweep.rag.generator.servers import cpu_backend, format_choice

# tokens per CPU-second, shaped like the AVX2 EPYC (F16 fastest prompts) and the AMX Xeon
EPYC = {"source": {"prompt_tps": 158, "decode_tps": 56}, "f16": {"prompt_tps": 271, "decode_tps": 64},
        "q8_0": {"prompt_tps": 243, "decode_tps": 74}}


def test_least_cpu_time_for_a_typical_question_wins():
    # 789/271 + 83/64 = 4.21 s (f16) against 789/243 + 83/74 = 4.37 s (q8_0): prompts tip it
    assert format_choice.pick(EPYC) == "f16"
    assert format_choice.question_seconds(EPYC["f16"]) == pytest.approx(789 / 271 + 83 / 64)
    # a decode-only mix: Q8_0's faster decoding wins
    assert min(EPYC, key=lambda f: format_choice.question_seconds(EPYC[f], (0, 83))) == "q8_0"


def test_within_the_probes_noise_the_earlier_candidate_wins():
    """Two probes of the Xeon minutes apart: Q8_0 0.6% ahead of the packaged Q4_1, then 4.9%
    behind. Within MARGIN the packaged file (listed first) serves, so the choice does not flip."""
    first = {"source": {"prompt_tps": 422, "decode_tps": 62.4}, "q8_0": {"prompt_tps": 507, "decode_tps": 51.1},
             "f16": {"prompt_tps": 243, "decode_tps": 25.9}}
    second = {"source": {"prompt_tps": 535, "decode_tps": 71.4}, "q8_0": {"prompt_tps": 555, "decode_tps": 61.6},
              "f16": {"prompt_tps": 264, "decode_tps": 25.6}}
    assert format_choice.question_seconds(first["q8_0"]) < format_choice.question_seconds(first["source"])
    assert format_choice.pick(first) == "source" and format_choice.pick(second) == "source"
    # a clear win (more than MARGIN) still wins
    faster = dict(first, q8_0={"prompt_tps": 507 * 1.2, "decode_tps": 51.1 * 1.2})
    assert format_choice.pick(faster) == "q8_0"


def test_auto_never_picks_a_format_that_loses_quality():
    """Q4_0 (a second 4-bit rounding of the packaged Q4_1) answered measurably worse: auto neither
    times it nor accepts a remembered choice of it, however fast it was."""
    assert "q4_0" not in format_choice.CANDIDATES
    assert set(format_choice.CANDIDATES) == {"source", "f16", "bf16", "q8_0"}


def test_failed_candidates_are_skipped_and_none_left_is_an_error():
    table = {"f16": {"error": "converting failed"}, "q8_0": {"prompt_tps": 100, "decode_tps": 10}}
    assert format_choice.pick(table) == "q8_0"
    with pytest.raises(RuntimeError, match="no candidate weight format"):
        format_choice.pick({"f16": {"error": "x"}})


@pytest.fixture
def measured(tmp_path, monkeypatch):
    """The child-process timing replaced by a table; counts the measurements."""
    monkeypatch.setenv(format_choice.ENV_DIR, str(tmp_path / "choices"))
    monkeypatch.delenv(cpu_backend.ENV, raising=False)
    calls = []

    def fake_measure(source, cache_dir, timeout_s=300):
        calls.append(source)
        time.sleep(0.2)  # long enough for a second job to arrive while this one measures
        return {f: dict(r) for f, r in EPYC.items()}, "haswell"

    monkeypatch.setattr(format_choice, "measure", fake_measure)
    src = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    src.write_bytes(b"weights")
    return src, calls


def test_measured_once_then_remembered_and_logged(measured, caplog):
    src, calls = measured
    with caplog.at_level(logging.INFO, logger=format_choice.__name__):
        assert format_choice.choose(src) == "f16"
    assert format_choice.choose(src) == "f16" and len(calls) == 1
    saved = json.loads(next(format_choice.choice_dir().glob("*.json")).read_text())
    assert saved["choice"] == "f16" and saved["cpu_variant"] == "haswell" and saved["mix"] == [789, 83]
    assert saved["table"]["f16"] == {"prompt_tps": 271, "decode_tps": 64}
    assert {"cpu", "flags", "llama_cpp", "build"} <= set(saved["machine"])
    assert "chose f16" in caplog.text and "q8_0" in caplog.text and "<- chosen" in caplog.text
    assert "generator.server.model_format" in caplog.text  # how to override it


def test_another_forced_cpu_variant_or_model_measures_again(measured, monkeypatch, tmp_path):
    src, calls = measured
    format_choice.choose(src)
    monkeypatch.setenv(cpu_backend.ENV, "haswell")  # other code, perhaps another fastest format
    format_choice.choose(src)
    assert len(calls) == 2
    other = tmp_path / "other.gguf"
    other.write_bytes(b"other weights")
    format_choice.choose(other)
    assert len(calls) == 3 and len(list(format_choice.choice_dir().glob("*.json"))) == 3


def test_concurrent_jobs_measure_once_and_agree(measured):
    src, calls = measured
    got = []
    threads = [threading.Thread(target=lambda: got.append(format_choice.choose(src))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["f16"] * 3 and len(calls) == 1


def test_a_choice_remembered_from_another_candidate_set_is_measured_again(measured):
    """An earlier ragsweep remembered Q4_0 for this machine: that choice is not served again."""
    src, calls = measured
    format_choice.choose(src)
    path = next(format_choice.choice_dir().glob("*.json"))
    old = json.loads(path.read_text())
    old.pop("candidates")
    old["choice"] = "q4_0"
    path.write_text(json.dumps(old))
    assert format_choice.remembered(src) is None
    assert format_choice.choose(src) == "f16" and len(calls) == 2
