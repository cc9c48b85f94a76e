"""The RAGBench TRACe annotator: the labelling prompt of Friel et al. 2024 (appendix 7.4, quoted
verbatim) through the judge, and the parsing of its JSON answer."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from ragsweep.judge.llm_judge import JudgeItem, parse_json_object

#: Bumped whenever the annotator prompt changes (part of the cache keys).
ANNOTATOR_PROMPT_VERSION = 1


#: RAGBench (Friel et al. 2024), appendix 7.4 "GPT Labeling Prompt", verbatim; the JSON schema
#: listing, split across two code blocks by the paper's typesetting, is joined back together.
#: Placeholders: {documents}, {question}, {answer} (filled by str.replace, so JSON braces stay).
ANNOTATOR_PROMPT = """\
I asked someone to answer a question based on one or more documents. Your task is to review their response and assess whether or not each sentence in that response is supported by text in the documents. And if so, which sentences in the documents provide that support. You will also tell me which of the documents contain useful information for answering the question, and which of the documents the answer was sourced from.

Here are the documents, each of which is split into sentences. Alongside each sentence is associated key, such as '0a.' or '0b.' that you can use to refer to it:

'''
{documents}
'''

The question was:

'''
{question}
'''

Here is their response, split into sentences. Alongside each sentence is associated key, such as 'a.' or 'b.' that you can use to refer to it. Note that these keys are unique to the response, and are not related to the keys in the documents:

'''
{answer}
'''

You must respond with a JSON object matching this schema:

'''
{
  "relevance_explanation": string,
  "all_relevant_sentence_keys": [string],
  "overall_supported_explanation": string,
  "overall_supported": boolean,
  "sentence_support_information": [
    {
      "response_sentence_key": string,
      "explanation": string,
      "supporting_sentence_keys": [string],
      "fully_supported": boolean
    },
  ],
  "all_utilized_sentence_keys": [string]
}
'''

The `relevance_explanation` field is a string explaining which documents contain useful information for answering the question. Provide a step-by-step breakdown of information provided in the documents and how it is useful for answering the question.

The `all_relevant_sentence_keys` field is a list of all document sentences keys (e.g. '0a') that are relevant to the question. Include every sentence that is useful and relevant to the question, even if it was not used in the response, or if only parts of the sentence are useful. Ignore the provided response when making this judgement and base your judgement solely on the provided documents and question. Omit sentences that, if removed from the document, would not impact someone's ability to answer the question.

The `overall_supported_explanation` field is a string explaining why the response *as a whole* is or is not supported by the documents. In this field, provide a step-by-step breakdown of the claims made in the response and the support (or lack thereof) for those claims in the documents. Begin by assessing each claim separately, one by one; don't make any remarks about the response as a whole until you have assessed all the claims in isolation.

The `overall_supported` field is a boolean indicating whether the response as a whole is supported by the documents. This value should reflect the conclusion you drew at the end of your step-by-step breakdown in `overall_supported_explanation`.

In the `sentence_support_information` field, provide information about the support *for each sentence* in the response.

The `sentence_support_information` field is a list of objects, one for each sentence in the response. Each object MUST have the following fields:
- `response_sentence_key`: a string identifying the sentence in the response. This key is the same as the one used in the response above.
- `explanation`: a string explaining why the sentence is or is not supported by the documents.
- `supporting_sentence_keys`: keys (e.g. '0a') of sentences from the documents that support the response sentence. If the sentence is not supported, this list MUST be empty. If the sentence is supported, this list MUST contain one or more keys. In special cases where the sentence is supported, but not by any specific sentence, you can use the string "supported_without_sentence" to indicate that the sentence is generally supported by the documents. Consider cases where the sentence is expressing inability to answer the question due to lack of relevant information in the provided context as "supported_without_sentence". In cases where the sentence is making a general statement (e.g. outlining the steps to produce an answer, or summarizing previously stated sentences, or a transition sentence), use the string "general". In cases where the sentence is correctly stating a well-known fact, like a mathematical formula, use the string "well_known_fact". In cases where the sentence is performing numerical reasoning (e.g. addition, multiplication), use the string "numerical_reasoning".
- `fully_supported`: a boolean indicating whether the sentence is fully supported by the documents.
  - This value should reflect the conclusion you drew at the end of your step-by-step breakdown in explanation.
  - If `supporting_sentence_keys` is an empty list, then `fully_supported` must be false.
  - Otherwise, use `fully_supported` to clarify whether everything in the response sentence is fully supported by the document text indicated in `supporting_sentence_keys` (`fully_supported = true`), or whether the sentence is only partially or incompletely supported by that document text (`fully_supported = false`).

The `all_utilized_sentence_keys` field is a list of all sentences keys (e.g. '0a') that were used to construct the answer. Include every sentence that either directly supported the answer, or was implicitly used to construct the answer, even if it was not used in its entirety. Omit sentences that were not used, and could have been removed from the documents without affecting the answer.

You must respond with a valid JSON string. Use escapes for quotes, e.g. `\\"`, and newlines, e.g. `\\n`. Do not write anything before or after the JSON string. Do not wrap the JSON string in backticks like ``` or ```json.

