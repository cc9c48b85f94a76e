"""Dataset loaders: built-ins (ClapNQ, RAGBench-paper QA), a user's own files, and the helpers
every loader shares (:mod:`ragsweep.corpus.dataset.benchmark` and :mod:`ragsweep.corpus.dataset.longdoc` build on
them; :mod:`ragsweep.corpus.dataset` re-exports every loader).

Every loader is a small class with a ``Config`` dataclass (its YAML schema) and ``load()``
returning a :class:`ragsweep.types.Dataset`. Relevance is expressed as character spans into the
documents so that it survives any chunking.
"""

from __future__ import annotations

import json
import logging
from collections import ChainMap
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from ragsweep.corpus.dataset.doctable import LazyDocuments, unique_ids
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document, Query, Span

log = logging.getLogger(__name__)

BUILTIN = resources.files("ragsweep") / "corpus" / "dataset" / "builtin"


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise ValueError(f"dataset.limit must be a positive number of questions or null, got {limit}")


def _require_setting(value: Any, field: str, dataset: str, example: str) -> None:
    """A loader's Config field that has no default (a path the user gives)."""
    if not value:
        raise ValueError(f"dataset.{field} is required with dataset={dataset}: add dataset.{field}={example}")


class _Loader:
    """What every loader shares: ``Config(**kwargs)`` built on construction (``Config`` is the
    loader's own dataclass, its YAML schema)."""

    Config: type

    def __init__(self, **kwargs: Any) -> None:
        self.config = self.Config(**kwargs)


@dataclass
class _BuiltinConfig:
    """The whole schema of a built-in dataset: how many questions, and its name."""

    limit: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        _check_limit(self.limit)


@dataclass
class _PathConfig(_BuiltinConfig):
    """The schema of a dataset read from a user's ``path``: the path is required; a subclass
    sets ``name``'s default and ``PATH_EXAMPLE`` (what the error shows a path should look like)."""

    path: str | None = None
    PATH_EXAMPLE: ClassVar[str] = "PATH"

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_setting(self.path, "path", self.name, self.PATH_EXAMPLE)


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: text is not UTF-8 (byte offset {exc.start}); re-encode the file as UTF-8") from None


def _open_binary(path: Path) -> Any:
    return open(path, "rb")


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_number, object)`` for each non-blank line, read as a stream (a 1.5 GB corpus is
    never held whole); a bad line is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    offset = 0
    with _open_binary(path) as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{n}: text is not UTF-8 (byte offset {offset + exc.start}); "
                                "re-encode the file as UTF-8") from None
            offset += len(raw)
            if line.strip():
                yield n, _json_line(line, path, n)


def _json_line(line: str, path: Path, n: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{n}: not valid JSON ({exc.msg} at column {exc.colno}); one JSON object per line is expected") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path}:{n}: expected a JSON object, got {type(obj).__name__}")
    return obj


def read_json(path: str | Path) -> Any:
    path = Path(path)
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def _require(obj: dict, field: str, where: str) -> Any:
    value = obj.get(field)
    if value is None:
        raise DataError(f"{where}: missing required field '{field}'")
    return value


def finish(name: str, documents: Sequence[Document], queries: list[Query], limit: int | None, source: str) -> Dataset:
    """Common checks: empty documents skipped and counted, duplicate ids and an empty corpus rejected.

    A :class:`~ragsweep.corpus.dataset.doctable.LazyDocuments` (a corpus unchanged since the run that
    checked it) is not checked again: its counts come from its table."""
    if isinstance(documents, LazyDocuments):
        kept, empty = documents, documents.empty_skipped
    else:
        kept, empty = _kept(documents, source)
    if empty:
        log.warning("%s: skipped %d empty document(s)", source, empty)
    if not kept:
        raise DataError(f"{source}: the corpus has zero (non-empty) documents; nothing to retrieve from")
    qseen: set[str] = set()
    for q in queries:
        if q.query_id in qseen:
            raise DataError(f"{source}: duplicate query_id '{q.query_id}'; query ids must be unique")
        qseen.add(q.query_id)
    if not queries:
        raise DataError(f"{source}: zero questions; nothing to run")
    total = len(queries)
    if limit is not None:
        queries = queries[:limit]
    return Dataset(
        name=name,
        documents=kept,
        queries=queries,
        has_relevance=any(q.relevant for q in queries),
        has_answers=any(q.gt_answer for q in queries),
        stats={"documents": len(kept), "empty_documents_skipped": empty, "queries": len(queries), "queries_total": total},
    )


def _kept(documents: Sequence[Document], source: str) -> tuple[list[Document], int]:
    """The non-empty documents and how many were empty; a duplicate id is an error."""
    kept: list[Document] = []
    empty = 0
    for d in unique_ids(documents, source):
        if not d.text.strip():
            empty += 1
            continue
        kept.append(d)
    return kept, empty


def _require_documents(documents: list[Document], source: str) -> None:
    """An empty corpus is named as such before any query is checked against it."""
    if not any(d.text.strip() for d in documents):
        raise DataError(f"{source}: the corpus has zero (non-empty) documents; nothing to retrieve from")


def _unique(seen: dict[str, int], value: str, field: str, path: Path, n: int) -> None:
    """A duplicate id is an error naming both lines of the file."""
    if value in seen:
        raise DataError(f"{path}:{n}: duplicate {field} '{value}' (first on line {seen[value]}); {field.split('_')[0]} ids must be unique")
    seen[value] = n


