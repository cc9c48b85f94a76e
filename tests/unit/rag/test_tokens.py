"""tokens.counter_for picks a counter from what the server's config names, not from its kind."""

from __future__ import annotations

from types import SimpleNamespace

from ragsweep.rag import tokens


def test_counter_follows_the_servers_fields(monkeypatch, tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setattr(tokens, "gguf_counter", lambda path: ("gguf", path))
    monkeypatch.setattr(tokens, "hf_counter", lambda name: ("hf", name))
    # any kind (even one added later) that names a model file is counted with its vocabulary
    assert tokens.counter_for(SimpleNamespace(kind="new-kind", model_path=str(gguf))) == ("gguf", str(gguf))
    assert tokens.counter_for(SimpleNamespace(model_path=str(gguf), resolved_model_path=str(gguf)))[0] == "gguf"
    assert tokens.counter_for(SimpleNamespace(kind="other", model="org/model")) == ("hf", "org/model")
    assert tokens.counter_for(SimpleNamespace(kind="external", model_name="gpt-4o-mini")) is tokens.estimate
    # a model file that cannot be found: estimated, never an error
    assert tokens.counter_for(SimpleNamespace(model_path=str(tmp_path / "missing.gguf"))) is tokens.estimate


def test_counter_for_the_shipped_server_classes(monkeypatch):
    from ragsweep.rag.generator.server import ExternalServer, LlamaCppServer, VLLMServer

    monkeypatch.setattr(tokens, "gguf_counter", lambda path: "gguf")
    monkeypatch.setattr(tokens, "hf_counter", lambda name: ("hf", name))
    monkeypatch.setattr("ragsweep.rag.generator.server.resolve_model_path", lambda p: p)
    assert tokens.counter_for(LlamaCppServer()) == "gguf"
    assert tokens.counter_for(VLLMServer(model="Qwen/Qwen2.5-7B-Instruct")) == ("hf", "Qwen/Qwen2.5-7B-Instruct")
    assert tokens.counter_for(ExternalServer(base_url="https://example.invalid/v1", model="gpt-4o-mini")) is tokens.estimate