As a reminder: your task is to review the response and assess which documents contain useful information pertaining to the question, and how each sentence in the response is supported by the text in the documents."""

ANNOTATOR_SCHEMA: dict[str, Any] = {
    "title": "ragbench_annotation",
    "type": "object",
    "properties": {
        "relevance_explanation": {"type": "string"},
        "all_relevant_sentence_keys": {"type": "array", "items": {"type": "string"}},
        "overall_supported_explanation": {"type": "string"},
        "overall_supported": {"type": "boolean"},
        "sentence_support_information": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "response_sentence_key": {"type": "string"},
                    "explanation": {"type": "string"},
                    "supporting_sentence_keys": {"type": "array", "items": {"type": "string"}},
                    "fully_supported": {"type": "boolean"},
                },
                "required": ["response_sentence_key", "supporting_sentence_keys", "fully_supported"],
            },
        },
        "all_utilized_sentence_keys": {"type": "array", "items": {"type": "string"}},
    },
    "required": [
        "all_relevant_sentence_keys",
        "overall_supported",
        "sentence_support_information",
        "all_utilized_sentence_keys",
    ],
}


def format_keyed(sentences: Sequence[Sequence[str]]) -> str:
    """``[("0a", "First."), ...]`` -> ``"0a. First.\\n..."`` (RAGBench's ``key. sentence``)."""
    return "\n".join(f"{key}. {text}" for key, text in sentences)


def annotator_prompt(documents_sentences: Sequence[Sequence[Sequence[str]]], question: str,
                     response_sentences: Sequence[Sequence[str]]) -> str:
    values = {
        "documents": "\n\n".join(format_keyed(doc) for doc in documents_sentences),
        "question": question,
        "answer": format_keyed(response_sentences),
    }
    # one pass, so a placeholder-like string inside a document is left alone
    return re.sub(r"\{(documents|question|answer)\}", lambda m: values[m.group(1)], ANNOTATOR_PROMPT)


def _keys(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    return [str(k).strip().rstrip(".") for k in value if isinstance(k, (str, int)) and str(k).strip()]


def parse_annotation(text: str | None) -> dict[str, Any] | None:
    """The RAGBench annotation fields; None when the answer is not such an object.

    Returns ``{"all_relevant_sentence_keys", "all_utilized_sentence_keys",
    "unsupported_response_sentence_keys", "sentence_support_information", "overall_supported"}``.
    Like RAGBench's post-processing (appendix 7.5), the misspelling ``supported_sentence_keys``
    is accepted; a response sentence is unsupported when its ``fully_supported`` is false.
    """
    obj = parse_json_object(text)
    if obj is None:
        return None
    rel = _keys(obj.get("all_relevant_sentence_keys"))
    util = _keys(obj.get("all_utilized_sentence_keys"))
    info = obj.get("sentence_support_information")
    if rel is None or util is None or not isinstance(info, list):
        return None
    support, unsupported = [], []
    for entry in info:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("response_sentence_key"), str):
            return None
        key = entry["response_sentence_key"].strip().rstrip(".")
        keys = entry.get("supporting_sentence_keys", entry.get("supported_sentence_keys", []))
        fully = entry.get("fully_supported")
        if not isinstance(fully, bool):
            return None
        support.append({"response_sentence_key": key, "supporting_sentence_keys": _keys(keys) or [],
                        "fully_supported": fully})
        if not fully:
            unsupported.append(key)
    overall = obj.get("overall_supported")
    return {
        "all_relevant_sentence_keys": rel,
        "all_utilized_sentence_keys": util,
        "unsupported_response_sentence_keys": unsupported,
        "sentence_support_information": support,
        "overall_supported": overall if isinstance(overall, bool) else None,
    }


class TraceAnnotator:
    """TRACe sentence labels from the judge with the RAGBench annotation prompt."""

    def __init__(self, judge: Any, max_tokens: int | None = None) -> None:
        self.judge = judge
        self.max_tokens = max_tokens

    @property
    def cache_id(self) -> dict[str, Any]:
        return {"annotator": "ragbench-7.4", "prompt_version": ANNOTATOR_PROMPT_VERSION,
                "max_tokens": self._max_tokens, "judge": self.judge.identity}

    @property
    def _max_tokens(self) -> int:
        return int(self.max_tokens or self.judge.config.max_tokens)

    def annotate_many(self, examples: Sequence[tuple[Any, str, Any]]) -> list[dict | None]:
        """``examples``: (documents_sentences, question, response_sentences) triples."""
        items = [
            JudgeItem(
                messages=[("user", annotator_prompt(docs, q, resp))],
                schema=ANNOTATOR_SCHEMA,
                parse=parse_annotation,
                max_tokens=self._max_tokens,
                owner=q,
            )
            for docs, q, resp in examples
        ]
        return self.judge.ask(items, desc="TRACe annotation")


__all__ = ["ANNOTATOR_PROMPT", "TraceAnnotator", "annotator_prompt", "parse_annotation"]
