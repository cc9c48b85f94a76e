import pytest
import yaml

from ragsweep.errors import ConfigError
from ragsweep.rag.prompt import PromptTemplate
from ragsweep.types import Chunk, Hit

from conftest import CONF_DIR


def _hits(*texts):
    return [Hit(Chunk(f"d{i}#0", f"d{i}", 0, len(t), t), 1.0 / (i + 1), i + 1) for i, t in enumerate(texts)]


def _load(name):
    with open(f"{CONF_DIR}/prompt/{name}.yaml") as fh:
        data = yaml.safe_load(fh)
    data.pop("_target_")
    return PromptTemplate(**data)


def test_ragchecker_default_is_verbatim_fig5():
    p = _load("ragchecker_default")
    out = p.render("Who?", _hits("alpha", "beta"))
    assert out == (
        "Please answer the given question based on the context.\n\n<context>\n<content>\nalpha\n</content>\n"
        "<content>\nbeta\n</content>\n</context>\n\nQuestion: Who?\n\n"
        "Please answer the question and tag your answer with <answer></answer>."
    )
    assert p.config.answer_tag == "answer"


@pytest.mark.parametrize("name", ["ragbench_generation", "no_context", "short", "long", "long_cot", "ragchecker_default", "ragchecker_optimized"])
def test_every_shipped_prompt_renders(name):
    p = _load(name)
    out = p.render("What is X?", _hits("doc one", "doc two"))
    assert "What is X?" in out
    if name == "no_context":
        assert out == "What is X?" and not p.uses_documents
    else:
        assert "doc one" in out and "doc two" in out


def test_case_study_cot_adds_only_the_reasoning_instruction():
    long, cot = _load("long").config.template, _load("long_cot").config.template
    extra = "Think step by step and explain your reasoning, quoting the documents when necessary.\n\n"
    assert cot.replace(extra, "") == long


def test_template_without_question_is_rejected():
    with pytest.raises(ValueError, match=r"prompt.template must contain \{question\}"):
        PromptTemplate(template="Context: {documents}")


@pytest.mark.parametrize("bad", ["{question.__class__}", "{question} {0}", "{question} {secret}", "{question"])
def test_no_code_or_unknown_fields_in_templates(bad):
    with pytest.raises(ValueError, match="prompt.template"):
        PromptTemplate(template=bad)


def test_fit_drops_lowest_ranked_chunks_and_says_so():
    p = PromptTemplate(template="{documents}\nQ: {question}")
    hits = _hits("a " * 50, "b " * 50, "c " * 50)
    count = lambda s: len(s.split())  # noqa: E731
    prompt, kept, dropped = p.fit("q", hits, budget=110, count_tokens=count)
    assert [h.rank for h in kept] == [1, 2] and dropped == 1
    assert count(prompt) <= 110


def test_fit_error_policy_names_both_sizes():
    p = PromptTemplate(template="{documents}\nQ: {question}", fit="error")
    with pytest.raises(ConfigError, match=r"has 152 tokens but the model accepts 100"):
        p.fit("q", _hits("a " * 50, "b " * 50, "c " * 50), budget=100, count_tokens=lambda s: len(s.split()))
