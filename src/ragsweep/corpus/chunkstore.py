"""Chunks stored columnar: one Arrow IPC file per (corpus fingerprint, chunker config).

The chunker writes a record batch per batch of documents as it goes (columns ``chunk_id``,
``doc_id``, ``start``, ``end``, ``text``, and ``heading`` only for a chunker that prepends heading
paths: a file without it reads as chunks with no heading), into a file under the cache's ``blobs/chunks/`` that
is renamed into place only when complete; the SQLite cache keeps only the small record that names
the file (stage ``"chunks"``). Reading opens the file memory-mapped (Arrow IPC, uncompressed: the
columns are the file's own pages, nothing is decoded), so a warm run reads chunk text straight
from the page cache.
"""

from __future__ import annotations

import bisect
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from ragsweep.store.cache import Cache
from ragsweep.types import Chunk

FORMAT = "arrow-ipc-v1"
FILE = "chunks.arrow"


class ChunkTable(Sequence[Chunk]):
    """The chunks of one stored file as a read-only sequence, memory-mapped: nothing is loaded
    until asked for. ``table[i]`` builds one :class:`Chunk` (a retrieved hit), iteration builds
    them a record batch at a time, :meth:`iter_texts` reads the text column a batch at a time
    (with plain reads, for an index build). It carries its ``fingerprint`` (derived from the chunk
    cache key: corpus fingerprint + chunker config), so an index over it need not hash every chunk
    again."""

    def __init__(self, path: str | os.PathLike, fingerprint: str | None = None):
        import pyarrow as pa

        self.path = Path(path)
        self.fingerprint = fingerprint
        self._table = pa.ipc.open_file(pa.memory_map(str(self.path), "r")).read_all()
        self._ncols = self._table.num_columns  # 5, or 6 with the heading column
        self._batches = self._table.to_batches()
        self._starts = [0]
        for b in self._batches:
            self._starts.append(self._starts[-1] + b.num_rows)

    def __len__(self) -> int:
        return self._starts[-1]

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"chunk index {i} out of range ({len(self)} chunks)")
        k = bisect.bisect_right(self._starts, i) - 1
        b, r = self._batches[k], i - self._starts[k]
        return Chunk(*(b.column(j)[r].as_py() for j in range(self._ncols)))

    def __iter__(self) -> Iterator[Chunk]:
        for b in self._batches:
            yield from map(Chunk, *(b.column(j).to_pylist() for j in range(self._ncols)))

    def of_docs(self, doc_ids: Iterable[str]) -> list[tuple[int, Chunk]]:
        """``(row, chunk)`` of every chunk of these documents, in order: only the ``doc_id``
        column is scanned, no other chunk is built (a run's relevant documents, not the corpus)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        ids = sorted(set(doc_ids))
        if not ids:
            return []
        rows = pc.indices_nonzero(pc.is_in(self._table.column("doc_id"), value_set=pa.array(ids, pa.string())))
        return [(i, self[i]) for i in rows.to_pylist()]

    def iter_texts(self) -> Iterator[list[str]]:
        """Every chunk's text, one stored record batch at a time, read with plain file reads: an
        index build touches every text once, and through the memory map each page read would stay
        in this process's resident memory (a 1.5 GB chunk file at 1M documents)."""
        import pyarrow as pa

        with pa.OSFile(str(self.path), "rb") as f:
            reader = pa.ipc.open_file(f)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).column(4).to_pylist()

    def iter_search_texts(self) -> Iterator[list[str]]:
        """What a retriever indexes (:attr:`Chunk.search_text`), as :meth:`iter_texts` reads it."""
        if self._ncols < 6:
            yield from self.iter_texts()
            return
        import pyarrow as pa

        with pa.OSFile(str(self.path), "rb") as f:
            reader = pa.ipc.open_file(f)
            for i in range(reader.num_record_batches):
                b = reader.get_batch(i)
                yield [f"{h}\n{t}" if h else t for t, h in zip(b.column(4).to_pylist(), b.column(5).to_pylist())]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (ChunkTable, (str(self.path), self.fingerprint))

    def __repr__(self) -> str:
        return f"ChunkTable({len(self)} chunks, {self.path})"


def schema(heading: bool = False) -> Any:
    import pyarrow as pa

    cols = [("chunk_id", pa.string()), ("doc_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
            ("text", pa.large_string())]
    return pa.schema(cols + ([("heading", pa.string())] if heading else []))


def to_batch(chunks: list[Chunk], heading: bool = False) -> Any:
    import pyarrow as pa

    cols = [pa.array([c.chunk_id for c in chunks], pa.string()), pa.array([c.doc_id for c in chunks], pa.string()),
            pa.array([c.start for c in chunks], pa.int64()), pa.array([c.end for c in chunks], pa.int64()),
            pa.array([c.text for c in chunks], pa.large_string())]
    if heading:
        cols.append(pa.array([c.heading for c in chunks], pa.string()))
    return pa.record_batch(cols, schema=schema(heading))


def write(path: Path, batches: Iterable[list[Chunk]], keep: list[Chunk] | None = None, heading: bool = False) -> int:
    """Write every batch of chunks to ``path`` (atomically: a temporary name renamed into place);
    the chunks are also appended to ``keep`` when given. ``heading``: keep each chunk's heading
    path (a sixth column). Returns the number of chunks."""
    import pyarrow as pa

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{path.name}-{uuid.uuid4().hex}"
    n = 0
    try:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, schema(heading)) as writer:
            for part in batches:
                if part:
                    writer.write_batch(to_batch(part, heading))
                    n += len(part)
                    if keep is not None:
                        keep.extend(part)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def cached(cache: Any, key: str, batches: Callable[[], Iterable[list[Chunk]]],
           heading: bool = False) -> tuple[ChunkTable, bool]:
    """The chunk file that ``cache`` records under ``key`` (stage ``"chunks"``), or, where there is
    none (or its file is gone), one written now from ``batches()`` under the cache's
    ``blobs/chunks/<key>/`` and recorded. Returns the memory-mapped table and whether it was a hit."""
    rec = cache.get("chunks", key)
    root = Path(cache.root)
    fingerprint = Cache.key("chunk-list", key)
    if isinstance(rec, dict) and rec.get("format") == FORMAT and (root / rec["file"]).is_file():
        return ChunkTable(root / rec["file"], fingerprint), True
    rel = Path("blobs") / "chunks" / key / FILE
    n = write(root / rel, batches(), heading=heading)
    cache.put("chunks", key, {"file": str(rel), "rows": n, "format": FORMAT})
    return ChunkTable(root / rel, fingerprint), False


def open_table(path: Path) -> Any:
    """The chunk table, memory-mapped (zero copy)."""
    import pyarrow as pa

    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()


def iter_columns(path: Path) -> Iterator[tuple[list, list, list, list, list]]:
    """``(chunk_ids, doc_ids, starts, ends, texts)`` per stored record batch."""
    import pyarrow as pa

    reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
    for i in range(reader.num_record_batches):
        b = reader.get_batch(i)
        yield tuple(b.column(j).to_pylist() for j in range(5))  # type: ignore[misc]


def read(path: Path) -> list[Chunk]:
    """Every chunk of the file, in order (with its heading path where the file keeps one)."""
    return list(ChunkTable(path))
