"""The BEIR layout as a dataset (``dataset=beir``): ``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``; built on the shared helpers of :mod:`ragsweep.corpus.dataset.loaders`, its corpus
read as :class:`~ragsweep.corpus.dataset.corpus_file._CorpusFile` reads one (parsed on a cold run only)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

from ragsweep.corpus.dataset.doctable import LazyDocuments
from ragsweep.corpus.dataset.corpus_file import _CorpusFile
from ragsweep.corpus.dataset.loaders import _lengths, _PathConfig, _require, _whole_doc_spans, finish, read_jsonl
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document, Query


class BeirDataset(_CorpusFile):
    """BEIR layout: ``corpus.jsonl`` (``_id, title, text``), ``queries.jsonl`` (``_id, text``),
    ``qrels/<split>.tsv`` (``query-id, corpus-id, score``). Only queries with qrels are kept."""

    @dataclass
    class Config(_PathConfig):
        split: str = "test"
        name: str = "beir"
        title_in_text: bool = False  # index "title text" as BEIR's evaluations do (the published SciFact figures)
        PATH_EXAMPLE: ClassVar[str] = "DIR (with corpus.jsonl, queries.jsonl, qrels/)"

    def _corpus_file(self) -> Path:
        return Path(self.config.path) / "corpus.jsonl"

    def _key_config(self) -> list[Any]:
        return ["beir", self.config.title_in_text]  # title_in_text changes every text

    def _stream(self, every: bool = False) -> Iterator[Document]:
        """``corpus.jsonl``'s documents as it is read (the non-empty ones; ``every``: all)."""
        cfile = self._corpus_file()
        for n, obj in read_jsonl(cfile):
            text = str(obj.get("text") or "")
            if self.config.title_in_text and obj.get("title"):
                text = f"{obj['title']} {text}".strip()
            doc_id = str(_require(obj, "_id", f"{cfile}:{n}"))
            if every or text.strip():
                yield Document(doc_id, text, obj.get("title") or None)

    def _build(self, warm: LazyDocuments | None, key: str | None) -> Dataset:
        root = Path(self.config.path)
        documents = self._documents(warm, key)
        docs = _lengths(documents)
        qrels_path = root / "qrels" / f"{self.config.split}.tsv"
        if not qrels_path.is_file():
            have = sorted(p.stem for p in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
            raise DataError(f"{qrels_path}: not found; dataset.split={self.config.split!r}, available splits: {have or 'none'}")
        qrels: dict[str, list[str]] = {}
        with open(qrels_path, encoding="utf-8", newline="") as fh:
            for n, row in enumerate(csv.reader(fh, delimiter="\t"), start=1):
                if not row or (n == 1 and not row[-1].strip().lstrip("-").isdigit()):
                    continue  # header
                if len(row) < 3:
                    raise DataError(f"{qrels_path}:{n}: expected 3 tab-separated columns query-id, corpus-id, score")
                qid, did, score = row[0], row[1], row[2]
                if did not in docs:
                    raise DataError(f"{qrels_path}:{n}: corpus-id '{did}' is not in corpus.jsonl")
                if float(score) > 0:
                    qrels.setdefault(qid, []).append(did)
        queries = []
        for n, obj in read_jsonl(root / "queries.jsonl"):
            qid = str(_require(obj, "_id", f"{root / 'queries.jsonl'}:{n}"))
            if qid in qrels:
                queries.append(Query(qid, str(obj.get("text", "")), None, _whole_doc_spans(qrels[qid], docs, str(qrels_path))))
        return self._remembered(finish(self.config.name, documents, queries, self.config.limit, str(root)), key)


__all__ = ["BeirDataset"]
