"""A sweep SIGKILLed after its first system finished resumes under the same MLflow parent, redoes
nothing that finished, and does not leave the killed sweep's model server running; the same
finished sweep started again is a new parent whose systems all come from the cache."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from urllib.parse import urlsplit

import pytest

from ragsweep.rag.generator.server import LlamaCppServer, pid_alive
from support import answered_requests
from test_launchers import (  # the tests folder is on sys.path (pytest's default import mode)
    llama_server_pids,
    mlflow_runs,
    parents_and_children,
    registry_entries,
    sweep_cmd,
    sweep_env,
    tiny_dataset,
)

N_QUESTIONS = 4
SYSTEMS = {"1", "2", "3"}  # retriever.top_k


def _key(run) -> str:
    return run.data.tags["ragsweep.system_key"]


def _server_requests(state_dir, owner_pid: int) -> int:
    """Generation requests answered by the servers that ``owner_pid`` started (their logs)."""
    logs = (state_dir / "servers" / "logs").glob(f"llamacpp-*-{owner_pid}-*.log")
    return sum(answered_requests(p.read_text(errors="replace")) for p in logs)


def _run_to_end(cmd, tmp_path, env, timeout=400):
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the sweep did not finish within {timeout}s:\n{out[-4000:]}")
    assert proc.returncode == 0, out[-4000:]
    return proc


@pytest.mark.slow
def test_killed_sweep_resumes_under_one_parent_and_redoes_nothing(tmp_path):
    state = tmp_path / "state"
    env = sweep_env(tmp_path)
    cmd = sweep_cmd(
        *tiny_dataset(tmp_path, N_QUESTIONS),
        "retriever.top_k=1,2,3",
        "generator.max_tokens=8",
        "evaluator=none",  # evaluation is not what this test is about (and costs a model load per job)
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
    )

    # 1. start the sweep; SIGKILL its whole process group once its first system has FINISHED
    log = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while True:
            assert first.poll() is None, "the sweep ended before it could be killed:\n" + (tmp_path / "first.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "no child run FINISHED in time"
            # read MLflow only once the sweep has created its store (and parent run), never
            # racing it to create the tables
            if (tmp_path / "multirun" / ".ragsweep_sweep.json").exists():
                _, children = parents_and_children(mlflow_runs(tmp_path))
                if any(c.info.status == "FINISHED" for c in children):
                    break
            time.sleep(0.25)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        log.close()
    killed_at_ms = int(time.time() * 1000)

    parents, children = parents_and_children(mlflow_runs(tmp_path))
    assert len(parents) == 1 and parents[0].info.status == "RUNNING"
    parent_id = parents[0].info.run_id
    done_before = {_key(c) for c in children if c.info.status == "FINISHED"}
    assert 1 <= len(done_before) < len(SYSTEMS), "the kill came too late to test a resume"
    # the killed sweep's llama.cpp server runs in its own session: SIGKILL left it behind
    # (each of its processes: generator.server.replicas, one per core up to 4)
    left_behind = [int(e["pid"]) for e in registry_entries(state)]
    assert len(left_behind) == LlamaCppServer().replicas and all(pid_alive(p) for p in left_behind)
    left_ports = [urlsplit(e["base_url"]).port for e in registry_entries(state)]

    # 2. the same command again: resumes the same parent, runs only what had not finished
    second = _run_to_end(cmd, tmp_path, env)
    parents, children = parents_and_children(mlflow_runs(tmp_path))
    assert [p.info.run_id for p in parents] == [parent_id]
    assert parents[0].info.status == "FINISHED"
    assert all(c.data.tags["mlflow.parentRunId"] == parent_id for c in children)
    finished = [c for c in children if c.info.status == "FINISHED"]
    per_system = Counter(_key(c) for c in finished)
    assert len(per_system) == len(SYSTEMS) and set(per_system.values()) == {1}, per_system
    assert {c.data.params["top_k"] for c in finished} == SYSTEMS
    # the job killed mid-way was marked KILLED, not left RUNNING
    assert {c.info.status for c in children} <= {"FINISHED", "KILLED"}
    new = [c for c in children if c.info.start_time >= killed_at_ms]
    assert {_key(c) for c in new} == set(per_system) - done_before
    assert len(new) == len(SYSTEMS) - len(done_before)
    # the finished systems' answers were not generated again: the new runs asked the server only
    # for their own questions (fewer when the killed job had cached some), and nothing else did
    calls = sum(c.data.metrics["generator/calls"] for c in new)
    assert all(c.data.metrics["generator/calls"] + c.data.metrics["generator/cache_hits"] == N_QUESTIONS for c in new)
    assert _server_requests(state, second.pid) == calls
    # the server left behind was stopped; the restarted sweep's own server is gone too
    assert not any(pid_alive(p) for p in left_behind)
    assert all(llama_server_pids(port) == [] for port in left_ports)
    assert registry_entries(state) == []

    # 3. the finished sweep started again: a new parent, every answer from the cache
    third = _run_to_end(cmd, tmp_path, env)
    parents, children = parents_and_children(mlflow_runs(tmp_path))
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    new_parent = [p for p in parents if p.info.run_id != parent_id][0]
    again = [c for c in children if c.data.tags["mlflow.parentRunId"] == new_parent.info.run_id]
    assert len(again) == len(SYSTEMS) and all(c.info.status == "FINISHED" for c in again)
    assert {c.data.params["top_k"] for c in again} == SYSTEMS
    assert [c.data.metrics["generator/calls"] for c in again] == [0] * len(SYSTEMS)
    assert [c.data.metrics["generator/cache_hits"] for c in again] == [N_QUESTIONS] * len(SYSTEMS)
    assert _server_requests(state, third.pid) == 0
    assert registry_entries(state) == []
    assert [p for p in left_behind if pid_alive(p)] == []
