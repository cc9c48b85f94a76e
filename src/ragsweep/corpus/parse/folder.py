"""A folder of files as a stream of parsed documents, parsed once.

:func:`walk` lists the files (recursive, sorted, hidden names skipped, ``include``/``exclude``
globs matched against the path relative to the folder). :class:`FolderCorpus` turns them into
:class:`~ragsweep.types.Document` s in that order, a block of files at a time, through the
project's cache (:mod:`ragsweep.store.cache`):

- ``file-hash``: a file's sha256 by its ``(path, size, mtime, inode)``, so an unchanged file is
  never read again to be hashed (one written in the last ``RACY_S`` seconds is always hashed);
- ``parse``: a file's parse by ``(parser name, parser version, content hash)``: its text, title,
  pages and headings, or why it gave none (a damaged file fails the same way every time). Texts
  over :data:`LARGE_CHARS` are written as files under the cache's ``blobs/parsed/``.

So a warm run parses nothing, and one changed file re-parses that file only. Misses are parsed in
``workers`` processes. Files that give no text become parse-ledger rows (file, reason, fix).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ragsweep.store.cache import Cache
from ragsweep.corpus.parse import REASONS, Parsed, ParseFailure, Parser, parse_file, parser_for
from ragsweep.corpus.dataset.fingerprint import RACY_S
from ragsweep.types import Document

#: a parsed text longer than this is stored as a file under the cache's blobs/parsed/, not in the database
LARGE_CHARS = 1_000_000
#: files per block: hashed, looked up and parsed together
BLOCK = 64
#: fewer misses than this in a block are parsed in this process (starting workers costs more)
POOL_MIN = 8


@dataclass(frozen=True)
class Entry:
    """One file of the folder: ``rel`` (its ``doc_id``: the path relative to the folder, posix)."""

    rel: str
    path: Path
    size: int
    mtime_ns: int
    ino: int

    @property
    def parser(self) -> Parser | None:
        return parser_for(self.path)


def walk(root: Path, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[Entry]:
    """Every file under ``root`` (recursive, by relative path), hidden files and folders skipped;
    with ``include``, only paths matching one of its globs; never those matching ``exclude``
    (``fnmatch`` on the relative path, where ``*`` also matches ``/``: ``*.pdf``, ``drafts/*``)."""
    out = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith("."):
                continue
            path = Path(top) / name
            rel = path.relative_to(root).as_posix()
            if include and not any(fnmatch.fnmatchcase(rel, g) for g in include):
                continue
            if any(fnmatch.fnmatchcase(rel, g) for g in exclude):
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            out.append(Entry(rel, path, st.st_size, st.st_mtime_ns, st.st_ino))
    out.sort(key=lambda e: e.rel)
    return out


def ledger_row(entry: Entry, reason: str, detail: str = "") -> dict[str, str]:
    parser = entry.parser
    return {"file": entry.rel, "reason": reason, "fix": REASONS[reason], "detail": detail,
            "parser": parser.name if parser else ""}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _outcome_json(outcome: Parsed | ParseFailure) -> dict[str, Any]:
    if isinstance(outcome, ParseFailure):
        return {"failed": outcome.reason, "detail": outcome.detail}
    return {"parsed": outcome.to_json()}


def _parse_job(path: str) -> dict[str, Any]:
    """A worker's job: one file parsed, as plain data (what crosses the process boundary)."""
    parser = parser_for(path)
    assert parser is not None
    return _outcome_json(parse_file(Path(path), parser))


class FolderCorpus:
    """The files of a folder (``entries``, from :func:`walk`) as documents, parsed through the
    cache at ``cache_dir`` (None: parsed every time). ``ledger`` holds the rows of the last full
    pass (:meth:`stream` with ``every=True``, or :meth:`parse_all`)."""

    def __init__(self, root: Path, entries: list[Entry], cache_dir: str | None, workers: int | None = None,
                 progress: bool = True):
        self.root, self.entries, self.cache_dir = root, entries, cache_dir
        self.workers = workers or len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (workers or 1)
        self.progress = progress
        self.ledger: list[dict[str, str]] = []
        self.parsed_now = 0  # files parsed (not found in the cache) by this object
        self._cache: Cache | None = None

    # -- the cache --------------------------------------------------------------------------
    def cache(self) -> Cache | None:
        if self._cache is None and self.cache_dir:
            self._cache = Cache(self.cache_dir)
        return self._cache

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": None}

    def hashes(self, entries: Sequence[Entry]) -> dict[str, str]:
        """``rel`` -> content sha256: remembered by stat where the file is unchanged, else read."""
        cache = self.cache()
        keys = {e.rel: Cache.key("file-hash", str(e.path.resolve()), e.size, e.mtime_ns, e.ino) for e in entries}
        known = cache.get_many("file-hash", keys.values()) if cache is not None else {}
        out, new = {}, {}
        racy = time.time() - RACY_S
        for e in entries:
            sha = known.get(keys[e.rel])
            if sha is None:
                sha = _sha256(e.path)
                if e.mtime_ns / 1e9 < racy:  # a file written seconds ago may change within its mtime tick
                    new[keys[e.rel]] = sha
            out[e.rel] = sha
        if cache is not None and new:
            cache.put_many("file-hash", new)
        return out

    def parse_key(self, entry: Entry, sha: str) -> str:
        parser = entry.parser
        assert parser is not None
        return Cache.key("parse", parser.name, parser.version, sha)

    def _load(self, value: Any) -> dict[str, Any] | None:
        if isinstance(value, dict) and "file" in value:  # a large text, stored as a file
            try:
                return json.loads((Path(self.cache_dir) / value["file"]).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
        return value if isinstance(value, dict) else None

    def _store(self, outcomes: dict[str, dict[str, Any]]) -> None:
        cache = self.cache()
        if cache is None or not outcomes:
            return
        rows = {}
        for key, out in outcomes.items():
            if "parsed" in out and len(out["parsed"]["text"]) > LARGE_CHARS:
                rel = Path("blobs") / "parsed" / f"{key}.json"
                final = Path(self.cache_dir) / rel
                final.parent.mkdir(parents=True, exist_ok=True)
                tmp = final.parent / f".tmp-{key}-{uuid.uuid4().hex}"
                tmp.write_text(json.dumps(out), encoding="utf-8")
                os.replace(tmp, final)
                rows[key] = {"file": str(rel)}
            else:
                rows[key] = out
        cache.put_many("parse", rows)

    # -- parsing ----------------------------------------------------------------------------
    def outcomes(self, entries: Sequence[Entry], pool: list) -> Iterator[tuple[Entry, dict[str, Any] | None]]:
        """``(entry, outcome)`` for each entry in order (outcome None: no parser, or an empty
        file), from the cache or parsed now (``pool``: a one-item list holding the worker pool)."""
        live = [e for e in entries if e.parser is not None and e.size > 0]
        shas = self.hashes(live)
        keys = {e.rel: self.parse_key(e, shas[e.rel]) for e in live}
        cache = self.cache()
        found = cache.get_many("parse", set(keys.values())) if cache is not None else {}
        done = {k: v for k, v in ((k, self._load(v)) for k, v in found.items()) if v is not None}
        todo = list({keys[e.rel]: e for e in live if keys[e.rel] not in done}.values())
        jobs = [str(e.path) for e in todo]
        if len(todo) >= POOL_MIN and self.workers > 1:
            if not pool:
                import multiprocessing

                pool.append(ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn")))
            results = list(pool[0].map(_parse_job, jobs))
        else:
            results = [_parse_job(j) for j in jobs]
        new = {keys[e.rel]: r for e, r in zip(todo, results)}
        self.parsed_now += len(new)
        self._store(new)
        done.update(new)
        for e in entries:
            yield e, (done[keys[e.rel]] if e.rel in keys else None)

    def stream(self, every: bool = False) -> Iterator[Document]:
        """The parsed documents in file order, a block of files at a time (nothing kept). With
        ``every`` (the pass that checks the corpus), the ledger is rebuilt and a progress bar with
        files/s and an ETA is shown."""
        from tqdm.auto import tqdm

        ledger: list[dict[str, str]] = []
        bar = tqdm(total=len(self.entries), desc=f"{'parse':<9}", unit=" files", disable=not (every and self.progress),
                   dynamic_ncols=True, smoothing=0.1)
        pool: list = []
        try:
            for s in range(0, len(self.entries), BLOCK):
                block = self.entries[s: s + BLOCK]
                for e, out in self.outcomes(block, pool):
                    doc = self._document(e, out, ledger)
                    if doc is not None:
                        yield doc
                bar.update(len(block))
                if ledger:
                    bar.set_postfix_str(f"{len(ledger)} in the parse ledger", refresh=False)
        finally:
            bar.close()
            if pool:
                pool[0].shutdown()
        if every:
            self.ledger = ledger

    def _document(self, e: Entry, out: dict[str, Any] | None, ledger: list[dict[str, str]]) -> Document | None:
        if e.parser is None:
            ledger.append(ledger_row(e, "unsupported", e.path.suffix or "no extension"))
        elif out is None:
            ledger.append(ledger_row(e, "empty", "0 bytes"))
        elif "failed" in out:
            ledger.append(ledger_row(e, out["failed"], out.get("detail", "")))
        else:
            p = Parsed.from_json(out["parsed"])
            return Document(e.rel, p.text, p.title or Path(e.rel).stem, p.pages, p.headings)
        return None

    def parse_all(self) -> list[Document]:
        """Every document in memory (a corpus whose document table could not be written)."""
        return list(self.stream(every=True))

    def documents_of(self, rels: Iterable[str]) -> dict[str, Document]:
        """The documents of these files only (``doc_id`` = relative path), from the cache."""
        wanted = set(rels)
        picked = [e for e in self.entries if e.rel in wanted]
        out: dict[str, Document] = {}
        for e, res in self.outcomes(picked, []):
            doc = self._document(e, res, [])
            if doc is not None:
                out[doc.doc_id] = doc
        return out
