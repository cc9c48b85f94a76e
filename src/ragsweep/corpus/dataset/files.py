"""``dataset=files``: a folder of the user's own files (PDF, HTML, Word, Markdown, text) as a
corpus, with the questions they wrote for it.

    ragsweep dataset=files dataset.path=~/docs dataset.queries=~/docs_questions.jsonl

Each file is a document whose ``doc_id`` is its path relative to the folder (posix), parsed by
the parser of its kind (:mod:`ragsweep.corpus.parse`) once: parses are cached by content hash
and parser version, and an unchanged folder is not even walked for content (its document table,
:mod:`ragsweep.corpus.dataset.doctable`, answers). The corpus streams: a cold run holds one block of
files at a time; later passes read the parses back from the cache. Files that give no text
(encrypted, image-only, damaged, empty, of a kind not parsed) are never fatal: they are listed in
the parse ledger (``parse_ledger.json`` in the run, ``data/files_*`` counts in its metrics).

Questions (``queries``, JSONL), one per line::

    {"query_id": "q1", "query": "...", "gt_answer": "...",          # gt_answer optional
     "relevant_doc_ids": ["manual.pdf"],                             # relevant files, by path
     "evidence": [{"doc_id": "manual.pdf", "quote": "..."}, "..."]}  # optional quotes (or "spans")

A quote becomes the character span it occupies in its file's parsed text (located exactly, then
ignoring whitespace, case and punctuation, then fuzzily: :mod:`ragsweep.corpus.dataset.locate`, then
rapidfuzz's best partial alignment); a relevant file without a quote is relevant as a whole. The
reader and its whole format (spans given directly, a generated set's provenance) are
:mod:`ragsweep.corpus.dataset.queries`.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ragsweep.store.cache import Cache
from ragsweep.corpus.parse import BY_EXTENSION
from ragsweep.corpus.parse.folder import FolderCorpus, walk
from ragsweep.corpus.dataset.doctable import LazyDocuments, corpus_key, open_warm, scan
from ragsweep.corpus.dataset.loaders import _Loader, finish
from ragsweep.corpus.dataset.queries import read_queries
from ragsweep.errors import DataError
from ragsweep.types import Dataset, Document, Query

FORMAT = "files-v1"


class FileDocuments(LazyDocuments):
    """A parsed folder's documents from their document table (see :class:`LazyDocuments`); the
    text, pages and headings of a few of them (``documents_of``) come from the parse cache."""

    def __init__(self, path: Any, folder: FolderCorpus, source: str):
        super().__init__(path, folder.parse_all, source, folder.stream)
        self.folder = folder

    def documents_of(self, doc_ids: Iterable[str]) -> dict[str, Document]:
        if self._docs is not None:
            wanted = set(doc_ids)
            return {d.doc_id: d for d in self._docs if d.doc_id in wanted}
        return self.folder.documents_of(doc_ids)

    def __reduce__(self) -> Any:
        return (FileDocuments, (str(self.path), self.folder, self.source))


class FilesDataset(_Loader):
    """A folder of files as a corpus (see the module docstring)."""

    @dataclass
    class Config:
        path: str | None = None
        queries: str | None = None
        #: globs over the path relative to the folder (``*`` also matches ``/``); empty: every file
        include: list[str] = field(default_factory=list)
        exclude: list[str] = field(default_factory=list)
        #: parses are cached here (the run's ``cache_dir``); null: parsed on every run
        cache_dir: str | None = ".ragsweep_cache"
        #: processes that parse files not in the cache; null: one per core
        workers: int | None = None
        #: the least similarity (0-1) of a fuzzily located evidence quote to the text it is matched to
        match: float = 0.8
        limit: int | None = None
        name: str = "files"
        #: a progress bar (files/s, ETA) while files parse; ``ragsweep -q`` turns it off
        progress: bool = True

        def __post_init__(self) -> None:
            if not self.path:
                raise ValueError("dataset.path is required with dataset=files: add dataset.path=DIR (a folder of "
                                 "PDF, HTML, DOCX, Markdown or text files)")
            if self.limit is not None and self.limit < 1:
                raise ValueError(f"dataset.limit must be a positive number of questions or null, got {self.limit}")
            if self.workers is not None and self.workers < 1:
                raise ValueError(f"dataset.workers ({self.workers}) must be >= 1 or null (one per core)")
            if not 0 < self.match <= 1:
                raise ValueError(f"dataset.match ({self.match}) must be in (0, 1]: e.g. 0.8")
            for name in ("include", "exclude"):
                if isinstance(getattr(self, name), str):
                    setattr(self, name, [getattr(self, name)])

    # -- the corpus -------------------------------------------------------------------------
    def load_corpus(self) -> Dataset:
        """The folder's documents and parse ledger, without questions (for indexing, or for
        generating questions)."""
        root = Path(self.config.path).expanduser()
        if not root.is_dir():
            what = "is a file, not a folder" if root.exists() else "does not exist"
            raise DataError(f"dataset.path: {root} {what}; give the folder of your documents (dataset.path=DIR)")
        entries = walk(root, self.config.include, self.config.exclude)
        if not entries:
            raise DataError(f"{root}: no files" + (" match dataset.include/dataset.exclude" if
                            self.config.include or self.config.exclude else "") + "; nothing to parse")
        folder = FolderCorpus(root, entries, self.config.cache_dir, self.config.workers, progress=self.config.progress)
        source = str(root)
        config = [FORMAT, sorted((k, p.name, p.version) for k, p in BY_EXTENSION.items())]
        key = corpus_key([e.path for e in entries], config)
        cache = folder.cache()
        ledger = cache.get("parse-ledger", key, None) if key is not None and cache is not None else None
        warm = open_warm(key, folder.parse_all, source, folder.stream) if ledger is not None else None
        if warm is not None:
            documents: Sequence[Document] = FileDocuments(warm.path, folder, source)
        else:
            documents = self._cold(key, folder, root)
            ledger = folder.ledger
            if key is not None and cache is not None and isinstance(documents, LazyDocuments):
                cache.put("parse-ledger", key, ledger)
        folder.close()
        self._ledger: list[dict[str, str]] = ledger
        reasons = collections.Counter(row["reason"] for row in ledger)
        stats = {"documents": len(documents), "files": len(entries), "files_parsed": len(documents),
                 "files_parsed_now": folder.parsed_now, "files_in_ledger": len(ledger),
                 **{f"files_{r}": n for r, n in sorted(reasons.items())}}
        artifact = {"folder": str(root), "files": len(entries), "parsed": len(documents), "ledger": ledger}
        return Dataset(self.config.name, documents, [], stats=stats, artifacts={"parse_ledger.json": artifact})

    def _cold(self, key: str | None, folder: FolderCorpus, root: Path) -> Sequence[Document]:
        """One streaming pass that parses (what the cache lacks), checks and tables the corpus;
        a list in memory when no table can be kept (a file written seconds ago)."""
        docs: list[Document] = []
        if key is not None:
            try:
                lazy = scan(key, folder.stream(every=True), folder.parse_all, folder.stream, str(root))
            except DataError:  # no document at all: named below, with the ledger's reasons
                lazy, key = None, "nothing parsed"
            if lazy is not None:
                return FileDocuments(lazy.path, folder, str(root))
        if key != "nothing parsed":
            docs = folder.parse_all()
        if not docs:
            counts = collections.Counter(row["reason"] for row in folder.ledger)
            by = ", ".join(f"{n} {r}" for r, n in counts.most_common())
            raise DataError(f"{root}: no file could be parsed ({len(folder.entries)} files: {by}); "
                            "fix or leave out those files (each reason's fix is in the parse ledger)")
        return docs

    # -- the questions ----------------------------------------------------------------------
    def load(self) -> Dataset:
        if not self.config.queries:
            raise DataError("dataset.queries is required to run questions over dataset=files: add "
                            "dataset.queries=FILE.jsonl (one {query_id, query, gt_answer?, relevant_doc_ids?, "
                            "evidence?} per line)")
        corpus = self.load_corpus()
        queries, info = self._queries(Path(self.config.queries).expanduser(), corpus.documents)
        ds = finish(self.config.name, corpus.documents, queries, self.config.limit, str(self.config.path))
        ds.stats = {**corpus.stats, **ds.stats, **info["stats"]}
        ds.artifacts = corpus.artifacts
        ds.synthetic = info["synthetic"]
        return ds

    def _queries(self, qpath: Path, documents: Sequence[Document]) -> tuple[list[Query], dict[str, Any]]:
        return read_queries(qpath, documents, self.config.match, lambda d: _why(d, self._ledger))


def _why(doc_id: str, ledger: list[dict[str, str]]) -> str:
    for row in ledger:
        if row["file"] == doc_id:
            return f" (it is in the parse ledger: {row['reason']})"
    return ""


__all__ = ["FileDocuments", "FilesDataset"]
