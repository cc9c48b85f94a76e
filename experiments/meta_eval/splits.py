"""The frozen meta-evaluation splits (``splits.json``, made once by ``make_splits.py`` before any
tuning): where they are and how they are read back, checked against their own sha256. A library
module (no ``__main__``), shared by the scripts that score on the splits."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

SPLITS_PATH = Path(__file__).resolve().parent / "splits.json"


def content_hash(splits: dict[str, Any]) -> str:
    """sha256 of the split lists (canonical JSON of every key but ``sha256`` itself)."""
    body = {k: v for k, v in splits.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def load_splits(path: Path | str = SPLITS_PATH) -> dict[str, Any]:
    """The frozen splits; raises if the file was edited by hand (hash mismatch)."""
    s = json.loads(Path(path).read_text())
    if content_hash(s) != s.get("sha256"):
        raise ValueError(f"{path}: sha256 does not match its content (the splits are frozen)")
    return s
