"""A term-major (CSC) sparse matrix built out of core: the lexical indexes of a million chunks in
bounded memory.

BM25 and TF-IDF both store one column per word and one row per chunk, so that a query reads only
the columns of its own words. Built in memory, the matrix's triples (row, column, value), their
sort by column and the finished arrays are held at once: 10 GB for BM25 over 1.55M chunks. Here:

1. the retriever tokenises the chunks a batch at a time and :meth:`SpillMatrix.add` writes each
   batch's triples (rows ascending, columns ascending within a row) to a small file in a scratch
   directory; only the vocabulary and per-column counts stay in memory;
2. :meth:`SpillMatrix.write` turns every spilled batch into its final values once (a
   ``transform`` that sees whole rows: BM25's length normalisation, TF-IDF's L2 norm) and then
   writes the ``data`` / ``indices`` / ``indptr`` ``.npy`` files a range of columns at a time
   (at most ``budget`` bytes of entries per range), each range gathered from the spilled batches
   in order, so every column lists its rows ascending, as ``scipy``'s ``tocsc`` gives.

The arrays are written with plain file writes (no memory map is filled), so the building
process never holds more than one batch and one column range. The result is the same matrix,
value for value, as the in-memory build.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

#: bytes of (value + row index) entries gathered per column range
BUDGET = 256 * 2**20
#: chunks per text batch read from a list of chunks (a chunk file gives its own record batches)
TEXT_BATCH = 4096

Transform = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def text_batches(chunks: Sequence[Any], batch: int | None = None) -> Iterator[list[str]]:
    """The chunks' texts, a batch at a time, in order. A chunk file (``ChunkTable``) is read a
    record batch at a time with plain reads, so its pages do not stay mapped in this process."""
    if hasattr(chunks, "iter_search_texts"):
        yield from chunks.iter_search_texts()
        return
    batch = batch or TEXT_BATCH
    for s in range(0, len(chunks), batch):
        yield [c.search_text for c in chunks[s : s + batch]]


class SpillMatrix:
    """Triples spilled to ``workdir`` batch by batch, written as a CSC matrix at the end."""

    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._parts: list[Path] = []
        self.nnz = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> None:
        """One batch's entries: ``rows`` (global row numbers, ascending), ``cols`` (ascending
        within a row), ``vals``; every row of the batch is complete in it."""
        if not len(rows):
            return
        path = self.dir / f"part-{len(self._parts):06d}.npz"
        np.savez(path, rows=np.asarray(rows, np.int32), cols=np.asarray(cols, np.int32), vals=vals)
        self._parts.append(path)
        self.nnz += len(rows)

    def parts(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for path in self._parts:
            with np.load(path) as z:
                yield z["rows"], z["cols"], z["vals"]

    def write(self, files: dict[str, Path], n_cols: int, dtype: Any, transform: Transform | None = None,
              budget: int | None = None, progress: Any = None) -> None:
        """The CSC arrays into ``files["data"]``, ``files["indices"]`` (int32) and
        ``files["indptr"]`` (int64). ``transform(rows, cols, vals) -> (rows, cols, vals)`` maps a
        spilled batch to its final entries (new column ids below ``n_cols``, values, entries may
        be dropped) and is called once per batch. ``budget``: bytes per column range (default
        :data:`BUDGET`)."""
        dtype = np.dtype(dtype)
        if transform is not None:  # final values, once; the raw parts are dropped as they go
            final = SpillMatrix(self.dir / "final")
            for path, (r, c, v) in zip(list(self._parts), self.parts()):
                final.add(*transform(r, c, v))
                path.unlink()
            self._parts, self.nnz = final._parts, final.nnz
        counts = np.zeros(n_cols, dtype=np.int64)
        for _, c, _ in self.parts():
            counts += np.bincount(c, minlength=n_cols)
        indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        nnz = int(indptr[-1])
        per = max(1, (budget or BUDGET) // (dtype.itemsize + 4))
        with open(files["data"], "wb") as fd, open(files["indices"], "wb") as fi:
            _header(fd, dtype, nnz)
            _header(fi, np.dtype(np.int32), nnz)
            for lo, hi in _ranges(indptr, per):
                base = indptr[lo]
                data = np.empty(int(indptr[hi] - base), dtype=dtype)
                rows = np.empty(len(data), dtype=np.int32)
                cursor = indptr[lo:hi] - base
                for r, c, v in self.parts():
                    keep = (c >= lo) & (c < hi)
                    if not keep.any():
                        continue
                    r, c, v = r[keep], c[keep], v[keep]
                    order = np.argsort(c, kind="stable")  # rows stay ascending within a column
                    r, c, v = r[order], c[order] - lo, v[order]
                    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
                    sizes = np.diff(np.r_[starts, len(c)])
                    pos = cursor[c] + (np.arange(len(c)) - np.repeat(starts, sizes))
                    data[pos], rows[pos] = v, r
                    cursor[c[starts]] += sizes
                data.tofile(fd)
                rows.tofile(fi)
                if progress is not None:
                    progress.update(len(data))
        np.save(files["indptr"], indptr)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "SpillMatrix":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ranges(indptr: np.ndarray, per: int) -> Iterator[tuple[int, int]]:
    """Consecutive column ranges of at most ``per`` entries each (a larger column alone)."""
    n = len(indptr) - 1
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(indptr, indptr[lo] + per, side="right")) - 1
        hi = min(max(hi, lo + 1), n)
        yield lo, hi
        lo = hi


def _header(f: Any, dtype: np.dtype, n: int) -> None:
    np.lib.format.write_array_header_1_0(
        f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (n,)})


def scratch(parent: Path | None) -> Path:
    """A scratch directory for the spilled batches: inside the index's own temporary directory
    when it has one (removed with it on failure), else a system temporary directory."""
    if parent is not None:
        path = Path(parent) / ".spill"
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix="ragsweep-spill-"))


def in_scratch(write: Callable[[Path], None], read: Callable[[Path], Any]) -> Any:
    """An index built without a cache: ``write(dir)`` into a temporary directory, ``read(dir)``
    back into memory, the directory removed either way."""
    tmp = Path(tempfile.mkdtemp(prefix="ragsweep-index-"))
    try:
        write(tmp)
        return read(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def grow(counts: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """``counts`` (entries per column so far) widened to ``width`` columns plus this batch's."""
    if len(counts) < width:
        counts = np.concatenate((counts, np.zeros(width - len(counts), dtype=counts.dtype)))
    return counts + np.bincount(cols, minlength=width)


__all__ = ["SpillMatrix", "grow", "in_scratch", "scratch", "text_batches"]
