"""Misbehaving model servers, injected for real, against the whole pipeline.

The generator is ``generator=external`` pointed at the scriptable fake OpenAI server
(tests/fake_openai_server.py) with its API key in an environment variable. Each fault (500s, 429
with Retry-After, a hang past ``generator.timeout_s``, a closed connection, truncated JSON, a
choice-less body, a final 400) must be retried a bounded number of times with backoff, end as a
counted failure whose record carries an ``error`` and an empty response, never reach the cache
(a rerun against a healthy server answers it), and fail the run (FAILED in MLflow, non-zero
exit) only when failures exceed ``max_failure_rate``. Judge side: a judge answering with the
wrong number of labels or malformed JSON is counted in ``judge/parse_failures`` and leaves NaN
for that example's affected metrics.

The helpers at the top (a tiny dataset, overrides, a CLI runner, MLflow readers) are shared by
test_bad_input.py, test_secrets.py and test_concurrency.py.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from support import answered_requests  # noqa: E402
from support.processes import wait_gone  # noqa: E402
from fake_openai_server import (  # noqa: E402
    Action,
    FakeOpenAIServer,
    close,
    hang,
    invalid_json,
    ok,
    rate_limited,
    status,
)

PY = sys.executable
KEY_ENV = "RAGSWEEP_FAULTS_KEY"
ANSWER = "It is a fine answer."

# -- shared helpers -------------------------------------------------------------------------------
DOCS = [
    ("d1", "The Eiffel Tower is in Paris. It was completed in 1889 for the World's Fair."),
    ("d2", "Mount Everest is the highest mountain above sea level, in the Himalayas."),
    ("d3", "The Nile is a major north-flowing river in northeastern Africa."),
    ("d4", "Honey bees live in colonies with a single queen and many workers."),
]
QUERIES = [
    ("q1", "When was the Eiffel Tower completed?", "It was completed in 1889.", ["d1"]),
    ("q2", "What is the highest mountain?", "Mount Everest.", ["d2"]),
    ("q3", "Which river flows north through Africa?", "The Nile.", ["d3"]),
    ("q4", "How many queens does a bee colony have?", "A single queen.", ["d4"]),
]
QUESTION = {qid: q for qid, q, _, _ in QUERIES}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def tiny_dataset(d: Path, queries=QUERIES) -> list[str]:
    """Overrides for a 4-document, 4-question jsonl dataset written into ``d``."""
    corpus = write_jsonl(d / "corpus.jsonl", [{"doc_id": i, "text": t} for i, t in DOCS])
    qfile = write_jsonl(
        d / "queries.jsonl",
        [{"query_id": i, "query": q, "gt_answer": a, "relevant_doc_ids": r} for i, q, a, r in queries],
    )
    return ["dataset=jsonl", f"dataset.corpus={corpus}", f"dataset.queries={qfile}"]


NO_EVAL = "evaluator=none"  # where evaluation is not the point: no claim checks, no embeddings


def external(base_url: str, key_env: str = KEY_ENV, **gen: Any) -> list[str]:
    """Overrides for the external generator at ``base_url`` with fast test retry settings."""
    settings = {"max_retries": 2, "backoff_s": 0.05, "max_backoff_s": 1.0, "timeout_s": 10, "concurrency": 2, **gen}
    return [
        "generator=external",
        f"generator.server.base_url={base_url}",
        "generator.server.model=fake",
        f"generator.server.api_key_env={key_env}",
        "generator.name=fake",
        *(f"generator.{k}={v}" for k, v in settings.items()),
    ]


def stores(d: Path) -> list[str]:
    """Cache and MLflow store under ``d`` (absolute: the test process's cwd is elsewhere)."""
    return [
        f"cache_dir={d / 'cache'}",
        f"mlflow.tracking_uri=sqlite:///{d}/mlruns/mlflow.db",
        f"mlflow.artifact_location={d}/mlruns/artifacts",
    ]


_TEMPLATE: list[Path] = []


def seed_mlflow(d: Path) -> None:
    """Put an empty, fully migrated MLflow store at ``d/mlruns/mlflow.db`` (a copy of one made
    once per session): MLflow's migrations cost seconds per new store. A fresh store is
    exercised by test_cli.py and test_concurrency.py."""
    db = d / "mlruns" / "mlflow.db"
    if db.exists():
        return
    if not _TEMPLATE:
        import tempfile

        from ragsweep.tracking import _create_sqlite_store

        root = Path(tempfile.mkdtemp(prefix="ragsweep-mlflow-template-"))
        atexit.register(shutil.rmtree, root, True)
        _create_sqlite_store(root / "mlflow.db", str(root / "artifacts"))
        _TEMPLATE.append(root / "mlflow.db")
    db.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_TEMPLATE[0], db)


