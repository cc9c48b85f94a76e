"""A corpus file that is never held whole, and read once: later runs over the unchanged file do
not parse it again.

A loader that reads a large corpus file (``dataset=jsonl``, ``dataset=beir``) reads it, on a
cold run, in one streaming pass (:func:`scan`: every line checked, the kept documents hashed into
the corpus fingerprint) that writes a small *document table*: one Arrow IPC file per source key
(each source file's ``(path, size, mtime, inode)`` and the loader's config, as the fingerprint
memo of :mod:`ragsweep.corpus.dataset.fingerprint`) holding every kept document's ``doc_id``, ``title``
and text length, a ``doc_id``-sorted order for lookups, and in its metadata the corpus
fingerprint and the number of empty documents skipped. No document text is stored, and none is
kept in memory: the run goes on with a :class:`LazyDocuments` over the table, as a warm run does.

A later run whose source files are unchanged opens that table memory-mapped
(:func:`open_warm`) and gets a :class:`LazyDocuments`: its length, fingerprint, ``doc_id`` ->
length/title lookups (binary search over the sorted order: a few page reads, not a dict over every
document) and ``doc_ids()`` come from the table. What needs the documents' *text* reads the file
again: iterating them (chunking with a chunker config not cached yet, the Ray chunker) streams it
a batch at a time, keeping nothing; indexing them (``Dataset.doc_index``) parses it into memory,
once; both say so in the log. The chunker's cache hit needs only the fingerprint; a run's prompt
titles need only the retrieved chunks' documents (:func:`titles_of`).

A source file changed in size, mtime or inode is a different key (parsed and checked again, a new
table); a file written in the last few seconds never gets a table (``fingerprint.RACY_S``) and is
parsed into memory, as is one whose table cannot be written (read-only cache, ids Arrow cannot
store). The newest :data:`KEEP` tables are kept.
"""

from __future__ import annotations

import bisect
import collections.abc
import logging
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from ragsweep.corpus.dataset.fingerprint import RACY_S, Documents, Hasher, memo_path, remembered, source_key
from ragsweep.errors import DataError
from ragsweep.types import Document

log = logging.getLogger(__name__)

FORMAT = "doctable-v1"
#: how many document tables stay on disk (the newest)
KEEP = 16


def tables_dir() -> Path:
    """Beside the fingerprint memo: ``~/.cache/ragsweep/documents`` (``RAGSWEEP_FINGERPRINTS``'s folder)."""
    return memo_path().parent / "documents"


def corpus_key(paths: Sequence[str | os.PathLike], config: Any) -> str | None:
    """The table's key for these source files as they are now; ``None`` when one cannot be
    stat'ed or was written in the last ``RACY_S`` seconds (a same-size rewrite could keep its
    mtime: such a file is always parsed)."""
    import time

    try:
        if any(time.time() - os.stat(p).st_mtime < RACY_S for p in paths):
            return None
        return source_key(paths, [FORMAT, config])
    except OSError:
        return None


class _Sorted:
    """``doc_id`` -> row, by binary search over the table's ``doc_id``-sorted order."""

    def __init__(self, ids: Any, order: Any):
        self.ids, self.order = ids, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, k: int) -> str:
        return self.ids[self.order[k].as_py()].as_py()

    def row(self, doc_id: str) -> int | None:
        k = bisect.bisect_left(self, doc_id)
        if k < len(self.order) and self[k] == doc_id:
            return self.order[k].as_py()
        return None


class _Column(Mapping[str, Any]):
    """A read-only ``doc_id`` -> value view of one table column (``len`` and ``get`` without a
    parse; iterating it lists every ``doc_id``)."""

    def __init__(self, docs: "LazyDocuments", column: str):
        self._docs, self._column = docs, column

    def __getitem__(self, doc_id: str) -> Any:
        row = self._docs._find.row(doc_id) if isinstance(doc_id, str) else None
        if row is None:
            raise KeyError(doc_id)
        return self._docs._cols[self._column][row].as_py()

    def __iter__(self) -> Iterator[str]:
        return iter(self._docs.doc_ids())

    def __len__(self) -> int:
        return len(self._docs)


