"""The weight format llama.cpp serves: converted once with llama.cpp's quantize API, cached under the
cache directory keyed by the source's hash and the format, the serving file logged; a bad
``generator.server.model_format`` is a one-line error naming the field."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest

from ragsweep.errors import ConfigError
from ragsweep.rag.generator.servers import gguf_format
from ragsweep.rag.generator.servers.llamacpp import LlamaCppServer


@pytest.fixture
def fake_quantize(monkeypatch):
    """The conversion child process replaced by one that writes ``<format>:<source bytes>``."""
    calls = []

    def run(cmd, **kw):
        src, dst, fmt = cmd[-3:]
        calls.append(fmt)
        Path(dst).write_bytes(fmt.encode() + b":" + Path(src).read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(gguf_format.subprocess, "run", run)
    monkeypatch.delenv("RAGSWEEP_GGUF_DIR", raising=False)
    return calls


def test_conversion_is_cached_and_keyed_by_format_and_content(tmp_path, fake_quantize):
    src = tmp_path / "m.gguf"
    src.write_bytes(b"weights-1")
    cache = tmp_path / "cache"
    f16, made = gguf_format.converted_model(src, "f16", cache)
    assert made and f16.parent == cache / "gguf" and f16.name.endswith(".f16.gguf")
    assert f16.read_bytes() == b"f16:weights-1"
    assert gguf_format.converted_model(src, "F16", cache) == (f16, False)  # second use: a cache hit
    q8, made = gguf_format.converted_model(src, "q8_0", cache)
    assert made and q8 != f16 and q8.read_bytes() == b"q8_0:weights-1"
    assert fake_quantize == ["f16", "q8_0"]
    src.write_bytes(b"weights-2")  # same name, other content: its own conversion
    again, made = gguf_format.converted_model(src, "f16", cache)
    assert made and again != f16 and again.read_bytes() == b"f16:weights-2"
    assert gguf_format.converted_model(src, "source", cache) == (src, False)  # served as it is
    assert not list((cache / "gguf").glob("*.tmp"))


def test_a_failed_conversion_leaves_no_file_and_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGSWEEP_GGUF_DIR", raising=False)
    monkeypatch.setattr(gguf_format.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "llama_model_quantize returned 1"))
    src = tmp_path / "m.gguf"
    src.write_bytes(b"w")
    with pytest.raises(RuntimeError, match="returned 1") as err:
        gguf_format.converted_model(src, "q4_0", tmp_path / "cache")
    assert "generator.server.model_format=source" in str(err.value)
    assert not list((tmp_path / "cache" / "gguf").glob("*.gguf*"))


def test_server_serves_the_converted_file_and_logs_it(tmp_path, fake_quantize, caplog):
    src = tmp_path / "m.gguf"
    src.write_bytes(b"weights")
    srv = LlamaCppServer(model_path=str(src), model_format="q8_0", cache_dir=str(tmp_path / "cache"), n_threads=1)
    with caplog.at_level(logging.INFO, logger="ragsweep.rag.generator.servers.llamacpp"):
        argv = srv.command(9000)
    served = Path(argv[argv.index("--model") + 1])
    assert served.parent == tmp_path / "cache" / "gguf" and served.name.endswith(".q8_0.gguf")
    assert f"llama.cpp serves {served} (converted now to q8_0 of {src}" in caplog.text
    assert srv.cache_identity["model_format"] == "q8_0"  # other weights, other answers: other cache keys
    assert "model_format" not in LlamaCppServer(model_path=str(src), model_format="source").cache_identity


def test_bad_model_format_is_a_config_error_naming_the_field(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_bytes(b"w")
    srv = LlamaCppServer(model_path=str(src), model_format="q3_k", state_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"generator\.server\.model_format='q3_k'.*f16, q8_0") as err:
        srv.check()
    assert "generator.server.model_format=f16" in str(err.value)  # the fix
    assert srv.pid is None


def test_default_config_serves_f16_from_the_runs_cache_dir(compose_cfg):
    cfg = compose_cfg("cache_dir=/somewhere/cache")
    assert cfg.generator.server.model_format == "auto"
    assert cfg.generator.server.cache_dir == "/somewhere/cache"


def test_auto_converts_the_bundled_model_only(tmp_path, fake_quantize, monkeypatch):
    """``auto`` (the default): the bundled SmolLM2 in the format this machine measured fastest
    (format_choice, tested in tests/unit/rag/test_format_choice.py); a user's own file (perhaps a
    7B Q4, which F16 would make 4x larger) is served as it is unless a format is asked for."""
    from ragsweep.rag.generator.servers import format_choice

    asked = []
    monkeypatch.setattr(format_choice, "choose", lambda source, cache_dir=None: asked.append(source.name) or "q8_0")
    own = tmp_path / "own.gguf"
    own.write_bytes(b"w")
    assert LlamaCppServer().effective_format() == "q8_0"
    assert LlamaCppServer().cache_identity["model_format"] == "q8_0"
    assert asked == ["SmolLM2-135M-Instruct.Q4_1.gguf"] * 2
    srv = LlamaCppServer(model_path=str(own), cache_dir=str(tmp_path / "cache"))
    assert srv.effective_format() == "source" and srv.served_model() == own
    assert fake_quantize == [] and len(asked) == 2
    assert LlamaCppServer(model_path=str(own), model_format="f16").effective_format() == "f16"
    assert LlamaCppServer(model_format="bf16").effective_format() == "bf16" and len(asked) == 2  # explicit wins


def test_auto_falls_back_to_f16_with_a_warning_when_measuring_fails(monkeypatch, caplog):
    from ragsweep.rag.generator.servers import format_choice

    def broken(source, cache_dir=None):
        raise RuntimeError("timing the weight formats failed (exit 1): boom")

    monkeypatch.setattr(format_choice, "choose", broken)
    with caplog.at_level(logging.WARNING, logger="ragsweep.generator.servers.llamacpp"):
        assert LlamaCppServer().effective_format() == "f16"
    assert "measuring the weight formats failed" in caplog.text and "generator.server.model_format" in caplog.text


@pytest.mark.slow
def test_real_conversion_with_llama_cpp_quantize(tmp_path, monkeypatch):
    """llama.cpp's own llama_model_quantize on the packaged SmolLM2 (Q4_1 -> Q4_0, ~1-2 s)."""
    from ragsweep.rag.generator.servers.llamacpp import resolve_model_path

    monkeypatch.delenv("RAGSWEEP_GGUF_DIR", raising=False)
    src = resolve_model_path("smollm2")
    out, made = gguf_format.converted_model(src, "q4_0", tmp_path)
    assert made and out.read_bytes()[:4] == b"GGUF"
    assert 0 < out.stat().st_size < src.stat().st_size  # Q4_0 blocks are smaller than Q4_1's
    assert gguf_format.converted_model(src, "q4_0", tmp_path) == (out, False)
