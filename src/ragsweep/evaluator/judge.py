"""The LLM judge: one OpenAI-compatible model for claim extraction, entailment checking, the
RAGBench TRACe annotator and the RAGAS prompts.

(Over 400 lines, not yet split: the Judge client, the LLM checker and the TRACe annotator
share its parsing helpers and retry loop; splitting them into llm_checker.py / annotator.py is
the next step of issue #12.)

:class:`Judge` owns the judge's own server and model config (``evaluator.judge``), separate from
the generator's: ``server`` is a Hydra spec (``_target_: ragsweep.generator.server.LlamaCppServer``
/ ``VLLMServer`` / ``ExternalServer``) or an already built server, or ``base_url`` + ``model``
for an external endpoint. A managed server is started on the first request that the cache does
not answer (a fully cached rerun starts nothing) and stopped by :meth:`Judge.close`.

The judge's :class:`~ragsweep.generator.client.ChatClient` has NO cache: an answer is worth
keeping only after it parsed, so the callers cache parsed results (claims, labels,
annotations) themselves and a malformed answer is never stored. :meth:`Judge.ask` sends every
item, parses each answer with the item's parser, and re-asks the ones that did not parse with a
varied request (``seed + attempt``, temperature ``retry_temperature`` when the configured one is
0, and a reminder appended to the prompt) up to ``parse_retries`` times. An answer that still
does not parse counts in ``stats["parse_failures"]``, a request that failed at the HTTP level
(after the client's own retries) in ``stats["failures"]``; either gives ``None`` - never a guessed
label.

:class:`LLMChecker` checks several claims against one reference per call with JSON-schema output
``{"labels": [...]}`` (exactly one label per claim). :class:`TraceAnnotator` sends the RAGBench
labelling prompt (Friel et al. 2024, appendix 7.4, quoted verbatim) and parses its JSON.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ragsweep.evaluator.labels import LABELS, normalize_label

log = logging.getLogger(__name__)

#: Bumped whenever a judge prompt of this module changes (part of the cache keys).
CHECK_PROMPT_VERSION = 1
ANNOTATOR_PROMPT_VERSION = 1
RETRY_REMINDER = (
    "\n\n(Your previous answer could not be read. Answer with the JSON object only, exactly as "
    "specified, and nothing else.)"
)


# --------------------------------------------------------------------------------------------
# parsing helpers
# --------------------------------------------------------------------------------------------
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def parse_json_object(text: str | None) -> dict | None:
    """The JSON object in a model answer (code fences and text around the object tolerated);
    None when there is none."""
    if not isinstance(text, str) or not text.strip():
        return None
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group(1)
    try:
        obj = json.loads(t)
    except json.JSONDecodeError:
        start, end = t.find("{"), t.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            obj = json.loads(t[start : end + 1])
        except json.JSONDecodeError:
            return None
    return obj if isinstance(obj, dict) else None


def _plain(value: Any) -> Any:
    """DictConfig/ListConfig (possibly holding objects Hydra instantiated) -> dict/list."""
    try:
        from omegaconf import DictConfig, ListConfig
    except ImportError:  # pragma: no cover
        return value
    if isinstance(value, DictConfig):
        return {str(k): _plain(value[k]) for k in value}
    if isinstance(value, ListConfig):
        return [_plain(v) for v in value]
    return value


def _bad(name: str, why: str, value: Any) -> ValueError:
    return ValueError(f"evaluator.judge.{name} {why}, got {value!r}")


# --------------------------------------------------------------------------------------------
# the judge
# --------------------------------------------------------------------------------------------
@dataclass
class JudgeItem:
    """One judge question: chat messages, the JSON schema of the answer, a parser returning the
    parsed value or None when the answer is unusable, and the completion budget."""

    messages: Sequence[tuple[str, str]]
    schema: dict | None
    parse: Callable[[str], Any]
    max_tokens: int = 512


class Judge:
    """The judge model behind an OpenAI-compatible server (see the module doc)."""

    @dataclass
    class Config:
        server: Any = None  # Hydra spec with _target_, or a server object; else base_url + model
        base_url: Any = None  # str | None: an external OpenAI-compatible endpoint
        model: Any = None  # str | None: model name sent in requests (default: the server's)
        api_key_env: Any = "OPENAI_API_KEY"  # str | None, read only with base_url (if set)
        temperature: float = 0.0
        max_tokens: int = 1024  # for the TRACe annotator; extraction/checking set their own
        seed: Any = 0  # int | None
        concurrency: int = 2
        timeout_s: float = 120.0
        max_retries: int = 3  # HTTP-level retries (429/5xx/timeouts), in the ChatClient
        backoff_s: float = 1.0
        max_backoff_s: float = 30.0
        parse_retries: int = 2  # re-asks of an answer that did not parse
        retry_temperature: float = 0.3  # temperature of re-asks when ``temperature`` is 0
        structured_output: bool = True

        def __post_init__(self) -> None:
            self.server = _plain(self.server)
            if self.server is None and not self.base_url:
                raise ValueError(
                    "evaluator.judge.server must be a server spec with a _target_ "
                    "(e.g. ragsweep.generator.server.LlamaCppServer), or give evaluator.judge.base_url"
                )
            if isinstance(self.server, Mapping) and "_target_" not in self.server:
                raise _bad("server", "needs a _target_", self.server)
            for name in ("base_url", "model", "api_key_env"):
                v = getattr(self, name)
                if v is not None and not isinstance(v, str):
                    raise _bad(name, "must be a string or null", v)
            for name in ("temperature", "retry_temperature"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise _bad(name, "must be a number >= 0", v)
            for name, low in (("max_tokens", 1), ("concurrency", 1), ("max_retries", 0), ("parse_retries", 0)):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, int) or v < low:
                    raise _bad(name, f"must be an integer >= {low}", v)
            if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
                raise _bad("seed", "must be an integer or null", self.seed)
            for name in ("timeout_s", "backoff_s", "max_backoff_s"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                    raise _bad(name, "must be a number > 0", v)
            if not isinstance(self.structured_output, bool):
                raise _bad("structured_output", "must be true or false", self.structured_output)

    def __init__(self, **kwargs: Any) -> None:
        from ragsweep.retriever.base import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.judge")
        self._server: Any = None
        self._client: Any = None
        self._owns_server = False
        self._stats: Counter[str] = Counter()

    @classmethod
    def from_spec(cls, spec: Any) -> "Judge | None":
        """A Judge from ``evaluator.judge`` (None, a mapping/DictConfig, or a Judge)."""
        if spec is None or isinstance(spec, Judge):
            return spec
        spec = _plain(spec)
        if not isinstance(spec, Mapping):
            raise ValueError(f"evaluator.judge must be a mapping or null, got {type(spec).__name__}")
        return cls(**dict(spec))

    def __repr__(self) -> str:
        return f"Judge(server={self.server!r}, model={self.model_name!r})"

    # -- server and identity ----------------------------------------------------------------------
    @property
    def server(self) -> Any:
        if self._server is None:
            spec = self.config.server
            if spec is None:
                from ragsweep.generator.server import ExternalServer

                env = self.config.api_key_env
                # a key only when its variable is set: a local server needs none, and a server
                # that needs one answers 401, which is counted as a judge failure
                env = env if env and os.environ.get(env) else None
                self._server = ExternalServer(
                    base_url=self.config.base_url, model=self.config.model or "default", api_key_env=env
                )
            elif isinstance(spec, Mapping):
                from hydra.utils import instantiate
                from omegaconf import OmegaConf

                self._server = instantiate(OmegaConf.create(dict(spec)), _convert_="all")
            else:
                self._server = spec
        return self._server

    @property
    def model_name(self) -> str:
        return self.config.model or getattr(self.server, "model_name", None) or "default"

    @property
    def identity(self) -> dict[str, Any]:
        """What names this judge in cache keys: the model's identity and the sampling settings
        (not the port, concurrency or timeouts)."""
        srv = self.server
        return {
            "model": getattr(srv, "cache_identity", None) or {"model": self.model_name},
            "model_name": self.model_name,
            "temperature": float(self.config.temperature),
            "seed": self.config.seed,
            "structured_output": self.config.structured_output,
        }

    @property
    def started(self) -> bool:
        return self._client is not None

    def start(self) -> "Judge":
        """Start the server (a managed one only if it is not running yet) and build the client."""
        if self._client is not None:
            return self
        from ragsweep.generator.client import ChatClient

        srv = self.server
        if hasattr(srv, "start") and not getattr(srv, "running", False):
            log.info("starting the judge server %r", srv)
            srv.start()
            self._owns_server = True
        elif hasattr(srv, "start") and getattr(srv, "kind", "") == "external":
            srv.start()  # checks the API key now rather than at the first request
        cfg = self.config
        self._client = ChatClient(
            base_url=srv.base_url,
            model=self.model_name,
            api_key=getattr(srv, "api_key", None),
            concurrency=cfg.concurrency,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            backoff_s=cfg.backoff_s,
            max_backoff_s=cfg.max_backoff_s,
            cache=None,  # never cache an unparsed answer: parsed results are cached by the callers
            cache_namespace="judge",
            structured_output=cfg.structured_output,
            structured_mode=getattr(srv, "structured_mode", "json_schema"),
            model_id=self.identity,
        )
        return self

    def close(self) -> None:
        """Stop the server if this judge started it."""
        client, self._client = self._client, None
        if client is not None:
            for k in ("calls", "retries", "prompt_tokens", "completion_tokens", "structured_fallbacks"):
                self._stats[k] += client.stats.get(k, 0)
            client.close()
        if self._owns_server and self._server is not None:
            self._owns_server = False
            log.info("stopping the judge server %r", self._server)
            self._server.stop()

    def __enter__(self) -> "Judge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def stats(self) -> Counter:
        """``requests`` (chat requests, re-asks included), ``calls`` (HTTP calls, transport
        retries included), ``failures``, ``parse_failures``, ``parse_retries``,
        ``prompt_tokens``, ``completion_tokens``."""
        out = Counter(self._stats)
        if self._client is not None:
            for k in ("calls", "retries", "prompt_tokens", "completion_tokens", "structured_fallbacks"):
                out[k] += self._client.stats.get(k, 0)
        return out

    # -- asking -----------------------------------------------------------------------------------
    def _request(self, item: JudgeItem, attempt: int) -> Any:
        from ragsweep.generator.client import ChatRequest

        cfg = self.config
        messages = [tuple(m) for m in item.messages]
        temperature = float(cfg.temperature)
        seed = cfg.seed
        if attempt:
            role, content = messages[-1]
            messages[-1] = (role, content + RETRY_REMINDER)
            seed = (seed or 0) + attempt
            if temperature == 0:
                temperature = float(cfg.retry_temperature)
        return ChatRequest(
            messages=tuple(messages),
            temperature=temperature,
            max_tokens=int(item.max_tokens),
            seed=seed,
            response_format=item.schema,
        )

    def ask(self, items: Sequence[JudgeItem], desc: str = "judging") -> list[Any]:
        """The parsed answer of every item, ``None`` where the request failed or the answer did not
        parse after ``parse_retries`` re-asks (both counted)."""
        items = list(items)
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        self.start()
        pending = list(range(len(items)))
        for attempt in range(self.config.parse_retries + 1):
            if not pending:
                break
            if attempt:
                self._stats["parse_retries"] += len(pending)
            outs = self._client.chat_many([self._request(items[i], attempt) for i in pending], desc=desc)
            self._stats["requests"] += len(pending)
            retry = []
            for i, out in zip(pending, outs):
                if not out.ok:
                    self._stats["failures"] += 1
                    log.warning("judge request failed: %s", out.error)
                    continue
                try:
                    parsed = items[i].parse(out.text)
                except Exception:  # noqa: BLE001 - a parser bug must not pass as a label
                    log.exception("judge answer parser raised")
                    parsed = None
                if parsed is None:
                    retry.append(i)
                else:
                    results[i] = parsed
            pending = retry
        if pending:
            self._stats["parse_failures"] += len(pending)
            log.warning(
                "%d judge answer(s) could not be parsed after %d re-ask(s); their results are "
                "missing (metrics NaN)", len(pending), self.config.parse_retries,
            )
        return results


# --------------------------------------------------------------------------------------------
# the LLM checker
# --------------------------------------------------------------------------------------------
CHECK_PROMPT = """\
Decide, for each claim below, whether the reference text entails it.
- "Entailment": the reference supports the claim.
- "Contradiction": the reference says that the claim is false.
- "Neutral": the reference neither supports nor contradicts the claim (it is not mentioned, or \
only partly).
Judge from the reference only, not from what you know.

