"""RAGChecker's processed benchmark format (amazon-science/RAGChecker, ``data/benchmark/``).

Its processing scripts (``process_clapnq.py`` and friends) write, per domain, a folder
``processed_data/<domain>/`` with

- ``corpus.jsonl``: one document a line, ``{"doc_id", "title"?, "text"}`` (for ClapNQ the full
  original Wikipedia documents, ``document_plaintext``, of ClapNQ's dev and train splits);
- ``<domain>_queries.json``: ``{"input_data": [{"query_id", "query", "gt_answer",
  "gt_context"?}]}`` (LoTTE's is a bare list), where ``gt_context`` is a list of gold passages
  ``{"title", "text"}`` (ClapNQ) cut from a corpus document.

Each ``gt_context`` passage is located inside its document as a character span (see
:mod:`ragsweep.corpus.dataset.locate`: exact, whitespace-normalised, word-normalised, then fuzzy), so
relevance survives any chunking. Candidate documents: the passage's ``doc_id`` when it has one,
else the documents with its ``title``, else every document containing one of a few of its
phrases. Passages that cannot be located are counted and warned about (the question keeps its
other spans; a question with none has no relevance and is left out of the retrieval metrics).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ragsweep.corpus.dataset.loaders import _Loader, _PathConfig, _require, _unique, finish, read_json, read_jsonl
from ragsweep.corpus.dataset.locate import METHODS, DocumentIndex, locate, probes
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document, Query, Span

log = logging.getLogger(__name__)


def find_queries_file(root: Path) -> Path:
    found = sorted(root.glob("*queries.json"))
    if len(found) != 1:
        names = [p.name for p in found]
        raise DataError(
            f"{root}: expected exactly one *_queries.json file next to corpus.jsonl, found {names or 'none'}; "
            "name it with dataset.queries=FILE"
        )
    return found[0]


class RagcheckerBenchmark(_Loader):
    """A domain of RAGChecker's benchmark: ``dataset.path`` = the folder with ``corpus.jsonl`` and
    ``<domain>_queries.json`` (or ``dataset.queries`` = the queries file)."""

    @dataclass
    class Config(_PathConfig):
        name: str = "ragchecker_benchmark"
        queries: str | None = None
        #: share of a passage's word 4-grams a fuzzy match must contain
        fuzzy_threshold: float = 0.5
        PATH_EXAMPLE: ClassVar[str] = "DIR (RAGChecker's processed_data/<domain>, with corpus.jsonl)"

        def __post_init__(self) -> None:
            super().__post_init__()
            if not 0 < float(self.fuzzy_threshold) <= 1:
                raise ValueError(f"dataset.fuzzy_threshold ({self.fuzzy_threshold}) must be in (0, 1]")

    def load(self) -> Dataset:
        root = Path(self.config.path)
        cpath = root / "corpus.jsonl" if root.is_dir() else root
        if not cpath.is_file():
            raise DataError(f"{cpath}: file not found (dataset.path is RAGChecker's processed_data/<domain> folder)")
        qpath = Path(self.config.queries) if self.config.queries else find_queries_file(cpath.parent)
        documents: list[Document] = []
        seen: dict[str, int] = {}
        for n, obj in read_jsonl(cpath):
            where = f"{cpath}:{n}"
            text = _require(obj, "text", where)
            if not isinstance(text, str):
                raise DataError(f"{where}: field 'text' must be a string")
            did = str(_require(obj, "doc_id", where))
            _unique(seen, did, "doc_id", cpath, n)
            documents.append(Document(did, text, obj.get("title") or None))
        items = self._items(qpath)
        locator = _Locator(documents, float(self.config.fuzzy_threshold))
        queries: list[Query] = []
        qseen: dict[str, int] = {}
        for i, obj in enumerate(items):
            where = f"{qpath}: item {i}"
            if not isinstance(obj, dict):
                raise DataError(f"{where}: expected an object")
            qid = str(_require(obj, "query_id", where))
            _unique(qseen, qid, "query_id", qpath, i)
            spans: list[Span] = []
            ctx = obj.get("gt_context") or []
            if not isinstance(ctx, list):
                raise DataError(f"{where}: 'gt_context' must be a list of passages")
            for j, passage in enumerate(ctx):
                for span in locator.spans(passage, f"{where}.gt_context[{j}]"):
                    if span not in spans:
                        spans.append(span)
            queries.append(Query(qid, str(_require(obj, "query", where)), obj.get("gt_answer") or None,
                                 tuple(sorted(spans, key=lambda s: (s.doc_id, s.start)))))
        ds = finish(self.config.name, documents, queries, self.config.limit, str(cpath))
        ds.stats.update({f"gt_context_{k}": v for k, v in locator.counts.items()})
        if locator.counts["unlocated"]:
            log.warning(
                "%s: %d of %d gt_context passage(s) could not be located in the corpus (first: %s); "
                "those questions keep only the passages that were found",
                cpath, locator.counts["unlocated"], locator.total, "; ".join(locator.missed[:3]),
            )
        if locator.counts["fuzzy"]:
            log.warning("%s: %d gt_context passage(s) located only approximately (fuzzy match)", cpath, locator.counts["fuzzy"])
        return ds

    @staticmethod
    def _items(qpath: Path) -> list[Any]:
        data = read_json(qpath)
        if isinstance(data, dict):
            for key in ("input_data", "results"):
                if isinstance(data.get(key), list):
                    return data[key]
            raise DataError(f"{qpath}: expected {{'input_data': [...]}} or a list of queries (RAGChecker benchmark format)")
        if isinstance(data, list):
            return data
        raise DataError(f"{qpath}: expected {{'input_data': [...]}} or a list of queries")


class _Locator:
    """Spans of gold passages in a corpus, with counts of how each was found."""

    def __init__(self, documents: list[Document], threshold: float):
        self.documents = documents
        self.by_id = {d.doc_id: i for i, d in enumerate(documents)}
        self.by_title: dict[str, list[int]] = {}
        for i, d in enumerate(documents):
            if d.title:
                self.by_title.setdefault(d.title.strip().lower(), []).append(i)
        self.threshold = threshold
        self.indexes: dict[int, DocumentIndex] = {}
        self._flat: list[str] | None = None
        self.counts: Counter = Counter({m: 0 for m in (*METHODS, "unlocated")})
        self.total = 0
        self.missed: list[str] = []

    def _index(self, i: int) -> DocumentIndex:
        if i not in self.indexes:
            self.indexes[i] = DocumentIndex(self.documents[i].text)
        return self.indexes[i]

    def _by_phrase(self, text: str) -> list[int]:
        if self._flat is None:  # every document's lower-cased words, once, for the phrase filter
            self._flat = [self._index(i).w.joined for i in range(len(self.documents))]
        ps = probes(text)
        return [i for i, flat in enumerate(self._flat) if any(p in flat for p in ps)]

    def spans(self, passage: Any, where: str) -> list[Span]:
        if isinstance(passage, str):
            passage = {"text": passage}
        if not isinstance(passage, dict) or not isinstance(passage.get("text"), str):
            raise DataError(f"{where}: a gt_context passage must be a string or an object with 'text'")
        text = passage["text"]
        if not text.strip():
            return []
        self.total += 1
        did = passage.get("doc_id")
        if did is not None:
            if str(did) not in self.by_id:
                raise DataError(f"{where}: doc_id '{did}' is not in the corpus")
            groups = [[self.by_id[str(did)]]]
        else:
            title = str(passage.get("title") or "").strip().lower()
            groups = [self.by_title.get(title, []), None]  # None: the phrase filter, if needed
        tried: set[int] = set()
        for group in groups:
            cands = self._by_phrase(text) if group is None else group
            cands = [i for i in cands if i not in tried]
            tried.update(cands)
            # the best method over the candidates: an exact match anywhere beats a fuzzy one
            best: tuple[int, int, int, str] | None = None
            for i in cands:
                found = locate(text, self._index(i), self.threshold)
                if found and (best is None or METHODS.index(found[2]) < METHODS.index(best[3])):
                    best = (i, *found)
                    if found[2] == "exact":
                        break
            if best:
                self.counts[best[3]] += 1
                return [Span(self.documents[best[0]].doc_id, best[1], best[2])]
        self.counts["unlocated"] += 1
        self.missed.append(f"{where} ({text[:60]!r})")
        return []