class LazyDocuments(collections.abc.Sequence):
    """The kept documents of a corpus file unchanged since the run that scanned it, from its
    document table: ``len``, ``fingerprint``, :attr:`lengths`, :attr:`titles`, :meth:`doc_ids` read
    the table; iterating streams the corpus file (``stream``, a batch at a time, nothing kept);
    indexing parses it (``parse``, once). Both say so in the log."""

    def __init__(self, path: str | os.PathLike, parse: Callable[[], list[Document]], source: str,
                 stream: Callable[[], Iterable[Document]] | None = None):
        import pyarrow as pa

        self.path, self._parse, self.source, self._stream = Path(path), parse, source, stream
        table = pa.ipc.open_file(pa.memory_map(str(self.path), "r")).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if meta.get("format") != FORMAT:
            raise ValueError(f"{self.path}: not a {FORMAT} document table")
        self.fingerprint: str = meta["fingerprint"]
        self.empty_skipped = int(meta["empty_skipped"])
        self._cols = {name: table.column(name).combine_chunks() for name in ("doc_id", "title", "length", "order")}
        self._find = _Sorted(self._cols["doc_id"], self._cols["order"])
        self.lengths: Mapping[str, int] = _Column(self, "length")
        self.titles: Mapping[str, str | None] = _Column(self, "title")
        self._docs: list[Document] | None = None
        #: doc_id -> length of the blank documents skipped, known to the cold run that scanned the file only
        self.blank_lengths: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._cols["doc_id"])

    def doc_ids(self) -> list[str]:
        return self._cols["doc_id"].to_pylist()

    def parsed(self) -> list[Document]:
        """The documents themselves: the corpus file parsed (once), checked against the table."""
        if self._docs is None:
            log.info("%s: reading the corpus file (every document's text is needed)", self.source)
            docs = self._parse()
            if len(docs) != len(self) or any(a != b for a, b in zip((d.doc_id for d in docs), self.doc_ids())):
                raise RuntimeError(f"{self.source}: the corpus file changed while this run used it; run again")
            self._docs = docs
        return self._docs

    def __getitem__(self, i: Any) -> Any:
        return self.parsed()[i]

    def __iter__(self) -> Iterator[Document]:
        for batch in self.iter_batches():
            yield from batch

    def iter_batches(self, size: int = 2048) -> Iterator[list[Document]]:
        """The documents in order, ``size`` at a time. With a ``stream`` (the loader's streaming
        parse) and the documents not parsed yet, the corpus file is read as it goes and nothing
        is kept: a pass over a million documents holds one batch (chunking a corpus whose
        chunks are not cached). Each batch's ids are checked against the table."""
        if self._docs is not None or self._stream is None:
            docs = self.parsed()
            for s in range(0, len(docs), size):
                yield docs[s : s + size]
            return
        log.info("%s: reading the corpus file as a stream (%d documents)", self.source, len(self))
        ids, row, batch = self._cols["doc_id"], 0, []
        for doc in self._stream():
            batch.append(doc)
            if len(batch) == size:
                self._check(batch, ids.slice(row, size).to_pylist())
                row += size
                yield batch
                batch = []
        if batch:
            self._check(batch, ids.slice(row, len(batch)).to_pylist())
            row += len(batch)
            yield batch
        if row != len(self):
            raise RuntimeError(f"{self.source}: the corpus file changed while this run used it; run again")

    def _check(self, batch: list[Document], ids: list[str]) -> None:
        if len(ids) != len(batch) or any(d.doc_id != i for d, i in zip(batch, ids)):
            raise RuntimeError(f"{self.source}: the corpus file changed while this run used it; run again")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, collections.abc.Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (LazyDocuments, (str(self.path), self._parse, self.source, self._stream))

    def __repr__(self) -> str:
        return f"LazyDocuments({len(self)} documents of {self.source}, {'parsed' if self._docs is not None else 'not parsed'})"


def open_warm(key: str | None, parse: Callable[[], list[Document]], source: str,
              stream: Callable[[], Iterable[Document]] | None = None) -> LazyDocuments | None:
    """The documents of an unchanged corpus from its table (``key`` from :func:`corpus_key`), or
    ``None`` when there is none (the loader then parses the file)."""
    if key is None:
        return None
    path = tables_dir() / f"{key}.arrow"
    if not path.is_file():
        return None
    try:
        docs = LazyDocuments(path, parse, source, stream)
    except Exception as exc:  # a truncated or foreign file: parse the corpus, write a new table
        log.debug("document table %s unreadable (%s): parsing the corpus", path, exc)
        return None
    log.info("%s: unchanged since it was read (%d documents); not parsed again", source, len(docs))
    return docs


def remember(key: str | None, paths: Sequence[str | os.PathLike], config: Any, documents: Sequence[Document],
             empty_skipped: int) -> Documents:
    """The parsed, kept ``documents`` with their fingerprint (:func:`fingerprint.remembered`),
    and their document table written under ``key`` (none when ``key`` is ``None``)."""
    docs = remembered(paths, config, documents)
    if key is not None:
        try:
            _write(tables_dir() / f"{key}.arrow", docs, str(docs.fingerprint), empty_skipped)
        except Exception as exc:  # only the next run's speed depends on it
            log.debug("document table not written (%s): the next run parses the corpus again", exc)
    return docs


def unique_ids(documents: Iterable[Document], source: str) -> Iterator[Document]:
    """``documents`` as they come; a ``doc_id`` seen before is an error naming it."""
    seen: set[str] = set()
    for d in documents:
        if d.doc_id in seen:
            raise DataError(f"{source}: duplicate doc_id '{d.doc_id}'; document ids must be unique")
        seen.add(d.doc_id)
        yield d


