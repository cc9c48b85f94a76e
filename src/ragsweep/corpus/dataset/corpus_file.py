"""Loaders whose corpus is one JSONL file that may hold millions of documents: the base they
share (:class:`_CorpusFile`: the file read as a stream, parsed and checked on a cold run only,
its document table answering later runs; :mod:`ragsweep.corpus.dataset.doctable`), and a user's own
data (:class:`JsonlDataset`). The BEIR layout builds on the same base (:mod:`.beir`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ragsweep.corpus.dataset.doctable import LazyDocuments, cold_documents, corpus_key, remember, warm_or_cold
from ragsweep.corpus.dataset.loaders import (_check_limit, _Loader, _require, _require_documents, _require_setting,
                                      _unique, finish, read_jsonl)
from ragsweep.corpus.dataset.queries import read_queries
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document


class _CorpusFile(_Loader):
    """A loader whose corpus is one JSONL file (``_corpus_file``), read as a stream by ``_stream``
    and parsed and checked on a cold run only: later runs over the unchanged file read its
    document table (:mod:`ragsweep.corpus.dataset.doctable`, keyed by the file and ``_key_config``).
    A subclass builds its dataset in ``_build(documents)`` from :meth:`_documents`."""

    def _corpus_file(self) -> Path:
        raise NotImplementedError

    def _key_config(self) -> Any:
        raise NotImplementedError

    def _stream(self, every: bool = False) -> Iterator[Document]:
        """The file's documents as it is read (the non-empty ones; ``every``: all)."""
        raise NotImplementedError

    def _build(self, warm: LazyDocuments | None, key: str | None) -> Dataset:
        raise NotImplementedError

    def load(self) -> Dataset:
        cfile = self._corpus_file()
        key = corpus_key([cfile], self._key_config()) if cfile.is_file() else None
        return warm_or_cold(lambda warm: self._build(warm, key), key, self._parsed, str(cfile), self._stream)

    def _parsed(self) -> list[Document]:
        return [d for d in self._corpus() if d.text.strip()]

    def _corpus(self) -> list[Document]:
        documents = list(self._stream(every=True))
        _require_documents(documents, str(self._corpus_file()))
        return documents

    def _documents(self, warm: LazyDocuments | None, key: str | None) -> Sequence[Document]:
        """The table's documents on a warm run, else the file's (:func:`doctable.cold_documents`)."""
        if warm is not None:
            return warm
        return cold_documents(key, self._corpus, self._parsed, self._stream, str(self._corpus_file()))

    def _remembered(self, ds: Dataset, key: str | None) -> Dataset:
        """``ds`` with its corpus fingerprint (hashed once per file) where a list was parsed."""
        if not isinstance(ds.documents, LazyDocuments):
            ds.documents = remember(key, [self._corpus_file()], self._key_config(), ds.documents,
                                    ds.stats["empty_documents_skipped"])
        return ds


class JsonlDataset(_CorpusFile):
    """A user's own data: ``corpus`` JSONL of ``{doc_id, text, title?}`` and ``queries`` JSONL of
    ``{query_id, query, gt_answer?, relevant_doc_ids?, evidence?, spans?}``
    (:mod:`ragsweep.corpus.dataset.queries`: quotes located in the text, or spans given directly)."""

    @dataclass
    class Config:
        corpus: str | None = None
        queries: str | None = None
        limit: int | None = None
        name: str = "jsonl"
        #: the least similarity (0-1) of a fuzzily located evidence quote to the text it is matched to
        match: float = 0.8

        def __post_init__(self) -> None:
            _check_limit(self.limit)
            if not 0 < self.match <= 1:
                raise ValueError(f"dataset.match ({self.match}) must be in (0, 1]: e.g. 0.8")
            _require_setting(self.corpus, "corpus", "jsonl", "PATH.jsonl")  # queries: by load() (load_corpus needs none)

    def _corpus_file(self) -> Path:
        return Path(self.config.corpus)

    def _key_config(self) -> Any:
        return "jsonl"

    def load(self) -> Dataset:
        if not self.config.queries:
            raise DataError("dataset.queries is required to run questions over dataset=jsonl: add dataset.queries=PATH.jsonl "
                            "(no questions yet? ragsweep-questions writes a set: docs/questions.md)")
        return super().load()

    def load_corpus(self) -> Dataset:
        """The corpus file's documents without questions (for generating questions)."""
        docs = self._parsed()
        return Dataset(self.config.name, docs, [], stats={"documents": len(docs)})

    def _stream(self, every: bool = False) -> Iterator[Document]:
        """The corpus file's documents as it is read, checked line by line (the kept, non-empty
        ones; ``every``: the empty ones too)."""
        cpath = self._corpus_file()
        seen: dict[str, int] = {}
        for n, obj in read_jsonl(cpath):
            where = f"{cpath}:{n}"
            text = obj.get("text")
            if text is None:
                raise DataError(f"{where}: missing required field 'text'")
            if not isinstance(text, str):
                raise DataError(f"{where}: field 'text' must be a string")
            doc = Document(str(_require(obj, "doc_id", where)), text, obj.get("title"))
            _unique(seen, doc.doc_id, "doc_id", cpath, n)
            if every or text.strip():
                yield doc

    def _build(self, warm: LazyDocuments | None, key: str | None) -> Dataset:
        cpath, qpath = Path(self.config.corpus), Path(self.config.queries)
        documents = self._documents(warm, key)
        queries, info = read_queries(qpath, documents, self.config.match)
        ds = self._remembered(finish(self.config.name, documents, queries, self.config.limit, str(cpath)), key)
        ds.stats.update(info["stats"])
        ds.synthetic = info["synthetic"]
        return ds


__all__ = ["JsonlDataset"]
