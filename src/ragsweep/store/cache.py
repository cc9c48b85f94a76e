"""One content-addressed store shared by every stage and every job of a sweep.

Keys are ``sha256(stage, stage config, input content)``; values are pickled into one SQLite
database in WAL mode, so several processes (parallel Hydra jobs) can read and write it at once.
Large artifacts (persisted indexes) live in directories under ``blobs/`` that are written to a
temporary name and renamed into place, so a killed job never leaves a half-written index that
looks finished.

Only successful results are ever stored: callers put a value after the work succeeded, and a
failed model call is never written.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Generic, Iterable, Iterator, Mapping, TypeVar

MISSING = object()
#: no single SQLite value may be larger than this: big artifacts go to files under ``blobs/``
MAX_VALUE_BYTES = 64 * 1024 * 1024
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    stage TEXT NOT NULL,
    value BLOB NOT NULL,
    created REAL NOT NULL
)
"""


def _canonical(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return _canonical(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, float) and obj != obj:  # NaN
        return "NaN"
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    # OmegaConf containers and anything else with a stable repr of plain data
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(obj, (DictConfig, ListConfig)):
            return _canonical(OmegaConf.to_container(obj, resolve=True))
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"cannot hash a {type(obj).__name__} into a cache key")


#: ragsweep 0.1's module paths, as cache keys spell a component's class: the package by stage moved
#: these modules without changing what their classes compute, so a key keeps the old spelling and a
#: warm cache (judge labels, retrieval runs) still hits after the move
_KEY_PATHS = (("ragsweep.rag.retriever.", "ragsweep.retriever."), ("ragsweep.judge.llm_judge", "ragsweep.evaluator.judge"),
              ("ragsweep.judge.", "ragsweep.evaluator."))