def cli(cwd: Path, *args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    """``ragsweep ARGS`` in ``cwd`` as a user runs it; server registry in ``cwd/state``."""
    seed_mlflow(cwd)
    full = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAGSWEEP_CACHE_DIR": str(cwd / "cache"),
        "RAGSWEEP_STATE_DIR": str(cwd / "state"),
        **(env or {}),
    }
    full.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([PY, "-m", "ragsweep.pipeline.cli", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


def mlflow_runs(d: Path, experiment: str = "default") -> tuple[Any, list]:
    from mlflow.tracking import MlflowClient

    db = d / "mlruns" / "mlflow.db"
    if not db.exists():
        return None, []
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return client, []
    return client, client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def records_of(client: Any, run: Any, dest: Path) -> list[dict]:
    dest.mkdir(parents=True, exist_ok=True)
    path = client.download_artifacts(run.info.run_id, "records.json", str(dest))
    return json.loads(Path(path).read_text())["results"]


def sqlite_ok(path: Path) -> str:
    con = sqlite3.connect(path, timeout=30)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def registered_servers(state: Path) -> list[Path]:
    return sorted((state / "servers").glob("*.json")) if (state / "servers").is_dir() else []


def prompt_of(body: dict) -> str:
    return (body.get("messages") or [{}])[-1].get("content") or ""


def question_of(body: dict) -> str | None:
    text = prompt_of(body)
    for qid, q in QUESTION.items():
        if q in text:
            return qid
    return None


class Script:
    """A responder: ``faults[qid]`` (an Action, or a callable giving one per attempt) for the
    chosen questions, a fixed answer for the rest; records when each question was asked."""

    def __init__(self, faults: dict[str, Any] | None = None):
        self.faults = dict(faults or {})
        self.healthy = False
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def __call__(self, body: dict, index: int) -> Action:
        qid = question_of(body)
        with self.lock:
            self.times.setdefault(qid, []).append(time.monotonic())
            attempt = len(self.times[qid]) - 1
        fault = None if self.healthy else self.faults.get(qid)
        if callable(fault):
            fault = fault(attempt)
        return fault or ok(ANSWER)

    def attempts(self, qid: str) -> int:
        return len(self.times.get(qid, []))

    def gaps(self, qid: str) -> list[float]:
        t = self.times.get(qid, [])
        return [b - a for a, b in zip(t, t[1:])]


@pytest.fixture
def run_system_in(compose_cfg, tmp_path, monkeypatch):
    """``run(base_url, *overrides)``: one system through ``ragsweep.pipeline.system.run_system``,
    in-process (the CLI's own code path minus Hydra's process setup), stores in ``tmp_path``."""
    from ragsweep.pipeline.system import run_system

    monkeypatch.setenv(KEY_ENV, "sk-test-faults")
    data = tiny_dataset(tmp_path)
    seed_mlflow(tmp_path)

    def run(base_url: str, *overrides: str, **gen: Any) -> dict:
        evaluator = [] if any(o.startswith("evaluator=") for o in overrides) else [NO_EVAL]
        cfg = compose_cfg(*data, *external(base_url, **gen), *stores(tmp_path), *evaluator, *overrides)
        return run_system(cfg)

    return run


def last_run(tmp_path: Path):
    client, found = mlflow_runs(tmp_path)
    assert found, "no MLflow run"
    return client, found[-1]


# -- generator faults ------------------------------------------------------------------------------
def test_transient_500s_are_retried_with_exponential_backoff(run_system_in, tmp_path):
    script = Script({"q2": lambda n: status(500) if n < 3 else None})
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        m = run_system_in(fake.base_url, max_retries=3, backoff_s=0.2, max_backoff_s=5)
    assert script.attempts("q2") == 4 and all(script.attempts(q) == 1 for q in ("q1", "q3", "q4"))
    assert m["generator/failures"] == 0 and m["generator/retries"] == 3 and m["generator/calls"] == 7
    # equal jitter: retry r waits between 0.5 and 1 x backoff_s * 2**(r-1)
    for r, gap in enumerate(script.gaps("q2"), start=1):
        assert 0.5 * 0.2 * 2 ** (r - 1) - 0.02 <= gap <= 0.2 * 2 ** (r - 1) + 1.0, script.gaps("q2")
    assert script.gaps("q2")[2] > script.gaps("q2")[0]
    client, run = last_run(tmp_path)
    assert run.info.status == "FINISHED"
    assert all(r["response"] == ANSWER and "error" not in r for r in records_of(client, run, tmp_path / "dl"))


FINAL_FAULTS = {
    "http500": (lambda: status(500), 3, "HTTP 500"),
    "http429": (lambda: rate_limited(retry_after=0.05), 3, "HTTP 429"),
    "hang": (hang, 3, "timed out after 1.5s"),
    "closed": (close, 3, "connection error"),
    "truncated_json": (invalid_json, 3, "malformed response"),
    "no_choices": (lambda: status(200, {"id": "chatcmpl-x", "object": "chat.completion", "choices": []}), 3, "malformed response"),
    "http400_final": (lambda: status(400), 1, "HTTP 400"),
}


@pytest.mark.parametrize("fault", list(FINAL_FAULTS))
def test_a_call_that_finally_fails_is_counted_never_cached_and_answered_on_rerun(run_system_in, tmp_path, fault):
    make, attempts, reason = FINAL_FAULTS[fault]
    script = Script({"q3": lambda n: make()})
    with FakeOpenAIServer(responder=script, hang_s=5, max_seconds=600) as fake:
        t0 = time.monotonic()
        # a 429 counts against max_retries once the client sends one request at a time (beside others, it
        # first halves its concurrency: ragsweep.rag.generator.limiter): at concurrency 1, from the start
        m = run_system_in(fake.base_url, "max_failure_rate=0.5", timeout_s=1.5 if fault == "hang" else 10,
                          concurrency=1 if fault == "http429" else 2)
        seconds = time.monotonic() - t0
        # bounded: 1 + max_retries attempts (a 400 is final: one), then given up
        assert script.attempts("q3") == attempts
        assert m["generator/failures"] == 1 and m["generator/retries"] == attempts - 1
        assert m["generator/calls"] == 3 + attempts and m["generator/cache_hits"] == 0
        client, run = last_run(tmp_path)
        assert run.info.status == "FINISHED"  # 1 of 4 failed <= max_failure_rate 0.5: the rest stands
        recs = {r["query_id"]: r for r in records_of(client, run, tmp_path / "dl1")}
        assert recs["q3"]["response"] == "" and reason in recs["q3"]["error"], recs["q3"]
        assert f"after {attempts} attempt" in recs["q3"]["error"]
        assert all(recs[q]["response"] == ANSWER and "error" not in recs[q] for q in ("q1", "q2", "q4"))
        assert seconds < 30

        # the failure was not cached: against a healthy server only q3 is asked again
        script.healthy = True
        n_before = fake.n_requests
        m2 = run_system_in(fake.base_url, "max_failure_rate=0.5")
        assert fake.n_requests - n_before == 1 and script.attempts("q3") == attempts + 1
    assert m2["generator/calls"] == 1 and m2["generator/cache_hits"] == 3 and m2["generator/failures"] == 0
    client, run2 = last_run(tmp_path)
    recs2 = {r["query_id"]: r for r in records_of(client, run2, tmp_path / "dl2")}
    assert recs2["q3"]["response"] == ANSWER and "error" not in recs2["q3"]


def test_retry_after_is_honoured_and_capped(run_system_in):
    # q1: 429 "Retry-After: 1" once; q2: 429 "Retry-After: 120" once, capped at max_backoff_s
    script = Script({
        "q1": lambda n: rate_limited(retry_after=1) if n == 0 else None,
        "q2": lambda n: rate_limited(retry_after=120) if n == 0 else None,
    })
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        t0 = time.monotonic()
        m = run_system_in(fake.base_url, backoff_s=0.01, max_backoff_s=0.4)
        seconds = time.monotonic() - t0
    assert m["generator/failures"] == 0 and m["generator/retries"] == 2
    (gap1,), (gap2,) = script.gaps("q1"), script.gaps("q2")
    assert 0.38 <= gap1 < 3  # Retry-After 1 > max_backoff_s 0.4: capped, not the 0.01 backoff
    assert 0.38 <= gap2 < 3 and seconds < 60  # not 120 s


def test_retry_after_below_the_cap_is_waited_for(run_system_in):
    script = Script({"q4": lambda n: rate_limited(retry_after=1) if n == 0 else None})
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        m = run_system_in(fake.base_url, backoff_s=0.01, max_backoff_s=5)
    assert m["generator/retries"] == 1 and m["generator/failures"] == 0
    assert 0.95 <= script.gaps("q4")[0] < 4


def test_failures_above_max_failure_rate_end_the_run_failed(run_system_in, tmp_path):
    from ragsweep.store.cache import Cache
    from ragsweep.errors import FailureRateExceeded

    script = Script({q: (lambda n: status(503)) for q in ("q1", "q2")})
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        with pytest.raises(FailureRateExceeded, match=r"2 of 4 generations failed \(50% > max_failure_rate=0.1\)"):
            run_system_in(fake.base_url, max_retries=1)
    client, run = last_run(tmp_path)
    assert run.info.status == "FAILED"
    assert "max_failure_rate" in run.data.tags.get("ragsweep.error", "")
    assert run.data.metrics["generator/failures"] == 2  # the metrics and records are still logged
    recs = {r["query_id"]: r for r in records_of(client, run, tmp_path / "dl")}
    assert recs["q1"]["response"] == "" and "HTTP 503" in recs["q1"]["error"]
    cache = Cache(tmp_path / "cache")
    assert cache.count("generation") == 2 and cache.integrity_check() == "ok"  # only the 2 answers
    cache.close()


@pytest.mark.slow
def test_cli_exits_non_zero_with_the_reason_when_too_many_calls_fail(tmp_path):
    script = Script({q: (lambda n: close()) for q in ("q1", "q2", "q3")})
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        proc = cli(tmp_path, *tiny_dataset(tmp_path), *external(fake.base_url, max_retries=1), NO_EVAL, env={KEY_ENV: "sk-x"})
    assert proc.returncode != 0
    assert "ragsweep: error: 3 of 4 generations failed (75% > max_failure_rate=0.1)" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    _, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] == ["FAILED"]
    assert found[0].data.metrics["generator/failures"] == 3


# -- judge faults ----------------------------------------------------------------------------------
def judge_overrides(base_url: str) -> list[str]:
    return [
        "evaluator=llm",
        "evaluator.judge.server=null",
        f"++evaluator.judge.base_url={base_url}",
        "evaluator.judge.model=fake",
        "++evaluator.judge.api_key_env=null",
        "evaluator.judge.max_retries=0",
        "evaluator.judge.parse_retries=1",
        "evaluator.judge.timeout_s=10",
        "evaluator.trace_mode=none",
        "evaluator.ragas=false",
        # JudgeScript's judge fails on 2 of the 4 questions by design: counted, not fatal here
        "max_failure_rate=0.5",
    ]


class JudgeScript:
    """Generation: a fixed answer per question. Extraction (RefChecker's KG prompt): one triplet per
    text, except an answer with no triplet in it for texts naming the Nile. Checking (RefChecker's
    joint checking prompt): one label per claim, except one label too many against the reference
    "Mount Everest." (q2's ground truth)."""

    ANSWERS = {
        "q1": "The tower was completed in 1889.",
        "q2": "Everest is the highest mountain.",
        "q3": "The Nile flows north.",
        "q4": "A colony has one queen.",
    }

    def __init__(self):
        self.kinds: list[str] = []

    @staticmethod
    def claims_of(prompt: str) -> list[str]:
        return [c for c in prompt.split("### Claims:\n", 1)[1].split("\n\n\nYour answer", 1)[0].split("\n") if c.strip()]

    def label(self, body: dict, i: int, ref: str) -> str:
        return "Entailment"

    def __call__(self, body: dict, index: int) -> Action:
        prompt = prompt_of(body)
        if "generate the KG for the following candidate answer" in prompt:
            text = prompt.rsplit("### Candidate Answer:\n", 1)[1].split("\n\n### KG:", 1)[0]
            self.kinds.append("extract")
            if "Nile" in text:
                return ok("I am not sure what to extract here.")  # no triplet in the answer
            words = text.rstrip(".").split()
            return ok(f'("{words[0]}", "is", "{" ".join(words[1:]) or "stated"}")')
        if "### Claims:" in prompt:
            self.kinds.append("check")
            ref = prompt.split("### Reference:\n", 1)[1].split("\n\n### Claims:", 1)[0]
            n = len(self.claims_of(prompt))
            if ref.strip() == "Mount Everest.":
                n += 1  # the wrong number of labels
            return ok("\n".join(self.label(body, i, ref) for i in range(n)))
        self.kinds.append("generate")
        return ok(self.ANSWERS[question_of(body)])


def nan(value: Any) -> bool:
    """NaN as the records artifact writes it (strict JSON: null)."""
    return value is None or math.isnan(value)


def test_judge_wrong_label_count_and_malformed_json_are_parse_failures_and_nan(run_system_in, tmp_path):
    script = JudgeScript()
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        m = run_system_in(fake.base_url, *judge_overrides(fake.base_url))
    client, run = last_run(tmp_path)
    assert run.info.status == "FINISHED"  # judge trouble is counted, the run still finishes (2 of 4 <= 0.5)
    assert m["ledger/failed_judge"] == 2 and m["ledger/answered"] == 4
    assert m["ragchecker/overall/precision/failed"] == 2 and m["ragchecker/overall/precision/n"] == 2
    # q2's check against its ground truth (asked twice: 1 + parse_retries) and the extraction of
    # q3's response and ground truth (both name the Nile): 3 items that never parsed
    assert m["judge/parse_failures"] == 3 and m["judge/failures"] == 0
    assert m["judge/parse_retries"] == 3
    assert run.data.metrics["judge/parse_failures"] == 3
    recs = {r["query_id"]: r for r in records_of(client, run, tmp_path / "dl")}
    assert recs["q2"]["answer2response"] == [None]
    assert nan(recs["q2"]["metrics"]["precision"])  # needs answer2response
    assert recs["q2"]["metrics"]["recall"] == 1.0  # response2answer parsed
    assert recs["q3"]["response_claims"] is None and recs["q3"]["gt_answer_claims"] is None
    for name in ("precision", "recall", "faithfulness", "claim_recall"):
        assert nan(recs["q3"]["metrics"][name]), name
    for q in ("q1", "q4"):
        for name in ("precision", "recall", "faithfulness"):
            assert recs[q]["metrics"][name] == 1.0, (q, name, recs[q]["metrics"])
    # never guessed, so never cached: a rerun asks exactly the failed items again
    script2 = JudgeScript()
    with FakeOpenAIServer(responder=script2, max_seconds=600) as fake2:
        m2 = run_system_in(fake2.base_url, *judge_overrides(fake2.base_url))
    assert m2["generator/calls"] == 0 and m2["judge/parse_failures"] == 3
    assert sorted(script2.kinds) == ["check"] * 2 + ["extract"] * 4


# -- managed server faults, through the CLI ----------------------------------------------------------
def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("ragsweep: error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["port_taken", "executable_missing", "model_file_missing"])
def test_managed_server_that_cannot_start_is_a_clear_error(tmp_path, fault):
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    args, expected = {
        "port_taken": ([f"generator.server.port={port}"], f"port {port} on 127.0.0.1 is already in use"),
        "executable_missing": (
            ["generator=vllm", "+generator.server.executable=/nonexistent/bin/vllm"],
            "vLLM is not installed: pip install 'ragsweep[vllm]' on a machine with a CUDA GPU ('/nonexistent/bin/vllm' was not found",
        ),
        "model_file_missing": (["generator.server.model_path=/nonexistent.gguf"], "llama.cpp model file not found: /nonexistent.gguf (generator.server.model_path)"),
    }[fault]
    try:
        t0 = time.monotonic()
        proc = cli(tmp_path, *tiny_dataset(tmp_path), *args, NO_EVAL, timeout=120)
        seconds = time.monotonic() - t0
    finally:
        holder.close()
    assert proc.returncode != 0
    assert expected in one_error_line(proc.stderr)
    assert seconds < 60
    _, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] == ["FAILED"]
    assert expected in found[0].data.tags["ragsweep.error"]
    assert registered_servers(tmp_path / "state") == []
    logs = tmp_path / "state" / "servers" / "logs"
    assert not (logs.is_dir() and list(logs.iterdir()))  # nothing was spawned


def start_cli(cwd: Path, *args: str) -> subprocess.Popen:
    seed_mlflow(cwd)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAGSWEEP_CACHE_DIR": str(cwd / "cache"), "RAGSWEEP_STATE_DIR": str(cwd / "state")}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen(
        [PY, "-m", "ragsweep.pipeline.cli", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_generation(proc: subprocess.Popen, state: Path, timeout: float = 150) -> dict:
    """The registry entry of the llama.cpp server once it has answered its first completion."""
    deadline = time.monotonic() + timeout
    entry = None
    while time.monotonic() < deadline and proc.poll() is None:
        found = registered_servers(state)
        if found and entry is None:
            entry = json.loads(found[0].read_text())
        if entry and answered_requests(Path(entry["log_path"]).read_text(errors="replace")):
            return entry
        time.sleep(0.1)
    out, err = proc.communicate(timeout=30) if proc.poll() is not None else ("", "")
    raise AssertionError(f"no generation seen (rc={proc.poll()}): {err[-3000:]}")


LLAMA = [NO_EVAL, "generator.max_tokens=48", "generator.concurrency=1", "generator.server.replicas=1", "generator.max_retries=1", "generator.backoff_s=0.2"]


@pytest.mark.slow
def test_llamacpp_server_dying_mid_run_is_named_and_fails_the_run(tmp_path):
    proc = start_cli(tmp_path, *tiny_dataset(tmp_path), *LLAMA, "generator.server.max_restarts=0")  # never restarted
    try:
        entry = wait_for_generation(proc, tmp_path / "state")
        os.killpg(entry["pgid"], 9)  # the server dies (OOM killer, a crash)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    line = one_error_line(err)
    assert f"the llamacpp server (pid {entry['pid']}) died (killed by SIGKILL (signal 9))" in line, line
    assert "generations failed" in line and entry["log_path"] in line
    _, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] == ["FAILED"]
    assert "died (killed by SIGKILL (signal 9))" in found[0].data.tags["ragsweep.error"]
    assert "out-of-memory killer" in err and "last lines of its log:" in err  # the diagnosis follows
    assert found[0].data.metrics["generator/failures"] >= 1
    assert wait_gone(entry["pid"], timeout=15) and registered_servers(tmp_path / "state") == []


def answering_replica(proc: subprocess.Popen, state: Path, timeout: float = 150) -> dict:
    """The registry entry of a llama.cpp server process that has answered a question, once two run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        entries = [json.loads(p.read_text()) for p in registered_servers(state)]
        for entry in entries if len(entries) == 2 else []:
            if answered_requests(Path(entry["log_path"]).read_text(errors="replace")):
                return entry
        time.sleep(0.1)
    out, err = proc.communicate(timeout=30) if proc.poll() is not None else ("", "")
    raise AssertionError(f"no generation seen (rc={proc.poll()}): {err[-3000:]}")


@pytest.mark.slow
def test_a_replica_killed_mid_run_is_restarted_and_every_question_answered(tmp_path):
    # the default run's two llama.cpp processes; one is killed after its first answer. Before, the
    # client kept sending to the dead one: most generations failed and the run exited 2
    # model_format=source: the packaged file as it is (no measuring of formats in a fresh cache)
    proc = start_cli(tmp_path, "dataset.limit=6", NO_EVAL, "generator.max_tokens=32", "generator.server.replicas=2",
                     "generator.server.model_format=source")
    try:
        entry = answering_replica(proc, tmp_path / "state", timeout=240)
        os.killpg(entry["pgid"], 9)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert f"server (pid {entry['pid']}" in err and "restarting it on port" in err, err[-3000:]
    client, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] == ["FINISHED"]
    m = found[0].data.metrics
    assert m["generator/failures"] == 0 and m["generator/server_restarts"] == 1 and m["generator/endpoint_outages"] >= 1
    records = records_of(client, found[0], tmp_path / "dl")
    assert len(records) == 6 and not [r["query_id"] for r in records if "error" in r or "failure" in r]
    ledger = json.loads(Path(client.download_artifacts(found[0].info.run_id, "ledger.json", str(tmp_path / "dl"))).read_text())
    assert ledger["calls"]["generation"]["server_restarts"] == 1
    assert wait_gone(entry["pid"], timeout=15) and registered_servers(tmp_path / "state") == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig, delay",
    # the interrupt must win at every moment of generation: a request in flight, between two
    # requests, while the client retries against the server the handler has just stopped
    # (SIGINT at 0.3 s and SIGTERM at 0 s, once here too, repeated what these three cover)
    # (SIGHUP: the terminal closed, handled as SIGTERM; before, it killed ragsweep and left the server)
    [("SIGINT", 0.0), ("SIGINT", 1.0), ("SIGTERM", 0.5), ("SIGHUP", 0.5)],
)
def test_signal_during_generation_stops_everything(tmp_path, sig, delay):
    import signal

    proc = start_cli(tmp_path, *tiny_dataset(tmp_path), *LLAMA)
    try:
        entry = wait_for_generation(proc, tmp_path / "state")
        time.sleep(delay)
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}[sig], err[-3000:]
    assert "ragsweep: interrupted" in err and "Traceback" not in err, err[-3000:]
    assert wait_gone(entry["pid"], timeout=15), f"server pid {entry['pid']} left running"
    assert registered_servers(tmp_path / "state") == []
    _, found = mlflow_runs(tmp_path)
    assert [r.info.status for r in found] in (["KILLED"], ["FAILED"]), [r.info.status for r in found]


def test_the_failure_ledger_counts_a_failed_generation_and_never_scores_it(run_system_in, tmp_path):
    """A failed call is excluded from every answer metric (n drops, /failed counts it), stays in the
    retrieval metrics (retrieval did not fail), and is listed with its reason in ledger.json."""
    script = Script({"q3": lambda n: status(400)})
    with FakeOpenAIServer(responder=script, max_seconds=600) as fake:
        m = run_system_in(fake.base_url, "max_failure_rate=0.5", "evaluator=offline", "evaluator.trace_mode=none",
                          "evaluator.ragas=false")
    assert m["ledger/attempted"] == 4 and m["ledger/answered"] == 3 and m["ledger/failed_generation"] == 1
    assert m["ragchecker/overall/f1/n"] == 3 and m["ragchecker/overall/f1/failed"] == 1
    assert m["ragchecker/overall/f1/ci_low"] <= m["ragchecker/overall/f1"] <= m["ragchecker/overall/f1/ci_high"]
    assert m["retrieval/recall_at_k/n"] == 4 and m["retrieval/recall_at_k/failed"] == 0
    client, run = last_run(tmp_path)
    assert run.data.metrics["ragchecker/overall/f1/n"] == 3  # the interval metrics are in MLflow too
    recs = {r["query_id"]: r for r in records_of(client, run, tmp_path / "dl")}
    assert recs["q3"]["failure"]["stage"] == "generation" and "HTTP 400" in recs["q3"]["failure"]["reason"]
    assert "response_claims" not in recs["q3"]  # never sent to the judge
    path = client.download_artifacts(run.info.run_id, "ledger.json", str(tmp_path / "dl"))
    led = json.loads(Path(path).read_text())
    assert led["counts"]["failed_generation"] == 1
    assert led["failures"] == [{"query_id": "q3", "stage": "generation", "reason": recs["q3"]["failure"]["reason"]}]
    assert led["metrics"]["ragchecker/overall/f1"]["failed_generation"] == 1


def test_judge_failures_count_against_max_failure_rate(run_system_in, tmp_path):
    from ragsweep.errors import FailureRateExceeded

    with FakeOpenAIServer(responder=JudgeScript(), max_seconds=600) as fake:
        with pytest.raises(FailureRateExceeded, match=r"0 of 4 generations failed and 2 answers could not be judged \(50% > max_failure_rate=0.1\)"):
            run_system_in(fake.base_url, *[o for o in judge_overrides(fake.base_url) if not o.startswith("max_failure_rate")])
    client, run = last_run(tmp_path)
    assert run.info.status == "FAILED" and run.data.metrics["ledger/failed_judge"] == 2  # partial results stay


class SeededJudge(JudgeScript):
    """A stochastic judge: its labels depend on the request's seed (a judge at temperature > 0)."""

    def label(self, body: dict, i: int, ref: str) -> str:
        return "Entailment" if (int(body.get("seed") or 0) + i + len(ref)) % 2 else "Neutral"

    def __call__(self, body: dict, index: int) -> Action:
        if "Mount Everest." in prompt_of(body) and "### Claims:" in prompt_of(body):
            n = len(self.claims_of(prompt_of(body)))
            return ok("\n".join(self.label(body, i, "") for i in range(n)))
        return super().__call__(body, index)


def test_repeats_separate_judge_variance_from_question_variance(run_system_in):
    with FakeOpenAIServer(responder=SeededJudge(), max_seconds=600) as fake:
        m = run_system_in(fake.base_url, *judge_overrides(fake.base_url), "evaluator.judge.temperature=0.7",
                          "evaluator.repeats=3")
    assert m["judge/repeats"] == 3
    f = "ragchecker/overall/precision"  # one response claim against one answer: its label follows the seed
    assert m[f"{f}/n"] == 3 and m[f"{f}/judge_sd"] > 0 and m[f"{f}/question_sd"] >= 0
    assert m[f"{f}/ci_low"] <= m[f] <= m[f"{f}/ci_high"]
