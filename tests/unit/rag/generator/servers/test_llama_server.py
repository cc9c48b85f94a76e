"""llama.cpp's own llama-server as the llama.cpp engine: its command line (slots of n_ctx tokens
each, one thread per process, flash attention as configured), the client's requests in flight
(processes x slots), the engine chosen where it was built, and bad settings named by field. The
real server answers in tests/system/test_cpu_dispatch.py."""

from __future__ import annotations

import pytest

from ragsweep.errors import ConfigError
from ragsweep.rag.generator.servers.defaults import client_setting
from ragsweep.rag.generator.servers.errors import ExecutableNotFoundError
from ragsweep.rag.generator.servers.llamacpp import LlamaCppServer
from ragsweep.rag.generator.servers import llama_server


@pytest.fixture
def built(tmp_path, monkeypatch):
    """A llama-server 'built' beside llama-cpp-python (an executable file)."""
    exe = tmp_path / "lib" / "llama-server"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(llama_server, "executable", lambda run=False: exe)
    return exe


def server(**kw) -> LlamaCppServer:
    return LlamaCppServer(model_format="source", replicas=2, n_threads=1, n_threads_batch=1, **kw)


def test_llama_server_command_line(built):
    srv = server(engine="llama-server", n_ctx=4096, flash_attn=False, extra_args=["--verbose"])
    argv = srv.command(9000)
    assert argv[0] == str(built)
    for flag, value in [("--host", "127.0.0.1"), ("--port", "9000"), ("--alias", "smollm2"), ("--parallel", "1"),
                        ("--ctx-size", "4096"),  # one slot by default: batched slots do not repeat their answers
                        ("--threads", "1"), ("--threads-batch", "1"), ("--flash-attn", "off")]:
        assert argv[argv.index(flag) + 1] == value, flag
    assert argv[argv.index("--model") + 1].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert "--no-webui" in argv and argv[-1] == "--verbose"
    assert srv.health_path == "/health"
    assert srv.describe()["engine"] == "llama-server" and srv.describe()["parallel"] == 1
    four = server(engine="llama-server", n_ctx=4096, parallel=4).command(9000)
    assert four[four.index("--parallel") + 1] == "4" and four[four.index("--ctx-size") + 1] == str(4096 * 4)  # n_ctx each


def test_requests_in_flight_are_processes_times_slots(built):
    srv = server(engine="llama-server", parallel=3)
    assert srv.slots == 3 and client_setting("concurrency", None, srv) == 2 * 3
    assert client_setting("timeout_s", None, srv) == 3 * 120.0  # each request shares its process with 2 others
    own = server(engine="llama-cpp-python")
    assert own.slots == 1 and client_setting("concurrency", None, own) == 2
    assert client_setting("concurrency", 5, srv) == 5  # a configured number wins


def test_auto_engine_is_llama_server_where_it_was_built(built, monkeypatch):
    assert server().engine == "llama-server"
    monkeypatch.setattr(llama_server, "executable", lambda run=False: None)
    assert server().engine == "llama-cpp-python" and server().parallel == 1


def test_asking_for_llama_server_without_it_names_the_fix(monkeypatch):
    monkeypatch.setattr(llama_server, "executable", lambda run=False: None)
    srv = server(engine="llama-server")
    with pytest.raises(ExecutableNotFoundError, match=r"scripts/build_llama_cpp\.py.*engine=llama-cpp-python"):
        srv.command(9000)


@pytest.mark.parametrize("field, value, match", [
    ("engine", "vllm", r"generator\.server\.engine='vllm'.*llama-cpp-python, llama-server"),
    ("parallel", 0, r"generator\.server\.parallel must be 'auto' or an integer >= 1, got 0"),
    ("flash_attn", "maybe", r"generator\.server\.flash_attn='maybe': use on, off or auto"),
])
def test_bad_settings_name_the_field(built, field, value, match):
    with pytest.raises(ConfigError, match=match):
        server(**{"engine": "llama-server", field: value})


def test_answers_of_llama_server_are_cached_apart(built):
    """Another chat-template engine and batched arithmetic: other answers, other cache keys (and
    per number of slots); the llama-cpp-python engine keeps the keys it always had."""
    assert server(engine="llama-server").cache_identity["engine"] == "llama-server"
    assert "engine" not in server(engine="llama-cpp-python").cache_identity
    # batched slots' answers change from run to run: keyed apart from one slot's, which repeat
    assert server(engine="llama-server").cache_identity["slots"] == 1
    assert server(engine="llama-server", parallel=4).cache_identity["slots"] == 4
    assert "slots" not in server(engine="llama-cpp-python").cache_identity


def test_flash_attention_for_llama_cpp_python(built):
    assert "--flash_attn" not in server(engine="llama-cpp-python").command(9000)
    on = server(engine="llama-cpp-python", flash_attn="on").command(9000)
    assert on[on.index("--flash_attn") + 1] == "True"
    assert llama_server.check_flash_attn(True) == "on" and llama_server.check_flash_attn(None) == "auto"


def test_answers_of_another_build_or_cpu_variant_are_cached_apart(built, monkeypatch):
    """A llama.cpp build with other arithmetic (a patch, other flags) or another CPU variant (AMX
    against AVX-512) answers differently: a cached answer of one is not served to the other."""
    from ragsweep.rag.generator.servers import cpu_backend, llama_build

    monkeypatch.setattr(llama_build, "build_record", lambda: {"key": "abc"})
    monkeypatch.setattr(cpu_backend, "planned_variant", lambda: "sapphirerapids")
    ident = server(engine="llama-server").cache_identity
    assert ident["llama_build"] == "abc" and ident["cpu_variant"] == "sapphirerapids"
    monkeypatch.setattr(cpu_backend, "planned_variant", lambda: "haswell")
    assert server(engine="llama-server").cache_identity["cpu_variant"] == "haswell"
    monkeypatch.setattr(llama_build, "build_record", lambda: {})  # not installed by the build script
    monkeypatch.setattr(cpu_backend, "planned_variant", lambda: None)  # no per-CPU variants
    ident = server(engine="llama-cpp-python").cache_identity
    assert "llama_build" not in ident and "cpu_variant" not in ident
