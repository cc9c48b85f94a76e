"""``model_format: auto`` chooses by measuring: the format with the least CPU time for a typical
question wins, the measurement runs once per machine (and build, forced CPU variant, model file),
concurrent jobs measure once and agree, and the table and choice are logged. The real timing of
the packaged model is run in tests/system/test_cpu_dispatch.py."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

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


def test_a_background_measurement_is_started_once_and_not_when_remembered(measured, monkeypatch):
    src, calls = measured
    started = []

    class FakePopen:
        def __init__(self, cmd, **kw):
            started.append((cmd, kw))
            self.pid = os.getpid()  # alive for as long as this test runs

    monkeypatch.setattr(format_choice.subprocess, "Popen", FakePopen)
    rec = format_choice.start_background(src, Path("/tmp/cache"))
    assert rec["pid"] == os.getpid() and rec["log"].endswith(".log")
    (cmd, kw), = started
    assert cmd[1:] == ["-m", format_choice.MODULE, "--choose", str(src), "--cache-dir", "/tmp/cache"]
    assert format_choice.MODULE == format_choice.__name__  # the module python -m runs is this one
    assert kw["start_new_session"] and kw["stdin"] is format_choice.subprocess.DEVNULL
    assert format_choice.running(src) == rec
    assert format_choice.start_background(src) == rec and len(started) == 1  # under way: not a second one
    format_choice.choose(src)  # measured (here, in this process): remembered from now on
    format_choice._running_path(src).unlink()
    assert format_choice.start_background(src) is None and len(started) == 1


def test_a_stale_running_record_is_ignored(measured):
    src, _ = measured
    path = format_choice._running_path(src)
    path.parent.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    path.write_text(json.dumps({"pid": int(dead.stdout), "started": "then", "log": "x.log"}))
    assert format_choice.running(src) is None


def test_a_run_waits_for_the_measurement_under_way_and_says_so(measured, caplog):
    """choose() while the doctor's background process holds the lock: it waits, then takes the
    background's choice without measuring again."""
    src, calls = measured
    path = format_choice._running_path(src)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"pid": os.getppid(), "started": "12:00:00", "log": "m.log"}))
    key = format_choice.machine_key(src)
    held, done = threading.Event(), threading.Event()

    def background():  # what the background process does: measure under the lock, remember
        with format_choice._locked(format_choice.choice_dir() / f"{key}.lock"):
            held.set()
            done.wait(5)
            (format_choice.choice_dir() / f"{key}.json").write_text(
                json.dumps({"choice": "q8_0", "candidates": list(format_choice.CANDIDATES)}))

    t = threading.Thread(target=background)
    t.start()
    held.wait(5)
    timer = threading.Timer(0.3, done.set)
    timer.start()
    with caplog.at_level(logging.INFO, logger=format_choice.__name__):
        assert format_choice.choose(src) == "q8_0"
    t.join()
    assert calls == []  # measured once, by the background
    assert "waiting for the weight formats' measurement under way since 12:00:00" in caplog.text


def test_the_background_measurement_fails_cleanly(tmp_path, monkeypatch):
    """A file that is no model: the background process exits non-zero, says why in its log, and
    leaves no running record and no choice behind."""
    monkeypatch.setenv(format_choice.ENV_DIR, str(tmp_path / "choices"))
    src = tmp_path / "broken.gguf"
    src.write_bytes(b"no model")
    rec = format_choice.start_background(src, tmp_path / "cache")
    os.waitpid(rec["pid"], 0)
    assert format_choice.running(src) is None and not format_choice._running_path(src).exists()
    assert format_choice.remembered(src) is None
    log = Path(rec["log"]).read_text()
    # it failed on the file, not on how the process was started (python -m of the module itself)
    assert "timing the weight formats failed" in log and "__spec__" not in log and "No module named" not in log, log
