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

from support.processes import wait_gone
from support import TESTS
from ragsweep.rag.generator import (
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
from ragsweep.rag.generator.server import VLLM_MISSING, pid_alive, port_is_free

ROOT = TESTS.parent
FAKE = str(TESTS / "fake_openai_server.py")


def fake_command(*extra: str):
    return lambda port: [sys.executable, FAKE, "--port", str(port), "--max-seconds", "60", *extra]


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
    from ragsweep.rag.generator.server import free_port

    port = free_port()
    with ManagedServer(fake_command(), port=port, state_dir=state) as srv:
        assert srv.base_url == f"http://127.0.0.1:{port}/v1"


def test_exit_during_startup_fails_fast_with_log_tail(state):
    cmd = lambda port: [sys.executable, "-c", "import sys; print('boom: cannot load model'); sys.exit(3)"]  # noqa: E731
    srv = ManagedServer(cmd, state_dir=state, startup_timeout_s=60)
    t0 = time.monotonic()
    with pytest.raises(ServerStartupError, match="(?s)status 3.*boom: cannot load model") as err:
        srv.start()
    assert time.monotonic() - t0 < 10
    assert "build_llama_cpp" not in str(err.value)
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


@pytest.mark.parametrize("again", [None, 0.3])
def test_a_second_sigterm_stops_a_server_that_waits_for_its_requests(state, again, monkeypatch):
    # llama-server, asked to stop with a request in flight, waits for it; only a second interrupt makes it
    # leave. Without the second SIGTERM every interrupted run waited the whole grace, then SIGKILLed
    monkeypatch.setattr(ManagedServer, "second_sigterm_s", again)
    srv = ManagedServer(fake_command("--second-sigterm"), state_dir=state, stop_grace_s=4).start()
    t0 = time.monotonic()
    srv.stop()
    took = time.monotonic() - t0
    assert wait_gone(srv.pid, 1)
    assert (took < 2.5) if again else (took >= 4), took
    assert LlamaCppServer.second_sigterm_s == 1.0


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
        sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "Qwen/Qwen2.5-7B-Instruct",
        "--host", "127.0.0.1", "--port", "8123",
        "--tensor-parallel-size", "2", "--gpu-memory-utilization", "0.8", "--dtype", "auto",
        "--max-model-len", "16384", "--generation-config", "vllm", "--enforce-eager",
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
    srv = LlamaCppServer(n_ctx=4096, n_threads=2, n_threads_batch=2, extra_args=["--verbose", "False"], model_format="source",
                         engine="llama-cpp-python")  # llama-server's command line: tests/unit/rag/generator/servers/
    argv = srv.command(9000)
    # llama.cpp's CPU backend for this CPU is loaded first, then llama_cpp.server runs
    assert argv[:4] == [sys.executable, "-m", "ragsweep.rag.generator.servers.cpu_backend", "llama_cpp.server"]
    assert argv[argv.index("--model") + 1].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    for flag, value in [("--host", "127.0.0.1"), ("--port", "9000"), ("--n_ctx", "4096"),
                        ("--n_threads", "2"), ("--n_threads_batch", "2"), ("--model_alias", "smollm2"),
                        ("--logits_all", "False")]:  # no logits of prompt tokens: the output head on the last only
        assert argv[argv.index(flag) + 1] == value
    assert argv[-2:] == ["--verbose", "False"]
    assert srv.cache_identity["model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


# -- a server that crashes: a real child process killed by a signal ---------------------------------
CRASHER = textwrap.dedent(
    """
    # a tiny OpenAI-compatible server that answers GET /v1/models, then ends as told: at startup,
    # or on the first POST; by a signal it sends itself (SIGSEGV, SIGILL) or by an exit status
    import os, signal, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    port, how, when = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    def end():
        print(f"ggml_compute_forward: about to end by {how}", flush=True)
        if how.startswith("SIG"):
            os.kill(os.getpid(), getattr(signal, how))
        sys.exit(int(how))

    for i in range(40):
        print(f"llama_model_loader: log line {i}", flush=True)
    if when == "startup":
        end()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"object": "list", "data": [{"id": "crasher", "object": "model"}]}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            end()

        def log_message(self, *args):
            pass

    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


class CrashingLlamaCpp(LlamaCppServer):
    """A LlamaCppServer (its crash diagnosis) whose process is the crasher script above."""

    def __init__(self, script: Path, how: str, when: str, **kw):
        kw.setdefault("engine", "llama-cpp-python")  # the script plays llama-cpp-python's server
        super().__init__(**kw)
        self.script, self.how, self.when = script, how, when

    def preflight(self) -> None:  # no model file needed
        pass

    def command(self, port: int) -> list[str]:
        return [sys.executable, str(self.script), str(port), self.how, self.when]


def crasher(tmp_path: Path, how: str, when: str, llama: bool = True, **kw):
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    kw.setdefault("startup_timeout_s", 20)
    if llama:
        kw.setdefault("replicas", 1)
        kw.setdefault("max_restarts", 0)  # the crash's report, not its restart (test_a_replica_that_dies_...)
        return CrashingLlamaCpp(script, how, when, **kw)
    return ManagedServer(lambda port: [sys.executable, str(script), str(port), how, when], **kw)


def crash_on_request(srv) -> str:
    """Send the request that makes ``srv`` end; return ``death()`` once it has."""
    import httpx

    with pytest.raises(httpx.HTTPError):
        httpx.post(srv.base_url + "/chat/completions", json={}, timeout=10, trust_env=False)
    deadline = time.monotonic() + 10
    while srv.running and time.monotonic() < deadline:
        time.sleep(0.05)
    death = srv.death()
    assert death is not None
    return death


def assert_log_tail(message: str, srv) -> None:
    assert str(srv.log_path) in message
    assert "ggml_compute_forward: about to end by" in message  # the log's last line
    # the last 20 lines: 21..39 and the last one, not the whole log
    assert "llama_model_loader: log line 39" in message and "log line 21\n" in message
    assert "log line 20\n" not in message


@pytest.mark.parametrize("how,signum", [("SIGSEGV", 11), ("SIGILL", 4)])
def test_llamacpp_crash_names_signal_log_tail_and_rebuild(state, tmp_path, how, signum):
    srv = crasher(tmp_path, how, "request", state_dir=state).start()
    try:
        assert srv.death() is None
        death = crash_on_request(srv)
    finally:
        srv.stop()
    first = death.splitlines()[0]
    assert first == f"the llamacpp server (pid {srv.pid}) died (killed by {how} (signal {signum})); its log: {srv.log_path}"
    assert_log_tail(death, srv)
    assert "compiled for another CPU" in death and "AVX-512" in death
    assert "scripts/build_llama_cpp.py" in death and "ragsweep-doctor" in death
    assert srv.log_path.is_file()  # kept after stop(), for the run's artifacts
    assert srv.death() is None  # stopped: no longer "died under us"


def test_llamacpp_plain_exit_has_no_cpu_hint(state, tmp_path):
    srv = crasher(tmp_path, "3", "request", state_dir=state).start()
    try:
        death = crash_on_request(srv)
    finally:
        srv.stop()
    assert death.splitlines()[0].endswith(f"died (exit status 3); its log: {srv.log_path}")
    assert_log_tail(death, srv)
    assert "build_llama_cpp" not in death and "another CPU" not in death


def test_other_managed_server_segfault_has_no_llamacpp_hint(state, tmp_path):
    srv = crasher(tmp_path, "SIGSEGV", "request", llama=False, state_dir=state).start()
    try:
        death = crash_on_request(srv)
    finally:
        srv.stop()
    assert "killed by SIGSEGV (signal 11)" in death.splitlines()[0]
    assert_log_tail(death, srv)
    assert "build_llama_cpp" not in death


def test_crash_during_startup_is_diagnosed_too(state, tmp_path):
    srv = crasher(tmp_path, "SIGILL", "startup", state_dir=state)
    t0 = time.monotonic()
    with pytest.raises(ServerStartupError) as err:
        srv.start()
    assert time.monotonic() - t0 < 10
    msg = str(err.value)
    assert msg.splitlines()[0] == (
        f"the llamacpp server (pid {srv.pid}) ended during startup, before GET /v1/models answered "
        f"(killed by SIGILL (signal 4)); its log: {srv.log_path}"
    )
    assert f"command: {sys.executable} " in msg
    assert_log_tail(msg, srv)
    assert "scripts/build_llama_cpp.py" in msg and "ragsweep-doctor" in msg
    assert srv.log_path.is_file() and not list((state / "servers").glob("*.json"))


def test_describe_exit():
    from ragsweep.rag.generator.servers.process import describe_exit

    assert describe_exit(-11) == "killed by SIGSEGV (signal 11)"
    assert describe_exit(3) == "exit status 3"
    assert describe_exit(132) == "exit status 132 (128+4: a process under it killed by SIGILL?)"
    llama = LlamaCppServer()
    assert "build_llama_cpp" in llama.crash_hint(139)  # a shell wrapper's 128+SIGSEGV
    assert llama.crash_hint(-signal.SIGKILL).startswith("likely cause: SIGKILL")
    assert llama.crash_hint(1) is None and ManagedServer().crash_hint(-11) is None
    from ragsweep.rag.generator.servers.llamacpp import rebuild_command

    assert rebuild_command() == f"cd {ROOT} && {sys.executable} scripts/build_llama_cpp.py"


# -- the parent process's exit and signals ----------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import os, sys, time
    from ragsweep.rag.generator.server import ManagedServer
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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])  # SIGHUP: the terminal closed
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
    if sig in (signal.SIGTERM, signal.SIGHUP):
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


def test_llama_threads_one_process_per_core_or_prompt_on_all_decode_on_half(monkeypatch):
    from ragsweep.rag.generator.servers import llamacpp
    from ragsweep.rag.generator.servers.llamacpp import LlamaCppServer

    monkeypatch.setattr(llamacpp, "usable_cpus", lambda: 2)
    srv = LlamaCppServer()  # replicas=auto: one process per core (at most 4), one thread each
    assert (srv.replicas, srv.n_threads, srv.n_threads_batch) == (2, 1, 1)
    assert srv.env["OMP_WAIT_POLICY"] == "PASSIVE"  # waiting threads sleep: no collapse beside a busy process
    monkeypatch.setattr(llamacpp, "usable_cpus", lambda: 16)
    assert (LlamaCppServer().replicas, LlamaCppServer().n_threads, LlamaCppServer().n_threads_batch) == (4, 4, 4)
    one = LlamaCppServer(replicas=1)  # a single process: prompts on all the cores, decoding on half
    assert (one.n_threads, one.n_threads_batch) == (8, 16)
    argv = LlamaCppServer(model_format="source", replicas=1, engine="llama-cpp-python").command(9000)
    assert argv[argv.index("--n_threads_batch") + 1] == "16"
    assert LlamaCppServer(n_threads=3).n_threads == 3  # an explicit setting wins
    assert LlamaCppServer(n_threads_batch=1).n_threads_batch == 1
    assert "OMP_WAIT_POLICY" not in LlamaCppServer(omp_wait_policy=None).env
    for bad in (0, -1, "two", True, 1.5):
        with pytest.raises(ValueError, match="generator.server.replicas"):
            LlamaCppServer(replicas=bad)


def test_usable_cpus_reads_the_containers_cpu_quota(tmp_path):
    """``replicas: auto`` and the thread defaults count the cores a container may use, not the host's."""
    from ragsweep.rag.generator.servers.llamacpp import usable_cpus

    allowed = len(os.sched_getaffinity(0))
    assert usable_cpus(tmp_path / "none") == allowed  # no cgroup files: the affinity mask
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("max 100000\n")  # no quota
    assert usable_cpus(v2) == allowed
    (v2 / "cpu.max").write_text("50000 100000\n")  # half a core: rounded up to one
    assert usable_cpus(v2) == 1
    (v2 / "cpu.max").write_text(f"{(allowed + 3) * 100000} 100000\n")  # a quota above the mask: the mask
    assert usable_cpus(v2) == allowed
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cpus(v1) == 1
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # v1's "no quota"
    assert usable_cpus(v1) == allowed


class FakeLlamaCpp(LlamaCppServer):
    """A LlamaCppServer whose processes are the fake OpenAI server (no model needed), in the place
    of llama-cpp-python's server: one request at a time per process."""

    def __init__(self, **kw):
        kw.setdefault("engine", "llama-cpp-python")
        super().__init__(**kw)

    def preflight(self) -> None:
        pass

    def served_model(self) -> Path:
        return Path("fake.gguf")

    def command(self, port: int) -> list[str]:
        return fake_command()(port)


def test_llamacpp_replicas_start_side_by_side_answer_and_stop_together(state):
    from ragsweep.rag.generator.servers.defaults import client_setting

    srv = FakeLlamaCpp(replicas=3, state_dir=state, startup_timeout_s=20, max_restarts=0)  # never restarted
    srv.start()
    try:
        urls = srv.base_urls
        assert len(set(urls)) == 3 and srv.running and len(srv.log_paths) == 3
        pids = [srv.pid, *(s.pid for s in srv._replicas)]
        assert len(set(pids)) == 3 and all(pid_alive(p) for p in pids)
        assert len(list((state / "servers").glob("*.json"))) == 3  # each registered: found if we die
        client = ChatClient(urls, srv.model_name, concurrency=client_setting("concurrency", None, srv), progress=False)
        assert client.concurrency == 3
        res = client.chat_many([ChatRequest.user(f"q{i}") for i in range(6)])
        assert [r.text for r in res] == [f"echo: q{i}" for i in range(6)]
        os.killpg(srv._replicas[1].pid, signal.SIGKILL)  # one process dies: the server is dead, and says which
        deadline = time.monotonic() + 10
        while srv._replicas[1].running and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not srv.running and "died" in srv.death()
    finally:
        srv.stop()
    assert not any(pid_alive(p) for p in pids) and not list((state / "servers").glob("*.json"))


def wait_until(cond, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


def test_a_replica_that_dies_is_restarted_on_its_port_and_counted(state):
    srv = FakeLlamaCpp(replicas=2, state_dir=state, startup_timeout_s=20, max_restarts=2, restart_backoff_s=0.1)
    srv.start()
    try:
        urls, sib = srv.base_urls, srv._replicas[0]
        old_pid, old_log = sib.pid, sib.log_path
        os.killpg(old_pid, signal.SIGKILL)  # the OOM killer, a crash
        assert wait_until(lambda: srv.restart_count() == 1 and srv.running and sib.pid != old_pid)
        assert srv.base_urls == urls and srv.death() is None and not srv.endpoint_gone(1)
        assert not pid_alive(old_pid) and pid_alive(sib.pid)
        assert old_log in srv.log_paths and sib.log_path in srv.log_paths and len(srv.log_paths) == 3
        assert sorted(p.name for p in (state / "servers").glob("*.json")) == sorted(f"{p}.json" for p in (srv.pid, sib.pid))
        res = ChatClient(urls, srv.model_name, concurrency=2, progress=False).chat_many([ChatRequest.user(f"q{i}") for i in range(4)])
        assert [r.text for r in res] == [f"echo: q{i}" for i in range(4)]
    finally:
        srv.stop()
    assert not pid_alive(sib.pid) and not list((state / "servers").glob("*.json"))


def test_a_server_that_keeps_dying_is_given_up_naming_its_logs(state):
    srv = ManagedServer(fake_command(), model_name="fake", state_dir=state, startup_timeout_s=20, max_restarts=1,
                        restart_backoff_s=0.05)
    srv.start()
    try:
        first = srv.pid
        os.killpg(first, signal.SIGKILL)
        assert wait_until(lambda: srv.restarts == 1 and srv.running)
        second = srv.pid
        os.killpg(second, signal.SIGKILL)
        assert wait_until(lambda: srv.death() is not None)
        death = srv.death()
        assert f"the managed server (pid {second}) died (killed by SIGKILL (signal 9))" in death.splitlines()[0]
        assert "restarted 1 time(s) and died again; gave up (generator.server.max_restarts=1)" in death
        assert all(str(p) in death for p in srv.log_paths) and len(srv.log_paths) == 2
        assert srv.endpoint_gone() and not srv.running
        time.sleep(0.5)
        assert srv.pid == second and srv.restarts == 1  # no third process
    finally:
        srv.stop()
    assert not list((state / "servers").glob("*.json"))


def test_a_stopped_server_is_not_restarted(state):
    srv = ManagedServer(fake_command(), model_name="fake", state_dir=state, startup_timeout_s=20, max_restarts=3,
                        restart_backoff_s=0.05)
    srv.start()
    pid = srv.pid
    srv.stop()
    time.sleep(0.6)
    assert srv.restarts == 0 and srv.pid == pid and not srv.running and srv.endpoint_gone()
    with pytest.raises(ValueError, match="max_restarts"):
        ManagedServer(fake_command(), max_restarts=-1)
