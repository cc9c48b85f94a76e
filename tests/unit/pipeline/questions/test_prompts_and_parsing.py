"""The prompts as shipped (conf/questions/default.yaml) and the parser of what a model sends back:
any text at all gives a draft or None, never an exception."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ragsweep.conf import CONF_DIR
from ragsweep.corpus.sampling import Sample, Window
from ragsweep.pipeline.questions.config import PromptsConfig
from ragsweep.pipeline.questions.prompts import SCHEMA, messages, parse, prompt_id, render, schema_for


def shipped() -> PromptsConfig:
    p = PromptsConfig(**OmegaConf.to_container(OmegaConf.load(CONF_DIR / "questions" / "default.yaml")))
    p.check()
    return p


def test_the_shipped_prompts_fill_in_their_passages_and_keep_the_json_example():
    p = shipped()
    w = Window("a.md", 0, 20, "SQLite is a library.", "§ About")
    v = Window("b.md", 0, 22, "PostgreSQL is a server.", "§ About")
    one = messages(p, Sample("single", (w,)), {"a.md": "About SQLite"})
    assert one[0][0] == "system" and "SQLite is a library." in one[1][1] and '"About SQLite"' in one[1][1]
    assert "Reply with JSON: quotes (one sentence copied exactly" in one[1][1]
    two = messages(p, Sample("comparison", (w, v)), {})
    assert "SQLite is a library." in two[1][1] and "PostgreSQL is a server." in two[1][1] and '"b.md"' in two[1][1]
    assert render('{question} {nothing} {"a": 1}', question="Q?") == 'Q? {nothing} {"a": 1}'  # other braces stay
    assert prompt_id(p).startswith("default@") and prompt_id(p) != prompt_id(PromptsConfig(**{**p.__dict__, "single": p.single + "!"}))
    assert SCHEMA["required"] == ["quotes", "question", "answer"] and list(SCHEMA["properties"])[0] == "quotes"
    assert schema_for("single")["properties"]["quotes"]["minItems"] == 1
    assert schema_for("comparison")["properties"]["quotes"]["maxItems"] == 2 and schema_for("unanswerable") == SCHEMA


def test_a_well_formed_answer_is_read_whatever_surrounds_it():
    obj = {"question": "When does SQLite checkpoint?", "answer": "At 1000 pages.", "quotes": ["It checkpoints at 1000 pages."]}
    for text in (json.dumps(obj), f"```json\n{json.dumps(obj)}\n```", f"Sure! Here it is: {json.dumps(obj)} Hope it helps."):
        d = parse(text)
        assert d is not None and d.question == obj["question"] and d.quotes == obj["quotes"]
    # tolerated shapes: one quote as a string, quotes as objects, an "evidence" key, a number as the answer
    assert parse(json.dumps({**obj, "quotes": "One quote only here."})).quotes == ["One quote only here."]
    assert parse(json.dumps({**obj, "quotes": [{"quote": "Q one two three"}]})).quotes == ["Q one two three"]
    assert parse(json.dumps({"question": "How many pages trigger it?", "answer": 1000, "evidence": []})).answer == "1000"
    assert parse(json.dumps({**obj, "answer": ""}), kind="unanswerable").answer == ""


def test_unusable_answers_are_none():
    bad = ['', 'no json here', '{"question": "Why?"', '[1, 2]', '{"question": "Too short?", "answer": "x", "quotes": []}',
           '{"question": "What is the answer here?", "answer": "", "quotes": []}',  # an answerable kind needs an answer
           '{"question": "What is the answer here?", "answer": ["a"], "quotes": []}',
           '{"question": "What is the answer here?", "answer": "a", "quotes": 7}', None, 42]
    for text in bad:
        assert parse(text) is None, text


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1")),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                              lambda c: st.lists(c) | st.dictionaries(st.sampled_from(["question", "answer", "quotes", "x"]), c),
                              max_leaves=10).map(json.dumps)))
def test_the_parser_never_raises(text):
    d = parse(text)
    assert d is None or (isinstance(d.question, str) and isinstance(d.answer, str) and all(isinstance(q, str) for q in d.quotes))
