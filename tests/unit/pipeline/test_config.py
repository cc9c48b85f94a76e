
import pytest

from support import CONF
from ragsweep.pipeline.config import REDACTED, flatten, validate
from ragsweep.errors import ConfigError


def test_default_config_validates(compose_cfg):
    out = validate(compose_cfg())
    assert out["chunker"].size == 300 and out["retriever"].top_k == 4


RETRIEVERS = sorted(p.stem for p in (CONF / "retriever").glob("*.yaml"))


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
        (["budget_usd=-1"], r"budget_usd must be a number of USD >= 0"),
        (["sweep.budget_usd=lots"], r"sweep\.budget_usd must be a number of USD >= 0"),
        (["sweep.dry_run=maybe"], r"sweep\.dry_run must be true or false"),
        (["estimate.claims_per_answer=20"], r"estimate\.claims_range must be \[low, high\]"),
        (["generator.price_per_1k_tokens={prompt: 0.1}"], r"generator\.price_per_1k_tokens: a mapping needs both"),
        (["evaluator=llm", "evaluator.judge.price_per_1k_tokens=-3"],
         r"evaluator\.judge\.price_per_1k_tokens must be a number >= 0"),
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


# -- one `server` config group, used by the generator and by the LLM judge --------------------------
def test_generator_and_judge_share_the_server_group(compose_cfg):
    from omegaconf import OmegaConf

    cfg = compose_cfg("evaluator=llm")
    gen, judge = (OmegaConf.to_container(n) for n in (cfg.generator.server, cfg.evaluator.judge.server))
    assert gen == judge and gen["_target_"] == "ragsweep.rag.generator.server.LlamaCppServer"
    validate(cfg)


@pytest.mark.parametrize(
    "overrides, node, expected",
    [
        (["generator.server.n_threads=2"], "generator.server", {"n_threads": 2, "n_ctx": 8192}),
        (["generator=vllm", "generator.server.model=meta-llama/Llama-3.1-8B-Instruct"], "generator.server",
         {"_target_": "ragsweep.rag.generator.server.VLLMServer", "model": "meta-llama/Llama-3.1-8B-Instruct"}),
        (["generator=external", "generator.server.base_url=http://my-vllm:8000/v1", "generator.server.model=M",
          "generator.server.api_key_env=MY_KEY"], "generator.server",
         {"_target_": "ragsweep.rag.generator.server.ExternalServer", "base_url": "http://my-vllm:8000/v1",
          "model": "M", "api_key_env": "MY_KEY"}),
        (["generator=external", "generator.server.api_key_env=null"], "generator.server", {"api_key_env": None}),
        (["evaluator=llm", "evaluator.judge.server.n_ctx=4096"], "evaluator.judge.server", {"n_ctx": 4096}),
        (["evaluator=llm", "server@evaluator.judge.server=external", "evaluator.judge.server.model=gpt-4o"],
         "evaluator.judge.server", {"_target_": "ragsweep.rag.generator.server.ExternalServer", "model": "gpt-4o"}),
        (["server@generator.server=vllm"], "generator.server", {"_target_": "ragsweep.rag.generator.server.VLLMServer"}),
    ],
)
def test_server_overrides(compose_cfg, overrides, node, expected):
    from omegaconf import OmegaConf

    cfg = compose_cfg(*overrides)
    server = OmegaConf.to_container(OmegaConf.select(cfg, node))
    assert {k: server[k] for k in expected} == expected
    validate(cfg)
