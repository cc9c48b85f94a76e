"""ManagedServer lifecycle (on a fake OpenAI server process), factories, and the real llama.cpp server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ragsweep.generator import (
    ChatClient,
    ChatRequest,
    ExecutableNotFoundError,
    LlamaCppServer,
    ManagedServer,
    PortInUseError,
    ServerStartupError,
    VLLMServer,
    extract_answer,
    find_orphans,
    stop_orphans,
)
from ragsweep.generator.server import VLLM_MISSING, pid_alive, port_is_free

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FAKE = str(TESTS / "fake_openai_server.py")


def fake_command(*extra: str):
    return lambda port: [sys.executable, FAKE, "--port", str(port), "--max-seconds", "60", *extra]


def wait_gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def state(tmp_path):
    return tmp_path / "state"


# -- lifecycle on a fake server process ----------------------------------------------------------
def test_managed_server_start_answer_stop(state):
    srv = ManagedServer(fake_command(), model_name="fake", state_dir=state, startup_timeout_s=20)
    with srv:
        pid, port = srv.pid, srv.port
        assert srv.base_url == f"http://127.0.0.1:{port}/v1" and srv.running
        assert srv.log_path.is_file() and (state / "servers" / f"{pid}.json").is_file()
        entry = json.loads((state / "servers" / f"{pid}.json").read_text())
        assert entry["owner_pid"] == os.getpid() and entry["base_url"] == srv.base_url
        r = ChatClient(srv.base_url, srv.model_name, progress=False).chat(ChatRequest.user("ping"))
        assert r.text == "echo: ping"
        assert not port_is_free(port)
    assert not srv.running and srv.pid == pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert port_is_free(port)
    assert not (state / "servers" / f"{pid}.json").exists()
    srv.stop()  # idempotent


def test_configured_port_in_use_is_a_clear_error(state):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        srv = ManagedServer(fake_command(), port=port, state_dir=state)
        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"):
            srv.start()
        assert srv.pid is None


def test_configured_free_port_is_used(state):
    from ragsweep.generator.server import free_port

    port = free_port()
    with ManagedServer(fake_command(), port=port, state_dir=state) as srv:
        assert srv.base_url == f"http://127.0.0.1:{port}/v1"


def test_exit_during_startup_fails_fast_with_log_tail(state):
    cmd = lambda port: [sys.executable, "-c", "import sys; print('boom: cannot load model'); sys.exit(3)"]  # noqa: E731
    srv = ManagedServer(cmd, state_dir=state, startup_timeout_s=60)
    t0 = time.monotonic()
    with pytest.raises(ServerStartupError, match="(?s)status 3.*boom: cannot load model"):
        srv.start()
    assert time.monotonic() - t0 < 10
    assert not list((state / "servers").glob("*.json"))


def test_startup_timeout_stops_the_process(state):
    srv = ManagedServer(fake_command("--startup-delay", "30"), state_dir=state, startup_timeout_s=1)
    with pytest.raises(ServerStartupError, match="did not become healthy within 1s"):
        srv.start()
    assert srv.pid is not None and wait_gone(srv.pid, 1)


def test_sigkill_after_grace_when_sigterm_ignored(state):
    srv = ManagedServer(fake_command("--ignore-sigterm"), state_dir=state, stop_grace_s=0.5).start()
    pid = srv.pid
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_missing_executable_is_a_clear_error(state):
    srv = ManagedServer(lambda port: ["ragsweep-no-such-server-xyz", str(port)], state_dir=state)
    with pytest.raises(ExecutableNotFoundError, match="ragsweep-no-such-server-xyz"):
        srv.start()


def test_vllm_not_installed_is_a_clear_error(state, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm there
    srv = VLLMServer(model="Qwen/Qwen2.5-7B-Instruct", state_dir=state)
    t0 = time.monotonic()
    with pytest.raises(ExecutableNotFoundError) as err:
        srv.start()
    assert str(err.value).startswith(VLLM_MISSING) and time.monotonic() - t0 < 1


def test_vllm_command_line():
    srv = VLLMServer(
        model="Qwen/Qwen2.5-7B-Instruct", tensor_parallel_size=2, gpu_memory_utilization=0.8,
        max_model_len=16384, extra_args=["--enforce-eager"],
    )
    assert srv.command(8123) == [
        "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--host", "127.0.0.1", "--port", "8123",
        "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.8", "--dtype", "auto",
        "--max-model-len", "16384", "--enforce-eager",
    ]
    assert srv.model_name == "Qwen/Qwen2.5-7B-Instruct" and srv.context_window == 16384
    assert srv.describe()["tensor_parallel_size"] == 2


def test_llamacpp_missing_model_file_names_the_path(state, tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    srv = LlamaCppServer(model_path=str(missing), state_dir=state)
    with pytest.raises(FileNotFoundError, match=str(missing)):
        srv.start()
    assert srv.pid is None


def test_llamacpp_command_line():
    srv = LlamaCppServer(n_ctx=4096, n_threads=2, extra_args=["--verbose", "False"])
    argv = srv.command(9000)
    assert argv[:3] == [sys.executable, "-m", "llama_cpp.server"]
    assert argv[argv.index("--model") + 1].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    for flag, value in [("--host", "127.0.0.1"), ("--port", "9000"), ("--n_ctx", "4096"),
                        ("--n_threads", "2"), ("--n_threads_batch", "2"), ("--model_alias", "smollm2")]:
        assert argv[argv.index(flag) + 1] == value
    assert argv[-2:] == ["--verbose", "False"]
    assert srv.cache_identity["model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert LlamaCppServer().n_threads == max(1, (os.cpu_count() or 2) // 2)


# -- the parent process's exit and signals ----------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import os, sys, time
    from ragsweep.generator.server import ManagedServer
    srv = ManagedServer(lambda p: [sys.executable, {fake!r}, "--port", str(p), "--max-seconds", "60"],
                        state_dir={state!r}).start()
    print(srv.pid, flush=True)
    mode = {mode!r}
    if mode == "exit":
        sys.exit(0)          # no stop(): atexit must stop it
    if mode == "crash":
        os._exit(0)          # no atexit: leaves an orphan
    time.sleep(60)           # wait for a signal
    """
)


