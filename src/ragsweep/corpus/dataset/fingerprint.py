"""The identity of a corpus: a sha256 over every document's id and text, in order, and, for a
parsed file, its layout (where its pages and headings are: the markdown chunker splits at them).

Hashing a large corpus takes seconds, so a loader that reads files remembers the fingerprint of
what it built against each source file's ``(path, size, mtime, inode)`` and its own config
(:func:`remembered`); a later run over unchanged files reuses it instead of hashing again. The
memo lives in ``~/.cache/ragsweep/fingerprints.json`` (``RAGSWEEP_FINGERPRINTS`` overrides the
path); a changed size, mtime or inode of any source file is a different entry, and a file
written in the last few seconds is always hashed (a same-size rewrite may keep its mtime tick).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ragsweep.types import Document

VERSION = "docs-v1"


class Documents(list):
    """A list of documents that carries its fingerprint (``None``: not known yet)."""

    fingerprint: str | None = None


class Hasher:
    """The corpus fingerprint fed one document at a time (a corpus read as a stream)."""

    def __init__(self) -> None:
        self._h = hashlib.sha256(VERSION.encode() + b"\n")

    def add(self, d: Document) -> None:
        parts = [d.doc_id.encode("utf-8"), d.text.encode("utf-8", "surrogatepass")]
        if d.pages or d.headings:  # a plain-text document hashes as it always did
            layout = [list(d.pages), [[h.start, h.end, h.level, h.title] for h in d.headings]]
            parts.append(json.dumps(layout, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        for part in parts:
            self._h.update(len(part).to_bytes(8, "little"))
            self._h.update(part)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def hash_documents(documents: Iterable[Document]) -> str:
    h = Hasher()
    for d in documents:
        h.add(d)
    return h.hexdigest()


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """The fingerprint a loader attached, else computed now."""
    fp = getattr(documents, "fingerprint", None)
    return fp if fp else hash_documents(documents)


def memo_path() -> Path:
    env = os.environ.get("RAGSWEEP_FINGERPRINTS")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragsweep" / "fingerprints.json"


def source_key(paths: Sequence[str | os.PathLike], config: Any) -> str:
    """What identifies a loader's input without reading it: each file's stat and the config."""
    stats = []
    for p in paths:
        st = os.stat(p)
        stats.append([str(Path(p).resolve()), st.st_size, st.st_mtime_ns, st.st_ino])
    payload = json.dumps([VERSION, stats, config], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


#: a file modified less than this many seconds ago is hashed, not remembered ("racy git": a
#: rewrite of the same size within one timestamp tick would otherwise keep the old fingerprint)
RACY_S = 3.0


def _racy(paths: Sequence[str | os.PathLike]) -> bool:
    import time

    now = time.time()
    return any(now - os.stat(p).st_mtime < RACY_S for p in paths)


def _read_memo(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def remembered(paths: Sequence[str | os.PathLike], config: Any, documents: Sequence[Document],
               compute: Callable[[], str] | None = None) -> Documents:
    """``documents`` as :class:`Documents` with the fingerprint attached: the remembered one when
    every source file is unchanged, else hashed now and remembered."""
    docs = documents if isinstance(documents, Documents) else Documents(documents)
    try:
        key = source_key(paths, config)
    except OSError:
        docs.fingerprint = hash_documents(docs)
        return docs
    path = memo_path()
    if _racy(paths):  # written in the last seconds: a same-size rewrite could share its mtime
        docs.fingerprint = (compute or (lambda: hash_documents(docs)))()
        return docs
    memo = _read_memo(path)
    if key in memo:
        docs.fingerprint = memo[key]
        return docs
    docs.fingerprint = (compute or (lambda: hash_documents(docs)))()
    memo = _read_memo(path)  # another process may have written meanwhile
    memo[key] = docs.fingerprint
    if len(memo) > 1000:  # keep the memo small: the newest entries survive
        memo = dict(list(memo.items())[-1000:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}"
        tmp.write_text(json.dumps(memo))
        os.replace(tmp, path)
    except OSError:  # a read-only home: the fingerprint is still right, only not remembered
        pass
    return docs