def _whole_doc_spans(doc_ids: list[str], lengths: Mapping[str, int], where: str) -> tuple[Span, ...]:
    """Each relevant document as a whole (``lengths``: doc_id -> its text's length)."""
    spans = []
    for did in doc_ids:
        did = str(did)
        if did not in lengths:
            raise DataError(f"{where}: relevant document '{did}' is not in the corpus")
        spans.append(Span(did, 0, lengths[did]))
    return tuple(spans)


def _lengths(documents: Sequence[Document]) -> Mapping[str, int]:
    """doc_id -> text length, of every document the file holds (a cold run's blank ones too: a
    relevant document may be blank, and only the cold run decides that)."""
    if isinstance(documents, LazyDocuments):
        return ChainMap(documents.lengths, documents.blank_lengths) if documents.blank_lengths else documents.lengths
    return {d.doc_id: len(d.text) for d in documents}


class ClapNQ(_Loader):
    """ClapNQ dev (primeqa/clapnq, Apache-2.0): 300 answerable questions over 600 passages.

    Corpus = the 600 passages (answerable and unanswerable); queries = the 300 answerable
    questions; gt_answer = the human long-form answer; relevance = the spans of the sentences the
    annotators selected inside the passage (union over annotators; the whole gold passage where no
    sentence was selected).
    """

    @dataclass
    class Config(_BuiltinConfig):
        name: str = "clapnq"

    def load(self) -> Dataset:
        root = BUILTIN / "clapnq"
        documents: list[Document] = []
        queries: list[Query] = []
        for fname, answerable in (("clapnq_dev_answerable.jsonl", True), ("clapnq_dev_unanswerable.jsonl", False)):
            path = Path(str(root / fname))
            for n, rec in read_jsonl(path):
                passage = rec["passages"][0]
                doc = Document(doc_id=str(rec["id"]), text=passage["text"], title=passage.get("title"))
                documents.append(doc)
                if not answerable:
                    continue
                answer = next((o["answer"] for o in rec["output"] if o.get("answer")), None)
                spans: list[Span] = []
                for out in rec["output"]:
                    for sent in out.get("selected_sentences", []):
                        start = doc.text.find(sent)
                        if start < 0:
                            raise DataError(f"{path}:{n}: selected sentence not found in its passage")
                        span = Span(doc.doc_id, start, start + len(sent))
                        if span not in spans:
                            spans.append(span)
                if not spans:  # no sentence selected: the gold passage as a whole is the relevance
                    spans.append(Span(doc.doc_id, 0, len(doc.text.rstrip())))
                queries.append(Query(str(rec["id"]), rec["input"], answer, tuple(sorted(spans, key=lambda s: s.start))))
        return finish(self.config.name, documents, queries, self.config.limit, "clapnq")


class RagbenchPaperQA(_Loader):
    """400 questions over 197 overlapping chunks of the RAGBench paper; relevance = the whole
    relevant entry; no reference answers."""

    @dataclass
    class Config(_BuiltinConfig):
        name: str = "ragbench_paper_qa"

    def load(self) -> Dataset:
        path = Path(str(BUILTIN / "ragbench_paper_qa" / "ragbench_paper_qa.json"))
        data = read_json(path)
        documents = [Document(str(k), v) for k, v in data["corpus"].items()]
        docs = _lengths(documents)
        queries = [
            Query(str(qid), text, None, _whole_doc_spans(data["relevant_contexts"].get(qid, []), docs, f"{path} question {qid}"))
            for qid, text in data["questions"].items()
        ]
        return finish(self.config.name, documents, queries, self.config.limit, str(path))


class RagcheckerDataset(_Loader):
    """A RAGChecker input file: ``{"results": [{query_id, query, gt_answer, retrieved_context}]}``.

    Every retrieved context becomes a corpus document (same ``doc_id`` and text; a ``doc_id``
    reused with a different text gets a ``#n`` suffix); the questions are re-answered by the
    configured RAG system.
    """

    @dataclass
    class Config(_PathConfig):
        name: str = "ragchecker"
        PATH_EXAMPLE: ClassVar[str] = "FILE.json"

    def load(self) -> Dataset:
        path = Path(self.config.path)
        data = read_json(path)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise DataError(f"{path}: expected a JSON object with a 'results' list (RAGChecker input format)")
        by_text: dict[str, str] = {}
        documents: list[Document] = []
        used: set[str] = set()
        queries = []
        for i, r in enumerate(results):
            where = f"{path}: results[{i}]"
            if not isinstance(r, dict):
                raise DataError(f"{where}: expected an object")
            for j, ctx in enumerate(r.get("retrieved_context") or []):
                text = _require(ctx, "text", f"{where}.retrieved_context[{j}]")
                if text in by_text:
                    continue
                did = str(ctx.get("doc_id") or f"ctx{len(documents)}")
                base, n = did, 1
                while did in used:
                    did, n = f"{base}#{n}", n + 1
                used.add(did)
                by_text[text] = did
                documents.append(Document(did, text))
            queries.append(Query(str(r.get("query_id", i)), str(_require(r, "query", where)), r.get("gt_answer") or None))
        return finish(self.config.name, documents, queries, self.config.limit, str(path))

