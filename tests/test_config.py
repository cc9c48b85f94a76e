from pathlib import Path

import pytest

from ragsweep.config import REDACTED, flatten, validate
from ragsweep.errors import ConfigError


def test_default_config_validates(compose_cfg):
    out = validate(compose_cfg())
    assert out["chunker"].size == 300 and out["retriever"].top_k == 4


RETRIEVERS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "src/ragsweep/conf/retriever").glob("*.yaml"))


@pytest.mark.parametrize("retriever", RETRIEVERS)
def test_every_retriever_option_validates(compose_cfg, retriever):
    validate(compose_cfg(f"retriever={retriever}"))


@pytest.mark.parametrize("prompt", ["ragbench_generation", "no_context", "short", "long", "long_cot", "ragchecker_default", "ragchecker_optimized"])
def test_every_prompt_option_validates(compose_cfg, prompt):
    validate(compose_cfg(f"prompt={prompt}"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["chunker.size=100", "chunker.overlap=100"], r"chunker\.overlap .*must be smaller than chunker\.size"),
        (["+retriever.topk=3"], r"retriever\.topk: unknown field"),
        (["retriever.top_k=0"], r"retriever\.top_k"),
        (["retriever.top_k=abc"], r"retriever\.top_k"),
        (["dataset.limit=0"], r"dataset\.limit"),
        (["dataset=jsonl"], r"dataset\.corpus is required"),
        (["+generator.server.n_ctxx=5"], r"generator\.server\.n_ctxx: unknown field"),
        (["generator.max_tokens=0"], r"generator\.max_tokens"),
        (["max_failure_rate=2"], r"max_failure_rate"),
        (["prompt.template=no question here"], r"prompt\.template must contain \{question\}"),
    ],
)
def test_bad_config_names_the_field(compose_cfg, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose_cfg(*overrides))


def test_flatten_redacts_secrets_but_keeps_env_var_names():
    flat = flatten({"generator": {"server": {"api_key": "sk-123", "api_key_env": "OPENAI_API_KEY"}, "auth": {"token": "t"}}, "k": [1, 2]})
    assert flat["generator.server.api_key"] == REDACTED
    assert flat["generator.server.api_key_env"] == "OPENAI_API_KEY"
    assert flat["generator.auth.token"] == REDACTED
    assert flat["k"] == "1,2"