def class_key(cls: type) -> str:
    """A class's name in cache keys: ``module.qualname`` in the spelling keys were written with."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    for new, old in _KEY_PATHS:
        if name.startswith(new):
            return old + name[len(new):]
    return name


def content_hash(*parts: Any) -> str:
    """Stable sha256 over plain data (dicts, lists, dataclasses, scalars)."""
    payload = json.dumps(_canonical(list(parts)), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class _Fetch(Generic[T]):
    """One pass of the seam: read the stored values, hand out the misses, store what comes back."""

    def __init__(self, cache: "Cache | None", stage: str, keys: Mapping[T, str], keep: Callable[[Any], bool] | None,
                 persist: bool = True):
        self.cache, self.stage, self.keys, self.keep = cache, stage, keys, keep
        self.persist = persist
        by_key: dict[str, T] = {}
        for item, key in keys.items():
            by_key.setdefault(key, item)
        self.found = cache.get_many(stage, by_key, accept=keep) if cache is not None else {}
        self.missing = [item for key, item in by_key.items() if key not in self.found]

    def blocks(self, block: int | None) -> Iterator[list[T]]:
        size = block or max(1, len(self.missing))
        return (self.missing[i : i + size] for i in range(0, len(self.missing), size))

    def store(self, new: Mapping[T, Any]) -> None:
        fresh = {self.keys[item]: value for item, value in new.items()}
        self.found.update(fresh)
        if self.cache is not None and self.persist:
            keep = self.keep
            self.cache.put_many(self.stage, {k: v for k, v in fresh.items() if keep is None or keep(v)})

    def result(self) -> dict[T, Any]:
        return {item: self.found[key] for item, key in self.keys.items() if key in self.found}


def fetch(
    cache: "Cache | None",
    stage: str,
    keys: Mapping[T, str],
    compute: Callable[[list[T]], Mapping[T, Any]],
    *,
    block: int | None = None,
    keep: Callable[[Any], bool] | None = None,
) -> dict[T, Any]:
    """The one cache seam every stage goes through: keys in, values out.

    ``keys`` maps each item (a text, a request, a query id ...) to its cache key. Stored values
    are read in one batch (a hit or miss is counted per distinct key under ``stage``); the
    missing items are computed once per distinct key by ``compute(items) -> {item: value}``
    and stored. ``block``: compute and store the misses that many at a time, so a killed job
    keeps every finished block. ``keep(value)``: store only values it accepts (a failed model
    call is returned but never stored), and use a stored value only when it accepts it (a
    refused stored value counts as a miss: it is computed again and replaced). Items that
    ``compute`` leaves out of its result are left out of the answer. ``cache`` may be None:
    everything is computed, nothing stored.
    """
    job = _Fetch(cache, stage, keys, keep)
    for part in job.blocks(block):
        job.store(compute(part))
    return job.result()


def fetch_one(cache: "Cache | None", stage: str, key: str, compute: Callable[[], Any]) -> Any:
    """:func:`fetch` for one value: the stored one, or ``compute()`` stored."""
    return fetch(cache, stage, {key: key}, lambda missing: {key: compute()})[key]


async def afetch(cache: "Cache | None", stage: str, keys: Mapping[T, str],
                 compute: Callable[[list[T]], Awaitable[Mapping[T, Any]]], *,
                 block: int | None = None, keep: Callable[[Any], bool] | None = None,
                 stored_by_compute: bool = False) -> dict[T, Any]:
    """:func:`fetch` for async code: ``compute`` is awaited (same keys, counts and storing).

    ``stored_by_compute``: ``compute`` puts each value in the cache itself as soon as it has it
    (model calls, which finish one by one), so the seam only reads and counts.
    """
    job = _Fetch(cache, stage, keys, keep, persist=not stored_by_compute)
    for part in job.blocks(block):
        job.store(await compute(part))
    return job.result()


class Cache:
    """Content-addressed key/value store with per-stage hit and miss counters."""

    def __init__(self, root: str | os.PathLike, enabled: bool = True, timeout_s: float = 120.0):
        self.root = Path(root)
        self.enabled = enabled
        self.timeout_s = timeout_s
        self.stats: Counter[str] = Counter()
        self._local = threading.local()
        self._lock = threading.Lock()
        if enabled:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "blobs").mkdir(exist_ok=True)
            self._retrying(lambda con: con.execute(_SCHEMA))

    # -- connection -------------------------------------------------------------------------
    @property
    def db_path(self) -> Path:
        return self.root / "cache.db"

    def _connect(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            con = sqlite3.connect(self.db_path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False)
            try:
                # switching a new database to WAL takes an exclusive lock and SQLite does not wait for
                # it (no busy handler): processes opening a fresh cache together get "database is
                # locked" here, so the caller (_retrying) tries again on a new connection
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=NORMAL")
                con.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            except sqlite3.Error:
                con.close()
                raise
            self._local.con = con
        return con

    def _retrying(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                with self._lock:
                    return fn(self._connect())
            except sqlite3.OperationalError as exc:  # "database is locked" under heavy contention
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    # -- keys -------------------------------------------------------------------------------
    @staticmethod
    def key(stage: str, *parts: Any) -> str:
        return content_hash(stage, *parts)

    # -- values -----------------------------------------------------------------------------
    def get(self, stage: str, key: str, default: Any = MISSING, count: bool = True) -> Any:
        if not self.enabled:
            if count:
                self.stats[f"{stage}/misses"] += 1
            return default
        row = self._retrying(lambda con: con.execute("SELECT value FROM kv WHERE key=?", (key,)).fetchone())
        if row is None:
            if count:
                self.stats[f"{stage}/misses"] += 1
            return default
        if count:
            self.stats[f"{stage}/hits"] += 1
        return pickle.loads(row[0])

    def get_many(self, stage: str, keys: Iterable[str], accept: Callable[[Any], bool] | None = None) -> dict[str, Any]:
        """Values found for ``keys`` (missing keys absent); counts a hit or miss per key.

        ``accept(value)``: a stored value it refuses (e.g. a ranking stored shallower than now
        asked for) is left out and counted as a miss.
        """
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        if self.enabled:
            for i in range(0, len(keys), 500):
                batch = keys[i : i + 500]
                marks = ",".join("?" * len(batch))
                rows = self._retrying(
                    lambda con: con.execute(f"SELECT key, value FROM kv WHERE key IN ({marks})", batch).fetchall()
                )
                found.update({k: pickle.loads(v) for k, v in rows})
        if accept is not None:
            found = {k: v for k, v in found.items() if accept(v)}
        self.stats[f"{stage}/hits"] += len(found)
        self.stats[f"{stage}/misses"] += len(keys) - len(found)
        return found

    def put(self, stage: str, key: str, value: Any) -> None:
        self.put_many(stage, {key: value})

    def put_many(self, stage: str, items: dict[str, Any]) -> None:
        if not self.enabled or not items:
            return
        now = time.time()
        rows = [(k, stage, pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL), now) for k, v in items.items()]
        for _, _, blob, _ in rows:
            if len(blob) > MAX_VALUE_BYTES:
                raise ValueError(
                    f"cache stage {stage!r}: a value of {len(blob) / 2**20:,.0f} MB is larger than the "
                    f"{MAX_VALUE_BYTES // 2**20} MB a cache value may hold: store it as a file under the cache's "
                    "blobs/ directory (Cache.blob_dir) and cache only its path"
                )

        def write(con: sqlite3.Connection) -> None:
            con.execute("BEGIN IMMEDIATE")
            try:
                con.executemany("INSERT OR REPLACE INTO kv (key, stage, value, created) VALUES (?,?,?,?)", rows)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

        self._retrying(write)

    def get_or_compute(self, stage: str, key: str, fn: Callable[[], Any]) -> Any:
        return fetch_one(self, stage, key, fn)

    # the one seam, as methods: ``cache.fetch(stage, keys, compute)`` is ``fetch(cache, stage, ...)``
    fetch = fetch
    afetch = afetch

    # -- directories for persisted artifacts -------------------------------------------------
    def blob_dir(self, stage: str, key: str, writer: Callable[[Path], None]) -> Path:
        """The finished directory for ``key``; built by ``writer(tmpdir)`` on a miss.

        The directory is built under a unique temporary name and renamed into place, so a
        concurrent or killed writer never exposes a partial directory.
        """
        if not self.enabled:
            raise RuntimeError("blob_dir needs an enabled cache")
        final = self.root / "blobs" / stage / key
        if final.is_dir():
            self.stats[f"{stage}/hits"] += 1
            return final
        self.stats[f"{stage}/misses"] += 1
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{key}-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            writer(tmp)
            try:
                os.rename(tmp, final)
            except OSError:  # another process finished first: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    # -- maintenance -------------------------------------------------------------------------
    def integrity_check(self) -> str:
        return self._retrying(lambda con: con.execute("PRAGMA integrity_check").fetchone()[0])

    def count(self, stage: str | None = None) -> int:
        if stage is None:
            return self._retrying(lambda con: con.execute("SELECT COUNT(*) FROM kv").fetchone()[0])
        return self._retrying(lambda con: con.execute("SELECT COUNT(*) FROM kv WHERE stage=?", (stage,)).fetchone()[0])


class Salted:
    """A view of a :class:`Cache` whose every stage is suffixed with ``@salt``: the same work done
    again on purpose (``evaluator.repeats``: a stochastic judge asked again) gets its own entries
    instead of the first answer's."""

    def __init__(self, cache: Cache, salt: str):
        self._cache = cache
        self._salt = salt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)

    def _stage(self, stage: str) -> str:
        return f"{stage}@{self._salt}"

    def get(self, stage: str, key: str, *args: Any, **kw: Any) -> Any:
        return self._cache.get(self._stage(stage), key, *args, **kw)

    def get_many(self, stage: str, keys: Iterable[str], *args: Any, **kw: Any) -> dict[str, Any]:
        return self._cache.get_many(self._stage(stage), keys, *args, **kw)

    def put(self, stage: str, key: str, value: Any) -> None:
        self._cache.put(self._stage(stage), key, value)

    def put_many(self, stage: str, items: dict[str, Any]) -> None:
        self._cache.put_many(self._stage(stage), items)

    def get_or_compute(self, stage: str, key: str, fn: Callable[[], Any]) -> Any:
        return self._cache.get_or_compute(self._stage(stage), key, fn)

    def blob_dir(self, stage: str, key: str, writer: Callable[[Path], None]) -> Path:
        return self._cache.blob_dir(self._stage(stage), key, writer)