def run_child(mode: str, state: Path) -> tuple[subprocess.Popen, int]:
    code = CHILD.format(fake=FAKE, state=str(state), mode=mode)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    line = child.stdout.readline()
    assert line.strip().isdigit(), f"child failed: {line!r}"
    return child, int(line)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_parent_signal_stops_server_and_keeps_exit_code(state, sig):
    child, server_pid = run_child("wait", state)
    try:
        assert pid_alive(server_pid)
        child.send_signal(sig)
        rc = child.wait(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    # SIGTERM: death by the signal; SIGINT: KeyboardInterrupt, which Python also reports as the signal
    assert rc in (-sig, 128 + sig, 1)
    if sig == signal.SIGTERM:
        assert rc == -sig
    assert wait_gone(server_pid, 5)
    assert not list((state / "servers").glob("*.json"))


def test_parent_exit_stops_server_via_atexit(state):
    child, server_pid = run_child("exit", state)
    assert child.wait(timeout=20) == 0
    assert wait_gone(server_pid, 5)


def test_orphans_are_found_and_stopped(state):
    child, server_pid = run_child("crash", state)
    child.wait(timeout=20)
    try:
        orphans = find_orphans(state)
        assert [o["pid"] for o in orphans] == [server_pid]
        assert stop_orphans(state) == [server_pid]
        assert wait_gone(server_pid, 5) and find_orphans(state) == []
    finally:
        if pid_alive(server_pid):
            os.killpg(server_pid, signal.SIGKILL)


# -- the real thing: llama.cpp with SmolLM2 -------------------------------------------------------------
@pytest.mark.slow
def test_llamacpp_server_answers_and_stops(state):
    srv = LlamaCppServer(n_ctx=2048, state_dir=state, startup_timeout_s=120)
    srv.start()
    try:
        pid, port = srv.pid, srv.port
        client = ChatClient(srv.base_url, srv.model_name, structured_mode=srv.structured_mode,
                            model_id=srv.cache_identity, timeout_s=120, progress=False)
        r = client.chat(ChatRequest.user(
            "What is the capital of France? Reply inside <answer></answer> tags.", max_tokens=32))
        assert r.ok and r.completion_tokens > 0, r.error
        assert "paris" in extract_answer(r.text).lower()
        s = client.chat(ChatRequest.user(
            "Give the name and age of a person.", max_tokens=48,
            response_format={"type": "object", "properties": {"name": {"type": "string"},
                             "age": {"type": "integer"}}, "required": ["name", "age"]}))
        assert s.ok and set(json.loads(s.text)) == {"name", "age"}
    finally:
        srv.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert port_is_free(port)