def scan(key: str, documents: Iterable[Document], parse: Callable[[], list[Document]],
         stream: Callable[[], Iterable[Document]], source: str) -> LazyDocuments | None:
    """A cold run's single pass over a corpus: ``documents`` (every document the loader reads,
    empty ones included, in file order, from a streaming parse) are checked (duplicate ids, an
    empty corpus), hashed into the corpus fingerprint and written as the table under ``key``,
    keeping only ids, titles and lengths, never the texts. Returns the :class:`LazyDocuments`
    over that table (later passes read the file again through ``stream``, a batch at a time),
    or ``None`` when the table cannot be written (the loader then parses the file into memory)."""
    h = Hasher()  # fingerprint.hash_documents, fed as the file is read
    ids: list[str] = []
    titles: list[str | None] = []
    lengths: list[int] = []
    blank: dict[str, int] = {}
    for d in unique_ids(documents, source):
        if not d.text.strip():
            blank[d.doc_id] = len(d.text)
            continue
        h.add(d)
        ids.append(d.doc_id)
        titles.append(d.title)
        lengths.append(len(d.text))
    if not ids:
        raise DataError(f"{source}: the corpus has zero (non-empty) documents; nothing to retrieve from")
    path = tables_dir() / f"{key}.arrow"
    try:
        _write_columns(path, ids, titles, lengths, h.hexdigest(), len(blank))
        docs = LazyDocuments(path, parse, source, stream)
    except Exception as exc:  # a read-only cache, ids Arrow cannot store: parse into memory instead
        log.debug("document table not written (%s): the corpus is parsed into memory", exc)
        return None
    docs.blank_lengths = blank
    return docs


def _write(path: Path, docs: Sequence[Document], fingerprint: str, empty_skipped: int) -> None:
    _write_columns(path, [d.doc_id for d in docs], [d.title for d in docs], [len(d.text) for d in docs],
                   fingerprint, empty_skipped)


def _write_columns(path: Path, doc_ids: list[str], titles: list[str | None], lengths: list[int], fingerprint: str,
                   empty_skipped: int) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(doc_ids, pa.string())
    table = pa.table(
        {"doc_id": ids, "title": pa.array(titles, pa.string()),
         "length": pa.array(lengths, pa.int64()),
         "order": pc.sort_indices(ids).cast(pa.int64())},
        metadata={"format": FORMAT, "fingerprint": fingerprint, "empty_skipped": str(empty_skipped)},
    )
    # Arrow sorts strings by UTF-8 bytes, Python by code points: the same order for valid text
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{uuid.uuid4().hex}"
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    tables = sorted(path.parent.glob("*.arrow"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in tables[KEEP:]:
        old.unlink(missing_ok=True)


def warm_or_cold(build: Any, key: str | None, parse: Any, source: str, stream: Any = None) -> Any:
    """``build(documents)`` over the unchanged corpus's table when there is one, else over the
    parsed file. A warm build that fails (a bad queries file, a relevant document that is empty)
    is redone cold, so every error is the cold run's own."""
    warm = open_warm(key, parse, source, stream)
    if warm is not None:
        try:
            return build(warm)
        except DataError:
            pass
    return build(None)


def cold_documents(key: str | None, read: Any, parse: Any, stream: Any, source: str) -> Sequence[Document]:
    """A cold run's corpus. With a table key (the file is stable), one streaming pass checks and
    fingerprints it and writes its document table (:func:`doctable.scan`): the documents' texts
    are never all in memory, later passes stream the file again. Without one (a file written
    seconds ago, a table that cannot be written), the file parsed into a list (``read()``: every
    document, checked)."""
    if key is not None:
        lazy = scan(key, stream(every=True), parse, stream, source)
        if lazy is not None:
            return lazy
    return read()


def titles_of(documents: Sequence[Document], doc_ids: Any = None) -> Mapping[str, str | None]:
    """``doc_id`` -> title for the prompt: a lazy corpus's table view (no parse), else a dict
    (over ``doc_ids`` only when given)."""
    if isinstance(documents, LazyDocuments):
        return documents.titles
    wanted = None if doc_ids is None else set(doc_ids)
    return {d.doc_id: d.title for d in documents if wanted is None or d.doc_id in wanted}


def doc_ids_of(documents: Sequence[Document]) -> list[str]:
    """Every ``doc_id`` in order (a lazy corpus: from its table, no parse)."""
    return documents.doc_ids() if isinstance(documents, LazyDocuments) else [d.doc_id for d in documents]


__all__ = ["LazyDocuments", "cold_documents", "corpus_key", "doc_ids_of", "open_warm", "remember", "scan", "tables_dir",
           "titles_of", "unique_ids", "warm_or_cold"]
