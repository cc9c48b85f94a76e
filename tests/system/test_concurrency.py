"""Parallel jobs and killed sweeps, on the shared cache and the shared MLflow sqlite store.

- Four jobs at once (``hydra/launcher=joblib hydra.launcher.n_jobs=4``) share the cache and the
  MLflow store: no "database is locked", no lost run (4 FINISHED children), both databases intact.
- A sweep SIGKILLed at several points (while MLflow creates its store, during generation, during
  judging, while MLflow writes a finished system) and restarted with the same command each time
  ends with exactly one FINISHED run per system; ``PRAGMA integrity_check`` of the cache and of
  mlruns/mlflow.db is ``ok`` after every kill; a restart never redoes a finished system, and the
  last one's generation calls are exactly what its unfinished systems asked for.
  (tests/system/test_sweep_resume.py covers the basic resume with the managed llama.cpp server.)

The generator and the judge are the fake OpenAI server (external), so no model server runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from test_faults import (  # noqa: E402
    KEY_ENV,
    NO_EVAL,
    PY,
    JudgeScript,
    external,
    judge_overrides,
    mlflow_runs,
    prompt_of,
    sqlite_ok,
    tiny_dataset,
)

ENV_EXTRA = {KEY_ENV: "sk-test-concurrency"}


def env_for(d: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAGSWEEP_CACHE_DIR": str(d / "cache"),
        "RAGSWEEP_STATE_DIR": str(d / "state"),
        **ENV_EXTRA,
    }
    for k in ("MLFLOW_TRACKING_URI", "RAGSWEEP_SWEEP_FILE"):
        env.pop(k, None)
    return env


def split_runs(d: Path):
    _, runs = mlflow_runs(d)
    parents = [r for r in runs if r.data.tags.get("ragsweep.role") == "parent"]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return parents, children


def databases_ok(d: Path) -> None:
    for db in (d / "cache" / "cache.db", d / "mlruns" / "mlflow.db"):
        if db.exists():
            assert sqlite_ok(db) == "ok", db


@pytest.mark.slow
def test_four_parallel_jobs_share_the_cache_and_the_mlflow_store(tmp_path):
    from fake_openai_server import FakeOpenAIServer, ok

    with FakeOpenAIServer(default=ok("An answer.", delay=0.3), max_seconds=600) as fake:
        cmd = [
            PY, "-m", "ragsweep.pipeline.cli", "-m", *tiny_dataset(tmp_path), *external(fake.base_url, concurrency=1), NO_EVAL,
            "retriever.top_k=1,2,3,4", "hydra/launcher=joblib", "hydra.launcher.n_jobs=4",
            f"hydra.sweep.dir={tmp_path / 'multirun'}",
        ]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env_for(tmp_path), capture_output=True, text=True, timeout=400)
        n_requests = fake.n_requests
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "database is locked" not in out and "OperationalError" not in out
    job_logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "multirun").rglob("*.log"))
    assert "database is locked" not in job_logs
    parents, children = split_runs(tmp_path)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert sorted(c.data.params["top_k"] for c in children) == ["1", "2", "3", "4"]
    assert [c.info.status for c in children] == ["FINISHED"] * 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    # the jobs ran at once: their runs overlap in time
    spans = sorted((c.info.start_time, c.info.end_time) for c in children)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), spans
    assert n_requests == 16 == sum(c.data.metrics["generator/calls"] for c in children)
    # one shared cache, no lost write: the 16 answers and the one chunk list of the 4 systems
    from ragsweep.store.cache import Cache

    cache = Cache(tmp_path / "cache")
    assert cache.count("generation") == 16 and cache.count("chunks") == 1
    cache.close()
    databases_ok(tmp_path)


class Chain:
    """The fake server's responder for a sweep that is killed and restarted several times.

    ``arm(kind, after_generations)`` makes the next request of ``kind`` (``generate`` or
    ``check``) SIGKILL the sweep's process group, once this attempt has seen at least
    ``after_generations`` generation requests; the request is never answered.
    """

    def __init__(self):
        self.judge = JudgeScript()
        self.pgid: int | None = None
        self.rule: tuple[str, int] | None = None
        self.kinds: Counter[str] = Counter()
        self.killed_at: str | None = None
        self.lock = threading.Lock()

    def start_attempt(self, pgid: int, rule: tuple[str, int] | None) -> None:
        with self.lock:
            self.pgid, self.rule, self.kinds, self.killed_at = pgid, rule, Counter(), None

    def __call__(self, body, index):
        prompt = prompt_of(body)
        # RefChecker's prompts (tests/fixtures/refchecker): the KG extraction and the joint check
        kind = ("extract" if "generate the KG for the following candidate answer" in prompt
                else "check" if "### Claims:" in prompt else "generate")
        with self.lock:
            if self.rule and self.killed_at is None and kind == self.rule[0] and self.kinds["generate"] >= self.rule[1]:
                self.killed_at = f"{kind} request after {self.kinds['generate']} generations"
                os.killpg(self.pgid, signal.SIGKILL)
                from fake_openai_server import hang

                return hang()
            self.kinds[kind] += 1
        return self.judge(body, index)


def kill_when(proc: subprocess.Popen, path_glob: tuple[Path, str], before: set, delay: float, timeout: float = 240) -> str:
    """SIGKILL the sweep ``delay`` s after a new file matching ``path_glob`` appears."""
    root, pattern = path_glob
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        new = {str(p) for p in root.rglob(pattern)} - before if root.exists() else set()
        if new:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)
            return f"{delay}s after {sorted(new)[0]}"
        time.sleep(0.005)
    return ""


@pytest.mark.slow
def test_sweep_killed_at_several_points_resumes_without_duplicates_or_corruption(tmp_path):
    from fake_openai_server import FakeOpenAIServer

    systems = {"1", "2", "3"}
    chain = Chain()
    with FakeOpenAIServer(responder=chain, hang_s=5, max_seconds=600) as fake:
        cmd = [
            PY, "-m", "ragsweep.pipeline.cli", "-m", *tiny_dataset(tmp_path), *external(fake.base_url, concurrency=1),
            *judge_overrides(fake.base_url), "retriever.top_k=1,2,3", f"hydra.sweep.dir={tmp_path / 'multirun'}",
        ]
        mlruns = tmp_path / "mlruns"
        plan = [
            ("mlflow creates its store", None, (mlruns, "*mlflow.db*"), 0.3),  # the temporary store first
            ("generation", ("generate", 1), None, 0),
            ("judging", ("check", 4), None, 0),
            ("mlflow writes a finished system", None, (mlruns, "records.json"), 0.0),
            ("end", None, None, 0),
        ]
        history = []
        for name, rule, watch, delay in plan:
            finished_before = {c.data.tags["ragsweep.system_key"] for c in split_runs(tmp_path)[1] if c.info.status == "FINISHED"}
            started_ms = int(time.time() * 1000)
            n_before = fake.n_requests
            log = open(tmp_path / f"attempt-{len(history)}.log", "w")
            proc = subprocess.Popen(cmd, cwd=tmp_path, env=env_for(tmp_path), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            chain.start_attempt(proc.pid, rule)
            how = ""
            try:
                if watch is not None:
                    before = {str(p) for p in watch[0].rglob(watch[1])} if watch[0].exists() else set()
                    how = kill_when(proc, watch, before, delay)
                proc.wait(timeout=300)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                log.close()
            output = (tmp_path / f"attempt-{len(history)}.log").read_text(errors="replace")
            how = how or chain.killed_at or ""
            history.append((name, proc.returncode, how))
            if name == "end":
                assert proc.returncode == 0, output[-4000:]
            else:
                assert proc.returncode == -signal.SIGKILL and how, f"{name}: not killed ({proc.returncode}):\n{output[-3000:]}"
            # after every kill: both databases intact, never two FINISHED runs of one system
            databases_ok(tmp_path)
            parents, children = split_runs(tmp_path)
            assert len(parents) <= 1
            finished = Counter(c.data.tags["ragsweep.system_key"] for c in children if c.info.status == "FINISHED")
            assert set(finished.values()) <= {1}, finished
            # a restart never redoes a system that had finished
            new = [c for c in children if c.info.start_time >= started_ms]
            assert not {c.data.tags["ragsweep.system_key"] for c in new} & finished_before, (name, finished_before)

        # the last restart: its generation calls are those of the systems still unfinished
        assert "database is locked" not in output
        gen_requests = chain.kinds["generate"]
        assert gen_requests == sum(c.data.metrics["generator/calls"] for c in new)
        assert all(c.data.metrics["generator/calls"] + c.data.metrics["generator/cache_hits"] == 4 for c in new)
        assert fake.n_requests > n_before

    print("kill points:", history)
    parents, children = split_runs(tmp_path)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", history
    done = [c for c in children if c.info.status == "FINISHED"]
    assert sorted(c.data.params["top_k"] for c in done) == sorted(systems), history
    assert {c.info.status for c in children} <= {"FINISHED", "KILLED"}  # nothing left RUNNING
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    # killed mid-way at least twice (generation and judging), so some systems ran more than once
    assert len(children) > len(systems)
    databases_ok(tmp_path)