reference:
\"\"\"
{reference}
\"\"\"

claims:
{claims}

Answer with a JSON object {{"labels": [...]}} holding exactly {n} labels, one per claim in the \
order given, each "Entailment", "Neutral" or "Contradiction", and nothing else."""


def labels_schema(n: int) -> dict[str, Any]:
    return {
        "title": "labels",
        "type": "object",
        "properties": {
            "labels": {
                "type": "array",
                "items": {"type": "string", "enum": list(LABELS)},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["labels"],
    }


def parse_labels(text: str | None, n: int) -> list[str] | None:
    """Exactly ``n`` labels from ``{"labels": [...]}``; None otherwise (wrong count, unknown label)."""
    obj = parse_json_object(text)
    if obj is None or not isinstance(obj.get("labels"), list) or len(obj["labels"]) != n:
        return None
    labels = [normalize_label(v) for v in obj["labels"]]
    return None if any(lab is None for lab in labels) else labels


class LLMChecker:
    """Entailment labels from the judge, ``batch_size`` claims against one reference per call."""

    @dataclass
    class Config:
        batch_size: int = 8  # claims per call (all against the same reference)
        max_tokens_per_claim: int = 12  # completion budget: 24 + this x claims

        def __post_init__(self) -> None:
            for name in ("batch_size", "max_tokens_per_claim"):
                v = getattr(self, name)
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise ValueError(f"evaluator.checker.{name} must be an integer >= 1, got {v!r}")

    name = "llm"

    def __init__(self, judge: Any = None, **kwargs: Any) -> None:
        from ragsweep.retriever.base import build_config

        self.config = build_config(self.Config, kwargs, "evaluator.checker")
        self.judge = judge
        self.stats: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"LLMChecker({self.config}, judge={self.judge!r})"

    @property
    def cache_id(self) -> dict[str, Any]:
        if self.judge is None:
            raise RuntimeError("LLMChecker needs a judge (evaluator.judge)")
        return {
            "checker": "llm",
            "prompt_version": CHECK_PROMPT_VERSION,
            "batch_size": self.config.batch_size,
            "judge": self.judge.identity,
        }

    def prompt(self, claims: Sequence[str], reference: str) -> str:
        numbered = "\n".join(f"{i}. {c}" for i, c in enumerate(claims, 1))
        return CHECK_PROMPT.format(reference=reference, claims=numbered, n=len(claims))

    def check(self, claims: Sequence[str], reference: str) -> list[str | None]:
        return self.check_pairs([(c, reference) for c in claims])

    def check_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[str | None]:
        """A label per (claim, reference) pair, None where the judge failed."""
        if self.judge is None:
            raise RuntimeError("LLMChecker needs a judge (evaluator.judge)")
        pairs = [(str(c), str(r)) for c, r in pairs]
        by_ref: dict[str, list[int]] = {}
        for i, (_, ref) in enumerate(pairs):
            by_ref.setdefault(ref, []).append(i)
        items, groups = [], []
        bs = self.config.batch_size
        for ref, idx in by_ref.items():
            for b in range(0, len(idx), bs):
                group = idx[b : b + bs]
                claims = [pairs[i][0] for i in group]
                n = len(claims)
                items.append(
                    JudgeItem(
                        messages=[("user", self.prompt(claims, ref))],
                        schema=labels_schema(n),
                        parse=lambda t, n=n: parse_labels(t, n),
                        max_tokens=24 + self.config.max_tokens_per_claim * n,
                    )
                )
                groups.append(group)
        self.stats["pairs"] += len(pairs)
        self.stats["calls"] += len(items)
        out: list[str | None] = [None] * len(pairs)
        for group, labels in zip(groups, self.judge.ask(items, desc="checking claims")):
            if labels is not None:
                for i, lab in zip(group, labels):
                    out[i] = lab
        return out


# --------------------------------------------------------------------------------------------
# the RAGBench TRACe annotator
# --------------------------------------------------------------------------------------------
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
            )
            for docs, q, resp in examples
        ]
        return self.judge.ask(items, desc="TRACe annotation")


__all__ = [
    "ANNOTATOR_PROMPT",
    "Judge",
    "JudgeItem",
    "LABELS",
    "LLMChecker",
    "TraceAnnotator",
    "annotator_prompt",
    "labels_schema",
    "normalize_label",
    "parse_annotation",
    "parse_json_object",
    "parse_labels",
]
