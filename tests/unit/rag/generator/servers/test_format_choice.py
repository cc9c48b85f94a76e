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
        "q8_0": {"prompt_tps": 243, "decode_tps": 72}, "q4_0": {"prompt_tps": 261, "decode_tps": 80}}


def test_least_cpu_time_for_a_typical_question_wins():
    # 789/271 + 83/64 = 4.21 s (f16) against 789/261 + 83/80 = 4.06 s (q4_0): decoding tips it
    assert format_choice.pick(EPYC) == "q4_0"
    assert format_choice.question_seconds(EPYC["f16"]) == pytest.approx(789 / 271 + 83 / 64)
    # a prompt-only mix: F16's faster prompts win
    assert min(EPYC, key=lambda f: format_choice.question_seconds(EPYC[f], (800, 0))) == "f16"


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
        assert format_choice.choose(src) == "q4_0"
    assert format_choice.choose(src) == "q4_0" and len(calls) == 1
    saved = json.loads(next(format_choice.choice_dir().glob("*.json")).read_text())
    assert saved["choice"] == "q4_0" and saved["cpu_variant"] == "haswell" and saved["mix"] == [789, 83]
    assert saved["table"]["f16"] == {"prompt_tps": 271, "decode_tps": 64}
    assert {"cpu", "flags", "llama_cpp", "build"} <= set(saved["machine"])
    assert "chose q4_0" in caplog.text and "q4_0" in caplog.text and "<- chosen" in caplog.text
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
    assert got == ["q4_0"] * 3 and len(calls) == 1
