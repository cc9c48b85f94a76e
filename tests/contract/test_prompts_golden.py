"""Golden test: the LLM judge's extraction and checking prompts are RefChecker's, verbatim.

``tests/fixtures/refchecker/*.py.txt`` are unmodified copies of RefChecker's prompt modules
(amazon-science/RefChecker at the commit named in their header, Apache-2.0). Each prompt is
filled here the way RefChecker's own code fills it (``str.format`` in
``LLMExtractor.extract_claim_triplets``; the ``[QUESTION]`` / ``[REFERENCE]`` / ``[CLAIMS]``
replacements of ``LLMChecker._check(is_joint=True)``) and compared, character for character,
with what ragsweep sends.
"""

from __future__ import annotations

import ast
import re

import pytest

from support import CONF, FIXTURES
from ragsweep.judge.llm_checker import LLMChecker, parse_labels
from ragsweep.judge.llm_extractor import REFCHECKER_COMMIT, LLMExtractor, parse_claims, refchecker_triplets

FIX = FIXTURES / "refchecker"

QUESTION = "Where is the Eiffel Tower, and when was it built?"
RESPONSE = 'The Eiffel Tower is in Paris. It was built from 1887 to 1889 for the "Exposition Universelle" {1889}.'
REFERENCE = "The Eiffel Tower (French: tour Eiffel) is a wrought-iron lattice tower in Paris, France."
TRIPLETS = [["Eiffel Tower", "is located in", "Paris"], ["Eiffel Tower", "built from", "1887 to 1889"]]


def _refchecker(module: str) -> dict[str, str]:
    """The string constants of a RefChecker prompt module copy (read with ast, never run)."""
    path = FIX / f"{module}.py.txt"
    text = path.read_text(encoding="utf-8")
    assert REFCHECKER_COMMIT in text.split("---- verbatim from here ----")[0]
    tree = ast.parse(text)
    return {
        node.targets[0].id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
    }


def test_fixtures_are_the_licensed_copy():
    assert "Apache License" in (FIX / "LICENSE").read_text()[:300]
    prompts = _refchecker("extractor_prompts")
    # the rule against redundant and inverse triplets is in the prompt ragsweep sends
    assert "avoid creating triplets that are simply the inverse of another triplet" in prompts["LLM_TRIPLET_EXTRACTION_PROMPT_Q"]
    assert "Clarification on redundancy" in prompts["LLM_TRIPLET_EXTRACTION_PROMPT_Q"]


def test_extraction_prompt_with_question_is_refcheckers():
    expected = _refchecker("extractor_prompts")["LLM_TRIPLET_EXTRACTION_PROMPT_Q"].format(q=QUESTION, a=RESPONSE)
    got = LLMExtractor(claim_format="triplet").prompt(RESPONSE, QUESTION)
    assert got == expected


def test_extraction_prompt_without_question_is_refcheckers():
    expected = _refchecker("extractor_prompts")["LLM_TRIPLET_EXTRACTION_PROMPT"].format(input_text=RESPONSE)
    assert LLMExtractor(claim_format="triplet").prompt(RESPONSE, None) == expected
    # use_question=false: the question-less prompt even when a question is given
    assert LLMExtractor(claim_format="triplet", use_question=False).prompt(RESPONSE, QUESTION) == expected


def test_joint_checking_prompt_is_refcheckers():
    template = _refchecker("checker_prompts")["JOINT_CHECKING_PROMPT_Q"]
    # RefChecker's LLMChecker._check(is_joint=True), the loop body for one reference
    claims_text = ""
    for c in TRIPLETS:
        claims_text += f'("{c[0]}", "{c[1]}", "{c[2]}")\n'
    expected = template.replace("[QUESTION]", QUESTION).replace("[REFERENCE]", REFERENCE)
    expected = expected.replace("[CLAIMS]", claims_text.strip())
    assert LLMChecker().prompt(TRIPLETS, REFERENCE, QUESTION) == expected
    assert "### Question:\n" + QUESTION + "\n\n### Reference:\n" + REFERENCE in expected


def test_token_limits_are_ragcheckers():
    ext, chk = LLMExtractor(), LLMChecker()
    assert ext.config.max_tokens == 1000  # RAGChecker extractor_max_new_tokens
    assert chk.config.batch_size == 5  # RAGChecker joint_check_num
    assert chk.config.max_tokens_base + 5 * chk.config.max_tokens_per_claim == 5 * 10 + 100
    from omegaconf import OmegaConf

    conf = CONF / "evaluator"
    assert OmegaConf.load(conf / "extractor" / "llm.yaml").max_tokens == 1000
    c = OmegaConf.load(conf / "checker" / "llm.yaml")
    assert (c.batch_size, c.max_tokens_base, c.max_tokens_per_claim) == (5, 100, 10)


def test_answers_are_read_as_refchecker_reads_them():
    answer = (
        '### KG:\n("Eiffel Tower", "is located in", "Paris")\n'
        "('Eiffel Tower', 'built from', '1887 to 1889')\n"
        '("Eiffel Tower", "is located in", "Paris")\n("subject", "predicate", "object")\n'
    )
    assert refchecker_triplets(answer) == TRIPLETS
    assert parse_claims(answer, "triplet") == TRIPLETS
    assert parse_claims("None", "triplet") == [] and parse_claims("", "triplet") == []
    assert parse_claims("I cannot help with that.", "triplet") is None  # re-asked, never "no claims"
    assert parse_labels("Entailment\nneutral\nContradiction", 3) == ["Entailment", "Neutral", "Contradiction"]
    assert parse_labels("Entailment\nNeutral", 3) is None  # RefChecker would pad with Neutral


@pytest.mark.parametrize("module", ["extractor_prompts", "checker_prompts"])
def test_fixture_header_names_source_and_commit(module):
    head = (FIX / f"{module}.py.txt").read_text().split("---- verbatim from here ----")[0]
    assert re.search(r"github\.com/amazon-science/RefChecker/blob/[0-9a-f]{40}/refchecker/", head)
    assert "Apache License 2.0" in head
